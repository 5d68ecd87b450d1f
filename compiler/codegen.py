"""Code generation: a `Mapping` becomes a `Program` of LOAD / COMPUTE / STORE / FINISH.

The program walks the tile loops in the mapping's order. Per tile step it

1. LOADs the A and B tiles whose coordinates changed (an operand whose indices the inner
   loops do not touch stays resident), each into the other half of its double buffer;
2. issues MAC COMPUTEs: the two step coordinates with the most iterations (and 9-bit line
   steps) form the affine micro-loop, the rest unroll into separate instructions. A C tile
   (the other half of the accumulator double buffer) starts from zero: ZERO instructions
   clear it before its first step, or, with ``overwrite``, the MACs that first visit each of
   its blocks carry the ISA's ``overwrite`` bit and write the block instead of adding to it
   (no ZERO pass: `_overwrite_plan` checks the bit's rule picks exactly those visits);
3. after the last step of a C tile (its reduction is complete: the mapping keeps partial sums
   in the accumulator), STOREs it.

Dependency flags follow VTA: a unit waits (pop) for the other unit's task that last touched
the buffer half it is about to use, and that task sends (push) exactly one token for it.
Because every unit runs its queue in order, waiting for the newest such task suffices, and
the k-th pop of a queue always matches its k-th push. So the next tile's LOADs overlap the
current COMPUTEs, and the previous tile's STORE overlaps them too. The first tile step is cut
into chunks along a reduction index (1, 1, 2, 4, ... blocks) and the last along an output
index (..., 4, 2, 1, 1), and the first chunk of the one and the last of the other again
along an output index, each chunk with its own tokens, so that the program's first COMPUTE
waits only for one block of each operand and its last STORE holds only one C block.

COMPUTE micro-loops keep the stationary operand's block in the PEs for a whole inner run
(`micro_loop`).

DRAM layout (`tensorforge.compiler.layout`): operands first (A, B at ``base`` 0 upwards,
each dense and padded with its line index innermost, or gathered when it cannot be), then the
output, then host-only inputs of later stages, then the instruction stream itself.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from tensorforge.compiler.layout import (
    DramLayout,
    aligned,
    check_addressable,
    dense_layout,
    gather_layout,
)
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_stage import OutputStage, ParamBlocks, ParamRegion
from tensorforge.compiler.param_reload import TileParams
from tensorforge.compiler.program import Program
from tensorforge.compiler.tiling import ROLES, OperandTile, Tiling, build_tiling
from tensorforge.compiler.tokens import COMPUTE, LOAD, STORE, Emitter
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.hw.dataflow_plan import plan_for
from tensorforge.isa import (
    FORMATS,
    Buffer,
    Compute,
    ComputeMode,
    Finish,
    Load,
    Opcode,
    Store,
)

LIMITS = {(op, f.name): (1 << f.bits) - 1 for op, fmt in FORMATS.items() for f in fmt}
MAX_ROWS = LIMITS[(Opcode.LOAD, "rows")]
MAX_STRIDE = LIMITS[(Opcode.LOAD, "stride")]
MAX_PAD = LIMITS[(Opcode.LOAD, "pad_after")]
MAX_STEP = LIMITS[(Opcode.COMPUTE, "a_inner")]
MAX_EXTENT = LIMITS[(Opcode.COMPUTE, "inner")]


def generate(workload: Workload, mapping: Mapping, config: AcceleratorConfig, *,
             overwrite: bool = True, tile_major: bool = True,
             output: OutputStage | None = None,
             output_layout: DramLayout | None = None,
             reload_params: bool | None = None) -> Program:
    """The program that runs ``workload`` as ``mapping`` says on ``config``.

    ``overwrite`` (the default) clears each C tile with the MAC ``overwrite`` bit of the
    instructions that first visit its blocks instead of ZERO instructions, which would take
    the compute unit a cycle per accumulator line; ``overwrite=False`` emits the ZEROs.
    ``tile_major`` (the default) lays operands and output out tile-major where it can
    (`tensorforge.compiler.layout`), so a tile's lines are few contiguous runs that the DMA
    moves as long bursts; ``tile_major=False`` keeps plain row-major regions.
    ``output`` (an accelerator with the output pipeline) adds the layer's bias,
    requantization and activation at STORE, which then writes ``in_bits`` elements: the
    parameter blocks (`output_stage`) are LOADed into the accumulator past the C tiles first,
    or, where they do not all fit there (or ``reload_params``), each output tile's ahead of
    it (`param_reload`).
    ``output_layout`` writes the output in that dense layout (its base ignored) instead of the
    unpadded one, e.g. the next layer's padded input (`tensorforge.compiler.network`): it
    must share the unpadded one's innermost dimension and cover the tensor
    (`check_output_layout`).
    """
    if output is not None:
        output.check(workload, config)
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    device = lowering.device
    tiling = build_tiling(device, mapping.choice, mapping.tile_sizes, config, mapping.holds)
    mapping.check_order(tiling)
    layouts, extras, end = _layouts(lowering, tiling, config, tile_major, output is not None,
                                    output_layout)
    emitter = Emitter()
    params, region = None, None
    if output is not None:
        params = ParamBlocks.for_output(output, lowering, layouts["C"], tiling.acc_lines(),
                                        config)
        # a first walk finds the blocks the STOREs use; they are LOADed before anything else
        _Walker(device, tiling, layouts, config, Emitter(), overwrite, params).run(mapping.order)
        if reload_params or (reload_params is None and not params.fits):
            params = TileParams(params, dict(tiling.slots)["C"])
            _Walker(device, tiling, layouts, config, Emitter(), overwrite, params).run(
                mapping.order)
            params.place()
        params.check_room()
        region = params.region(end)
        if params.transfer_before(0) is not None:
            _load_params(emitter, region, params.transfer_before(0))
        end = aligned(region.end)
    _Walker(device, tiling, layouts, config, emitter, overwrite, params, region).run(
        mapping.order)
    emitter.add(COMPUTE, Finish)
    instructions = emitter.build()
    check_addressable([*layouts.values(), *extras])
    return Program(config=config, workload=workload, lowering=lowering, mapping=mapping,
                   instructions=tuple(instructions), operands=(layouts["A"], layouts["B"]),
                   output=layouts["C"], extras=tuple(extras), instruction_base=aligned(end),
                   output_stage=output, params=region)


def region_layouts(workload: Workload, mapping: Mapping, config: AcceleratorConfig, *,
                   tile_major: bool = True, narrow_output: bool = False
                   ) -> dict[str, DramLayout]:
    """The DRAM regions `generate` would lay out, by tensor name, without generating the
    program (cheap: a caller comparing layouts across mappings need not emit each one)."""
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    tiling = build_tiling(lowering.device, mapping.choice, mapping.tile_sizes, config)
    layouts, _, _ = _layouts(lowering, tiling, config, tile_major, narrow_output)
    return {layout.tensor: layout for layout in layouts.values()}


def _load_params(emit: Emitter, region: ParamRegion, transfer: int, slot: int = 0,
                 after: list[int] = ()) -> None:
    """LOADs of a transfer of parameter lines into the accumulator. At the start, the
    program's first task: the first COMPUTE waits for a later LOAD, and every STORE for a
    COMPUTE, so no STORE reads them before they are in (the functional simulator's hazard
    check confirms it); per tile, see `param_reload`."""
    emit.begin(LOAD)
    for fields in region.loads(transfer):
        emit.add(LOAD, Load, **fields)
    emit.end(writes=[("P", slot)], after=after)


def _layouts(lowering: Lowering, tiling: Tiling, config: AcceleratorConfig, tile_major: bool,
             narrow_output: bool = False, output_layout: DramLayout | None = None):
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


# ---------------------------------------------------------------------- the walk


class _Walker:
    """Emits the instructions of every tile step, in loop order."""

    def __init__(self, device: Workload, tiling: Tiling, layouts: dict[str, DramLayout],
                 config: AcceleratorConfig, emitter: Emitter, overwrite: bool,
                 params: ParamBlocks | TileParams | None = None,
                 region: ParamRegion | None = None) -> None:
        self.device, self.tiling, self.config, self.emit = device, tiling, config, emitter
        self.overwrite = overwrite
        self.params = params  # None: STOREs write acc_bits elements
        self.region = region  # where per-tile parameter LOADs read (None: a first walk)
        self.tile_numbers: dict[tuple, int] = {}  # C tile -> its number in walk order
        self.sizes = device.sizes
        self.tiles = dict(tiling.tiles)
        self.block = dict(tiling.block)
        self.layouts = layouts
        self.addressing = {r: layouts[r].index_strides(tiling.operand(r).access) for r in layouts}
        self.uses = {r: tiling.operand(r).access.indices for r in layouts}
        self.keys = {r: tiling.keys(r) for r in layouts}  # a change of these reloads
        self.held = {r: tiling.held(r) for r in layouts}
        slots = dict(tiling.slots)
        self.bases = {}
        base = 0
        for role in ("A", "B"):
            lines = tiling.operand(role).lines
            self.bases[role] = [base + k * lines for k in range(slots[role])]
            base += lines * slots[role]
        lines = tiling.operand("C").lines
        self.bases["C"] = [k * lines for k in range(slots["C"])]
        for role in ("A", "B"):
            _check_sliding_axes(tiling.operand(role), self.addressing[role][1])
        self.plans = {r: _run_plan(tiling.operand(r), *self.addressing[r]) for r in layouts}
        self.mac_plans: dict[tuple[int, ...], list] = {}  # by blocks per index of a step
        self.overwrite_plans: dict[tuple[int, ...], list[bool] | None] = {}  # same keys
        self.stationary = plan_for(config).stationary.value  # the operand the PEs hold

    def run(self, order: tuple[str, ...]) -> None:
        counts = [range(self.tiling.count(n)) for n in order]
        steps = [dict(zip(order, coords, strict=True)) for coords in itertools.product(*counts)]
        current = {"A": None, "B": None, "C": None}
        slot = {"A": -1, "B": -1, "C": -1}
        plans = []
        self.tile_numbers.clear()
        for position, step in enumerate(steps):
            origin = {n: step[n] * self.tiles[n] for n in order}
            valid = {n: min(self.tiles[n], self.sizes[n] - origin[n]) for n in order}
            loads = []
            for role in ("A", "B", "C"):
                key = tuple(step[n] for n in self.keys[role])
                if key != current[role]:
                    current[role] = key
                    slot[role] = (slot[role] + 1) % len(self.bases[role])
                    if role != "C":
                        loads.append(role)
            new_c = position == 0 or self._key(steps[position - 1]) != current["C"]
            if new_c:
                self.tile_numbers[self._key(step)] = len(self.tile_numbers)
            last_c = (position == len(steps) - 1
                      or self._key(steps[position + 1]) != current["C"])
            cuts = ()
            if len(steps) > 1 and position in (0, len(steps) - 1):
                cuts = self._split_indices(loads, valid, first=position == 0)
            plans.append((loads, dict(slot), origin, valid, new_c, last_c, cuts))
        if self.tiling.holds:
            self._pipelined(plans)
            return
        for position, (loads, slot, origin, valid, new_c, last_c, cuts) in enumerate(plans):
            if not cuts:
                self._step(loads, slot, origin, valid, new_c, last_c)
            else:
                self._split_step(cuts, loads, slot, origin, valid, new_c, last_c,
                                 first=position == 0)

    def _step(self, loads, slot, origin, valid, new_c, last_c) -> None:
        for role in loads:
            self._load(role, slot[role], origin, valid)
        self._compute(slot, origin, valid, new_tile=new_c, first_visit=new_c)
        if last_c:
            self._store(slot["C"], origin, valid)

    def _pipelined(self, plans: list) -> None:
        """The steps of a mapping with a held operand, in the order the controller's in-order
        dispatch keeps every unit busy: a step's COMPUTEs, then the last C tile's STOREs
        (its COMPUTEs are done by then, so they dispatch at once instead of waiting in a
        full queue with everything behind them), then the next step's LOADs (they fill the
        other buffer half while these COMPUTEs run). Only held-operand programs so far: the
        fidelity set's programs, whose RTL runs the cost model is judged on, stay as they
        were."""
        pending = None  # the STORE of the last C tile, after the next step's COMPUTEs
        loaded = False  # the step's LOADs went out with the step before
        for position, (loads, slot, origin, valid, new_c, last_c, cuts) in enumerate(plans):
            if cuts:
                if pending:
                    self._store(*pending)
                    pending = None
                self._split_step(cuts, loads, slot, origin, valid, new_c, last_c,
                                 first=position == 0)
                loaded = False
                continue
            for role in [] if loaded else loads:
                self._load(role, slot[role], origin, valid)
            self._compute(slot, origin, valid, new_tile=new_c, first_visit=new_c)
            if pending:
                self._store(*pending)
                pending = None
            ahead = plans[position + 1] if position + 1 < len(plans) else None
            loaded = ahead is not None and not ahead[6] and bool(ahead[0])
            if loaded:
                for role in ahead[0]:
                    self._load(role, ahead[1][role], ahead[2], ahead[3])
            if last_c:
                pending = (slot["C"], origin, valid)
        if pending:
            self._store(*pending)

    # ------------------------------------------------------------------ split steps

    def _split_indices(self, loads: list[str], valid: dict, first: bool) -> tuple[str, ...]:
        """The indices to cut the first (or last) tile step along: none, one, or two.

        The first step's COMPUTEs can start only once its LOADs are in, the last step's
        STORE only once its COMPUTEs are done: with nothing to overlap them, they add up.
        Cut into chunks along a reduction index that the loaded operands use (first step)
        or an output index (last step), each chunk waits only for its own part, so loading,
        computing and storing overlap even there. The chunk at the program's very start (or
        end) is cut again along a second index, an output index a loaded operand uses (one
        of C), as it still waits for (or holds back) a whole block row of every tile: on a
        64-wide A tile, 64 of the first COMPUTE's 80 lines, a latency's worth at 64 cycles.
        The last step is cut first along an index the stationary operand uses, so the
        sub-chunks of its last chunk still hold a stationary block over several steps.
        """
        c_uses = set(self.uses["C"])
        candidates = []
        for n in self.sizes:
            blocks = -(-valid[n] // self.block[n])
            if blocks < 2 or (n in c_uses) == first or not self._chunkable(n):
                continue
            if first and not all(n in self.uses[r] for r in loads):
                continue
            candidates.append((not first and n in self.uses[self.stationary], blocks, n))
        if not candidates:
            return ()
        cut = max(candidates)[-1]
        inner = []
        for n in self.sizes:
            blocks = -(-valid[n] // self.block[n])
            if n == cut or blocks < 2 or n not in c_uses or not self._chunkable(n):
                continue
            if first and not any(n in self.uses[r] for r in loads):
                continue
            inner.append((blocks, n))
        return (cut, max(inner)[1]) if inner else (cut,)

    def _chunkable(self, n: str) -> bool:
        """A chunk of ``n`` sits at a fixed line offset in each tile (not a sliding axis),
        and no operand holds ``n`` whole (its tile is not cut along it)."""
        if any(n in held for held in self.held.values()):
            return False
        return all(len(dim.entries) == 1 for role in ROLES for dim in self.tiling.operand(role).dims
                   if n in dim.indices)

    def _split_step(self, cuts, loads, slot, origin, valid, new_c, last_c, first,
                    box: tuple = ()) -> None:
        """One tile step (or its boundary chunk ``box``, a tuple of ``(index, first block,
        blocks)``) as chunks of ``cuts[0]``: LOAD, COMPUTE (and STORE) per chunk; the chunk
        at the boundary (the first chunk of the first step, the last of the last) is cut
        again along ``cuts[1]``. ``loads``: the operands this step loads part by part."""
        n, rest = cuts[0], cuts[1:]
        blocks = -(-valid[n] // self.block[n])
        for role in loads:
            if n not in self.uses[role]:
                self._load(role, slot[role], origin, valid, *self._place(role, box))
        loads = [role for role in loads if n in self.uses[role]]
        chunks = _chunks(blocks, growing=first)
        for number, (start, length) in enumerate(chunks):
            local_origin = {**origin, n: origin[n] + start * self.block[n]}
            left = valid[n] - start * self.block[n]
            local_valid = {**valid, n: min(length * self.block[n], left)}
            local_box = (*box, (n, start, length))
            if rest and number == (0 if first else len(chunks) - 1):
                self._split_step(rest, loads, slot, local_origin, local_valid, new_c,
                                 last_c and n in self.uses["C"], first, local_box)
                continue
            for role in loads:
                self._load(role, slot[role], local_origin, local_valid,
                           *self._place(role, local_box))
            places = {r: self._place(r, local_box) for r in ROLES}
            # a chunk of the reduction visits every C block of the tile, one of an output
            # index only its own
            fresh = new_c and all(s == 0 or i in self.uses["C"] for i, s, _ in local_box)
            self._compute(slot, local_origin, local_valid,
                          new_tile=new_c and all(s == 0 for _, s, _ in local_box),
                          first_visit=fresh,
                          offsets={r: offset for r, (offset, _) in places.items()},
                          parts={r: part for r, (_, part) in places.items()})
            if last_c and n in self.uses["C"]:
                self._store(slot["C"], local_origin, local_valid, *self._place("C", local_box))
        if last_c and n not in self.uses["C"]:
            self._store(slot["C"], origin, valid, *self._place("C", box))

    def _place(self, role: str, box: tuple) -> tuple[int, tuple | None]:
        """``(line offset in the tile, part)`` of the chunk ``box`` of ``role``'s tile: the
        part names the box's cuts along the indices ``role`` uses (None: the whole tile)."""
        coef = self.tiling.operand(role).coef
        part = tuple(cut for cut in box if cut[0] in self.uses[role])
        return sum(coef.get(n, 0) * start for n, start, _ in box), part or None

    def _key(self, step: dict) -> tuple:
        return tuple(step[n] for n in self.uses["C"])

    # ------------------------------------------------------------------ data movement

    def _runs(self, tile: OperandTile, origin: dict, valid: dict, padded: bool):
        """``(line, dram_elem, rows, row_len, stride, pad_after)`` per LOAD/STORE row run.

        ``dram_elem`` is None for a run of zero lines only. Loads (``padded``) cover every
        line the valid blocks read; stores only the lines holding results.
        """
        offset, origin_strides, dims = self.plans[tile.role]
        if not dims:
            yield 0, offset, 1, 1, 0, 0
            return
        apart = [dim for dim in dims if dim[0] == "blocks"]  # outermost, see tiling
        if not apart:
            yield from self._strip_runs(offset, origin_strides, dims, origin, valid, padded, 0)
            return
        rest = dims[len(apart):]
        for coords in itertools.product(*(range(-(-valid[n] // size))
                                          for _, n, _, size, _, _, _ in apart)):
            local_origin, local_valid, line = dict(origin), dict(valid), 0
            for c, (_, n, _, size, step, _, _) in zip(coords, apart, strict=True):
                local_origin[n] += c * size
                local_valid[n] = min(size, valid[n] - c * size)
                line += c * step
            yield from self._strip_runs(offset, origin_strides, rest, local_origin, local_valid,
                                        padded, line)

    def _strip_runs(self, offset, origin_strides, dims, origin, valid, padded, first_line):
        """`_runs` of tile dimensions that are independent of each other (no blocks dims).

        Each outer dimension contributes, per coordinate, a line offset, a DRAM offset and
        whether it holds data; their combinations, in row-major order, start one run each.
        """
        address = offset + sum(origin[n] * stride for n, stride in origin_strides)
        data = [_valid_lines(dim, valid) for dim in dims]
        extent = [_needed_lines(dim, valid) for dim in dims] if padded else data
        starts = [(first_line, address, True, 1)]
        outer = zip(dims[:-1], extent, data, strict=False)
        for (kind, n, iota, size, step, dram_step, _), lines, held in outer:
            if kind == "group" and iota is not None:  # blocks along a line: shorter last row
                options = [(c * step, c * dram_step, c < held, min(size, valid[n] - c * size))
                           for c in range(lines)]
                starts = [(line + dl, at + da, ok and ok_c, row_len)
                          for line, at, ok, _ in starts for dl, da, ok_c, row_len in options]
            else:
                options = [(c * step, c * dram_step, c < held) for c in range(lines)]
                starts = [(line + dl, at + da, ok and ok_c, row_len)
                          for line, at, ok, row_len in starts for dl, da, ok_c in options]
        kind, n, iota, size, _, dram_step, _ = dims[-1]
        last, rows = extent[-1], data[-1]
        for line, at, ok, row_len in starts:
            if not ok:
                yield line, None, 0, 0, 0, last
            elif kind == "group" and iota is not None:  # blocks of the line index
                full = valid[n] // size
                if full:
                    yield line, at, full, size, dram_step, 0
                if valid[n] % size:
                    yield line + full, at + full * dram_step, 1, valid[n] % size, 0, 0
            else:
                yield line, at, rows, row_len, dram_step, last - rows

    def _load(self, role: str, slot: int, origin: dict, valid: dict, offset: int = 0,
              part: tuple | None = None) -> None:
        tile = self.tiling.operand(role)
        layout = self.layouts[role]
        base = self.bases[role][slot] + offset
        origin = {**origin, **dict.fromkeys(self.held[role], 0)}
        valid = {**valid, **{n: self.sizes[n] for n in self.held[role]}}
        emit = self.emit
        emit.begin(LOAD)
        dram_base, elem_bytes = layout.base, layout.elem_bytes
        runs = _coalesce(self._runs(tile, origin, valid, True), self._widen_to(role))
        for line, address, rows, row_len, stride, pad in runs:
            if address is None or rows == 0:
                _zero_lines(emit, base + line, pad)
            elif rows <= MAX_ROWS and 0 <= stride <= MAX_STRIDE and pad <= MAX_PAD:
                emit.add(LOAD, Load, line=base + line,  # the common case of `_rows`, inline
                         dram_addr=dram_base + address * elem_bytes, rows=rows, row_len=row_len,
                         stride=stride if rows > 1 else 0, buffer=Buffer.SPAD)
                if pad:
                    emit.add(LOAD, Load, line=base + line + rows, pad_after=pad)
            else:
                _rows(emit, Load, base + line, layout, address, rows, row_len, stride, pad)
        emit.end(writes=[_region(role, slot, part)])

    def _widen_to(self, role: str) -> int:
        """Elements a row of ``role`` may be widened to (`_coalesce`): its tile-major block
        where the region's line dimension is exactly the line index, else 1."""
        layout, elem = self.layouts[role], self.tiling.operand(role).elem
        if layout.line_block > 1 and layout.extents[-1] == self.sizes.get(elem):
            return layout.line_block
        return 1

    def _store(self, slot: int, origin: dict, valid: dict, offset: int = 0,
               part: tuple | None = None) -> None:
        tile = self.tiling.operand("C")
        emit = self.emit
        emit.begin(STORE)
        base = self.bases["C"][slot] + offset
        runs = _coalesce(self._runs(tile, origin, valid, False), self._widen_to("C"))
        params = None if self.params is None else self.params.for_tile(self._tile(origin))
        for line, address, rows, row_len, stride, _ in runs:
            if address is None or not rows:
                continue
            if params is None:
                _rows(emit, Store, base + line, self.layouts["C"], address, rows, row_len,
                      stride, 0)
                continue
            for first, count, fields in params.store_groups(address, rows, row_len, stride):
                _rows(emit, Store, base + line + first, self.layouts["C"],
                      address + first * stride, count, row_len, stride, 0, fields)
        emit.end(reads=[_region("C", slot, part)])

    # ------------------------------------------------------------------ compute

    def _compute(self, slot: dict, origin: dict, valid: dict, new_tile: bool,
                 first_visit: bool, offsets: dict | None = None,
                 parts: dict | None = None) -> None:
        """MAC COMPUTEs of one tile step (or chunk), clearing C first where it starts a tile.

        ``new_tile``: the first call of a C tile (ZERO clears all of it); ``first_visit``:
        its C blocks are visited for the first time in their tile (``overwrite`` clears them).
        """
        emit = self.emit
        offsets = offsets or {}
        parts = parts or {}
        c_base = self.bases["C"][slot["C"]]
        emit.begin(COMPUTE)
        counts = tuple(-(-valid[n] // self.block[n]) for n in self.sizes)
        plan = self.mac_plans.get(counts)
        if plan is None:
            plan = self.mac_plans[counts] = self._mac_plan(dict(zip(self.sizes, counts,
                                                                     strict=True)))
        overwrites = [False] * len(plan)
        if self.overwrite and first_visit:
            if counts not in self.overwrite_plans:
                self.overwrite_plans[counts] = _overwrite_plan(plan, self.config.blocks["C"].lines)
            if self.overwrite_plans[counts] is not None:
                overwrites = self.overwrite_plans[counts]
            else:  # the rule cannot express this plan's first visits: clear them with ZEROs
                self._zero_first_visits(plan, c_base + offsets.get("C", 0))
        elif new_tile and not self.overwrite:
            self._zero_tile(c_base)
        a_base = self.bases["A"][slot["A"]] + offsets.get("A", 0) + self._held_offset("A", origin)
        b_base = self.bases["B"][slot["B"]] + offsets.get("B", 0) + self._held_offset("B", origin)
        acc_base = c_base + offsets.get("C", 0)
        for (acc, a, b, loop), overwrite in zip(plan, overwrites, strict=True):
            emit.add(COMPUTE, Compute, mode=ComputeMode.MAC, acc_base=acc_base + acc,
                     a_base=a_base + a, b_base=b_base + b, overwrite=overwrite, **loop)
        reads = [_region(r, slot[r], parts.get(r)) for r in ("A", "B")]
        tile = self._tile(origin) if new_tile and self.params is not None else None
        if tile is not None and self.params.slot(tile) is not None:
            reads.append(("P", self.params.slot(tile)))  # the tile's blocks are in
        task = emit.end(reads=reads, writes=[_region("C", slot["C"], parts.get("C"))])
        if tile is not None and self.params.transfer_before(tile + 1) is not None:
            _load_params(emit, self.region, self.params.transfer_before(tile + 1),
                         self.params.slot(tile + 1), after=[task])

    def _tile(self, origin: dict) -> int:
        """The number of the C tile a step (or chunk) at ``origin`` belongs to."""
        return self.tile_numbers[tuple(origin[n] // self.tiles[n] for n in self.uses["C"])]

    def _held_offset(self, role: str, origin: dict) -> int:
        """Lines from ``role``'s held tile to the step's block of its held indices."""
        coef = self.tiling.operand(role).coef
        return sum(coef.get(n, 0) * (origin[n] // self.block[n]) for n in self.held[role])

    def _zero_tile(self, c_base: int) -> None:
        """ZEROs of every block of the C tile at ``c_base``."""
        block_lines = self.config.blocks["C"].lines
        count = self.tiling.operand("C").lines // block_lines
        step = block_lines if block_lines <= MAX_STEP else 0
        for start in range(0, count, MAX_EXTENT if step else 1):
            self.emit.add(COMPUTE, Compute, mode=ComputeMode.ZERO,
                          inner=min(MAX_EXTENT, count - start) if step else 1,
                          acc_base=c_base + start * block_lines, acc_inner=step)

    def _zero_first_visits(self, plan: list, acc_base: int) -> None:
        """ZEROs of the C blocks ``plan`` visits (one per block: a rare fallback)."""
        blocks = sorted({acc for acc, _ in _visits(plan)})
        for acc in blocks:
            self.emit.add(COMPUTE, Compute, mode=ComputeMode.ZERO, acc_base=acc_base + acc)


    def _mac_plan(self, counts: dict[str, int]) -> list[tuple[int, int, int, dict]]:
        """MAC COMPUTEs of a tile step with ``counts`` blocks per index, as ``(C, A, B block
        offsets from the buffer bases, the other fields)``.

        The micro-loop comes from `micro_loop`; the other indices unroll into separate
        instructions.
        """
        coefs = {r: self.tiling.operand(r).coef for r in ("C", "A", "B")}
        inner, outer = micro_loop(counts, coefs, self.stationary)
        rest = [n for n in counts if n not in (inner, outer)]
        plan = []
        for coords in itertools.product(*(range(counts[n]) for n in rest)):
            start = dict(zip(rest, coords, strict=True))
            for o0 in range(0, counts.get(outer, 1), MAX_EXTENT):
                for i0 in range(0, counts.get(inner, 1), MAX_EXTENT):
                    at = {**start, **({outer: o0} if outer else {}),
                          **({inner: i0} if inner else {})}
                    acc, a, b = (sum(at.get(n, 0) * c for n, c in coefs[r].items())
                                 for r in ("C", "A", "B"))
                    plan.append((acc, a, b, {
                        "outer": min(MAX_EXTENT, counts[outer] - o0) if outer else 1,
                        "inner": min(MAX_EXTENT, counts[inner] - i0) if inner else 1,
                        "acc_outer": coefs["C"].get(outer, 0),
                        "acc_inner": coefs["C"].get(inner, 0),
                        "a_outer": coefs["A"].get(outer, 0), "a_inner": coefs["A"].get(inner, 0),
                        "b_outer": coefs["B"].get(outer, 0), "b_inner": coefs["B"].get(inner, 0),
                    }))
        return plan

def _visits(plan: list):
    """``(C block offset, (instruction, step))`` of every MAC step of ``plan``, in order."""
    for number, (acc, _, _, loop) in enumerate(plan):
        for o in range(loop["outer"]):
            for i in range(loop["inner"]):
                yield acc + o * loop["acc_outer"] + i * loop["acc_inner"], (number, o, i)


def _overwrite_plan(plan: list, block_lines: int) -> list[bool] | None:
    """The ``overwrite`` bit of each instruction of ``plan``, so that exactly the first visit
    of each C block writes it (`Compute.overwrites`); None if the rule cannot express that
    (an instruction both first-visits a block and revisits one at an overwriting step, or C
    blocks overlap partially)."""
    written: set[int] = set()  # C lines an earlier step of the plan wrote
    first_steps: list[set] = [set() for _ in plan]
    for acc, (number, o, i) in _visits(plan):
        lines = range(acc, acc + block_lines)
        fresh = [line not in written for line in lines]
        if any(fresh) and not all(fresh):
            return None
        if all(fresh):
            first_steps[number].add((o, i))
            written.update(lines)
    flags = []
    for (_, _, _, loop), firsts in zip(plan, first_steps, strict=True):
        probe = Compute(overwrite=True, outer=loop["outer"], inner=loop["inner"],
                        acc_outer=loop["acc_outer"], acc_inner=loop["acc_inner"])
        ruled = {(o, i) for o in range(loop["outer"]) for i in range(loop["inner"])
                 if probe.overwrites(o, i)}
        if firsts and firsts != ruled:
            return None
        flags.append(bool(firsts))
    return flags


def _coalesce(runs, widen_to: int) -> list[tuple]:
    """`_Walker._runs` with neighbouring runs joined where their rows lie back to back in
    DRAM and in the buffer, so each becomes one LOAD or STORE of long bursts.

    ``widen_to`` > 1 (a tile-major region whose line dimension ends with the index, so its
    last block's tail is the region's zero padding) widens a row shorter than that (the
    index's last, partial block) to the whole block: a LOAD reads the zeros it would
    otherwise fill in, a STORE writes padding the output's reader skips, and the rows of a
    partial block stay back to back too.
    """
    joined: list[list] = []
    for line, address, rows, row_len, stride, pad in runs:
        if address is not None and rows and 0 < row_len < widen_to:
            row_len = widen_to
        if rows == 1:
            stride = row_len  # a single row is back to back with anything right after it
        if joined and address is not None and rows:
            last = joined[-1]
            if (last[1] is not None and last[5] == 0 and last[3] == row_len
                    and last[4] == row_len == stride and last[0] + last[2] == line
                    and last[1] + last[2] * row_len == address):
                last[2] += rows
                last[5] = pad
                continue
        joined.append([line, address, rows, row_len, stride, pad])
    return [tuple(run) for run in joined]


def _region(role: str, slot: int, part: tuple | None) -> tuple:
    """A buffer half, or one chunk of it (`tokens.Emitter` relates the two)."""
    return (role, slot) if part is None else (role, slot, part)


def _chunks(blocks: int, growing: bool) -> list[tuple[int, int]]:
    """``(first block, blocks)`` chunks covering ``blocks``: 1, 1, 2, 4, ... when ``growing``
    (each chunk computes while the next, twice as big, loads), the reverse otherwise (the
    last STORE, after the last chunk, is short)."""
    sizes, total = [], 0
    while total < blocks:
        size = min(max(1, total), blocks - total)
        sizes.append(size)
        total += size
    if not growing:
        sizes.reverse()
    starts = itertools.accumulate([0, *sizes[:-1]])
    return list(zip(starts, sizes, strict=True))


def micro_loop(counts: dict[str, int], coefs: dict[str, dict[str, int]], stationary: str
                ) -> tuple[str | None, str | None]:
    """``(inner, outer)`` indices of a tile step's COMPUTE micro-loop.

    The inner loop runs over an index the stationary operand does not use, so its block stays
    in the PEs for a whole inner run instead of being reloaded every step; among those (and
    then among the rest, for the outer loop) the one with the most blocks makes the longest
    instructions. On a tie an output index goes first: it gives each step its own C block, so
    consecutive steps do not wait for each other's accumulator writes.
    """
    loopable = [n for n in counts if counts[n] > 1
                and all(coefs[r].get(n, 0) <= MAX_STEP for r in coefs)]
    loopable.sort(key=lambda n: (-counts[n], n not in coefs["C"]))
    keeps = [n for n in loopable if coefs[stationary].get(n, 0) == 0]
    inner = keeps[0] if keeps else (loopable[0] if loopable else None)
    outer = next((n for n in loopable if n != inner), None)
    return inner, outer


def _run_plan(tile: OperandTile, offset: int, strides: dict[str, int]):
    """``(offset, ((index, stride), ...), dims)`` that `_Walker._runs` walks for one operand.

    A dim is ``(kind, index, intrinsic index, size, line step, DRAM step)``: ``index`` is the
    dim's first device index (None if no device index is matched to it), the DRAM step is
    the element distance between neighbouring positions.
    """
    dims = []
    for dim in tile.dims:
        n, iota, size = next((e for e in dim.entries if e[0]), (None, None, 1))
        along = 0 if n is None else strides[n] * (1 if dim.is_line_axis else size)
        dims.append((dim.kind, n, iota, size, dim.step, along, dim.entries))
    uses = tuple((n, strides[n]) for n in tile.access.indices)
    return offset, uses, tuple(dims)


def _valid_lines(dim: tuple, valid: dict) -> int:
    """Lines of one tile dimension that hold data (``valid`` elements per index)."""
    kind, n, _, size, _, _, entries = dim
    if kind in ("group", "blocks"):
        return -(-valid[n] // size)
    return sum(valid[m] if m else 1 for m, _, _ in entries) - len(entries) + 1


def _needed_lines(dim: tuple, valid: dict) -> int:
    """Lines of one tile dimension that the valid blocks read (data and zero padding)."""
    kind, n, _, size, _, _, entries = dim
    if kind in ("group", "blocks"):
        return -(-valid[n] // size)
    return sum(size * (-(-valid[m] // size) if m else 1)
               for m, _, size in entries) - len(entries) + 1


def _check_sliding_axes(tile: OperandTile, strides: dict[str, int]) -> None:
    for dim in tile.dims:
        if dim.is_line_axis and len({strides[n] for n in dim.indices}) > 1:
            raise MappingError(
                f"{tile.access} cannot be loaded as the sliding window "
                f"{'+'.join(i for _, i, _ in dim.entries)}: {' and '.join(dim.indices)} have "
                "different DRAM "
                "strides; use another tensorize choice")


def _zero_lines(emit: Emitter, line: int, count: int) -> None:
    for start in range(0, count, MAX_PAD):
        emit.add(LOAD, Load, line=line + start, pad_after=min(MAX_PAD, count - start))


def _rows(emit, kind, line, layout, address, rows, row_len, stride, pad, fields=None) -> None:
    """One LOAD/STORE per chunk of rows that fits the ISA fields; pad lines after.
    ``fields``: more fields of each instruction."""
    chunk = 1 if stride < 0 or stride > MAX_STRIDE else MAX_ROWS
    unit, extra = (LOAD, {"buffer": Buffer.SPAD}) if kind is Load else (STORE, {})
    extra = {**extra, **(fields or {})}
    base, elem_bytes = layout.base, layout.elem_bytes
    for start in range(0, rows, chunk):
        count = min(chunk, rows - start)
        emit.add(unit, kind, line=line + start,
                 dram_addr=base + (address + start * stride) * elem_bytes,
                 rows=count, row_len=row_len, stride=stride if count > 1 else 0, **extra)
    if pad:
        _zero_lines(emit, line + rows, pad)
