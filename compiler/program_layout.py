"""Where a program's tensors lie in DRAM: the regions of A, B, C and the host-only inputs
(`program_layouts`), by tensor name without generating the program (`region_layouts`), and
whether the output may be written in another dense layout (`check_output_layout`).

It exists apart from the code generator so that callers choosing layouts across mappings
(`compiler.network_chain`) and the cost model's transfer counts (`dse.cost_transfers`) get
the regions `codegen.generate` would use without emitting a program.
"""

from __future__ import annotations

from dataclasses import replace

from tensorforge.compiler.layout import DramLayout, aligned, dense_layout, gather_layout
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.tiling import Tiling, build_tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError


def region_layouts(workload: Workload, mapping: Mapping, config: AcceleratorConfig, *,
                   tile_major: bool = True, narrow_output: bool = False
                   ) -> dict[str, DramLayout]:
    """The DRAM regions `generate` would lay out, by tensor name, without generating the
    program (cheap: a caller comparing layouts across mappings need not emit each one)."""
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    tiling = build_tiling(lowering.device, mapping.choice, mapping.tile_sizes, config)
    layouts, _, _ = program_layouts(lowering, tiling, config, tile_major, narrow_output)
    return {layout.tensor: layout for layout in layouts.values()}


def program_layouts(lowering: Lowering, tiling: Tiling, config: AcceleratorConfig,
                    tile_major: bool, narrow_output: bool = False,
                    output_layout: DramLayout | None = None):
    """DRAM regions of A, B, C (``in_bits`` elements if ``narrow_output``, else ``acc_bits``;
    C in ``output_layout`` if given) and the host-only inputs; returns them and the end of
    the last."""
    device, sizes = lowering.device, lowering.device.sizes
    shapes, base, layouts = device.shapes, 0, {}
    for role in ("A", "B", "C"):
        tile = tiling.operand(role)
        name = tile.access.tensor
        wide = role == "C" and not narrow_output
        elem_bytes = config.precision.acc_bytes if wide else config.precision.in_bytes
        # tile-major blocks of one line's worth of the line index (its intrinsic block)
        block = tile.elem_size if tile_major and tile.elem is not None else 1
        layout = dense_layout(name, shapes[name], (tile.access,), sizes, base, elem_bytes,
                              tile.elem, block)
        if layout is None:
            layout = gather_layout(name, tile.access, sizes, base, elem_bytes, tile.elem, block)
        if role == "C" and output_layout is not None:
            layout = check_output_layout(layout, output_layout, shapes[name], base)
        layouts[role] = layout
        base = aligned(layout.end)
    extras = []
    fused = lowering.fused
    for name in lowering.extra_inputs:
        shape = fused.shapes[name]
        access = next(a for a in fused.inputs if a.tensor == name)
        layout = dense_layout(name, shape, (access,), fused.sizes, base, 8, None)
        extras.append(layout)
        base = aligned(layout.end)
    return layouts, extras, base


def check_output_layout(natural: DramLayout, wanted: DramLayout, shape: tuple[int, ...],
                        base: int) -> DramLayout:
    """``wanted`` at ``base`` as the output's region, if STOREs can write it as they would
    ``natural``, else `MappingError`. A STORE row is consecutive elements of the innermost
    dimension and rows are placed by the layout's strides, so ``wanted`` needs the same
    kind (dense), element size and innermost dimension, and either ``natural``'s line blocks
    or none; it may order the outer dimensions otherwise and pad around the tensor."""
    same = (natural.kind == wanted.kind == "dense" and natural.order[-1:] == wanted.order[-1:]
            and wanted.line_block in (1, natural.line_block)
            and natural.elem_bytes == wanted.elem_bytes and len(wanted.low) == len(shape))
    covers = same and all(
        low <= 0 and wanted.extents[wanted.order.index(d)] + low >= extent
        for d, (low, extent) in enumerate(zip(wanted.low, shape, strict=True)))
    if not covers:
        raise MappingError(f"the output cannot be stored as {wanted.describe()}: its STOREs "
                           f"write {natural.describe()} (same order, line blocks and element "
                           "size needed, the region covering the tensor)")
    return replace(wanted, tensor=natural.tensor, base=base)
