"""Where a convolution program's DRAM reads go: instruction fetch, weights, input (unique
interior, pre-padded border, halo overlap between tiles, the same tile read again).

    python benchmarks/conv_dram_breakdown.py [--workload resnet50:conv2_1b] [--pe 8x8]
        [--banks 8] [--mapping default|library|FILE]

Counts every byte each LOAD reads (rows x row_len elements at ``stride``) from the program's
instructions, by the DRAM region it falls in; the instruction stream is fetched once (what
the RTL's AXI read counter adds to the LOADs' bytes). "tile re-read" is the bytes of tile loads
beyond one per distinct tile (the walk loads every distinct tile equally often: the same
input window again per output-channel block, the weights again per spatial tile); "halo
overlap" the distinct tiles' bytes beyond the unique bytes (neighbouring windows overlap).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math

import numpy as np

from tensorforge.api import compile_workload
from tensorforge.compiler.zoo import load_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.isa import Buffer, Load


def breakdown(program) -> dict[str, object]:
    """Bytes read per source (see the module docstring)."""
    config = program.config
    regions = {layout.tensor: layout for layout in program.operands}
    counts = {name: np.zeros(layout.end - layout.base, np.int64)
              for name, layout in regions.items()}
    walk = _tile_loads(program)
    for ins in program.instructions:
        if not isinstance(ins, Load) or not ins.rows or ins.buffer is not Buffer.SPAD:
            continue
        eb = config.precision.in_bytes
        name = next(n for n, lay in regions.items() if lay.base <= ins.dram_addr < lay.end)
        base = regions[name].base
        for row in range(ins.rows):
            start = ins.dram_addr - base + row * ins.stride * eb
            counts[name][start:start + ins.row_len * eb] += 1
    device = program.lowering.device
    result: dict[str, object] = {"instruction_fetch": len(program.instructions) * 16}
    for name, layout in regions.items():
        read = int(counts[name].sum())
        touched = int((counts[name] > 0).sum())
        loads, distinct = walk[name]
        once = read * distinct // loads
        entry = {"read": read, "unique_touched": touched, "tile_loads": loads,
                 "distinct_tiles": distinct, "halo_overlap": once - touched,
                 "tile_reread": read - once,
                 "region_bytes": layout.end - layout.base}
        access = next(a for a in device.inputs if a.tensor == name)
        border = _border_bytes(layout, access, device, counts[name])
        if border is not None:
            entry["padding_read"], entry["padding_unique"] = border
        result[name] = entry
    result["instructions"] = len(program.instructions)
    result["instructions_by_kind"] = program.statistics()["instructions"]
    result["total"] = result["instruction_fetch"] + sum(
        result[n]["read"] for n in regions)
    return result


def _tile_loads(program) -> dict[str, tuple[int, int]]:
    """``(tile loads, distinct tiles)`` of each input operand in the mapping's loop walk."""
    from tensorforge.compiler.tiling import build_tiling

    mapping = program.mapping
    tiling = build_tiling(program.lowering.device, mapping.choice, mapping.tile_sizes,
                          program.config, mapping.holds)
    counts = {n: tiling.count(n) for n in mapping.order}
    result = {}
    for layout, role in zip(program.operands, ("A", "B"), strict=True):
        uses = tiling.keys(role)
        loads, last = 0, None
        for coords in itertools.product(*(range(counts[n]) for n in mapping.order)):
            key = tuple(c for n, c in zip(mapping.order, coords, strict=True) if n in uses)
            loads += key != last
            last = key
        result[layout.tensor] = (loads, math.prod(counts[n] for n in uses))
    return result


def _border_bytes(layout, access, device, counts) -> tuple[int, int] | None:
    """Bytes read of the zero border a pre-padded ("same") convolution input carries: the
    first ``(taps - 1) // 2`` and last ``taps // 2`` positions of each sliding dimension
    ``x+r``, and how many there are; None if the access has none."""
    sizes = device.sizes
    shape = device.shapes[access.tensor]
    mask = np.zeros(shape, np.int8)
    sliding = [d for d, dim in enumerate(access.dims) if len(dim.indices) == 2]
    if not sliding:
        return None
    inner = [slice(None)] * len(shape)
    for d in sliding:
        taps = sizes[access.dims[d].indices[1]]
        half = (taps - 1) // 2
        inner[d] = slice(half, shape[d] - (taps - 1 - half))
    mask[...] = 1
    mask[tuple(inner)] = 0
    marked = np.frombuffer(layout.pack(mask, access, sizes), np.int8)[: len(counts)] == 1
    return int(counts[marked].sum()), int(marked.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="resnet50:conv2_1b")
    parser.add_argument("--pe", default="8x8")
    parser.add_argument("--banks", type=int, default=8)
    parser.add_argument("--mapping", default="default")
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.pe.split("x"))
    config = AcceleratorConfig.from_dict({"array": {"rows": rows, "cols": cols},
                                          "scratchpad": {"banks": args.banks}})
    workload = load_workload(args.workload)
    program = compile_workload(workload, config, args.mapping)
    result = breakdown(program)
    # the layer's own bytes: the input without the border its pre-padding adds, the weights
    unique = (math.prod(workload.shapes[workload.inputs[0].tensor])
              - (result[workload.inputs[0].tensor].get("padding_unique", 0))
              + math.prod(workload.shapes[workload.inputs[1].tensor]))
    result["unique_bytes"] = unique
    result["ratio"] = round(result["total"] / unique, 3)
    result["mapping"] = program.mapping.to_dict()
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
