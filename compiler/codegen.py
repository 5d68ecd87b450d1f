"""Code generation: a `Mapping` becomes a `Program` of LOAD / COMPUTE / STORE / FINISH.

The program walks the tile loops in the mapping's order. Per tile step it

1. LOADs the A and B tiles whose coordinates changed (an operand whose indices the inner
   loops do not touch stays resident), each into the other half of its double buffer;
2. on the first step of a C tile, ZEROs the tile's accumulator blocks (the other half of the
   accumulator double buffer), then issues MAC COMPUTEs: the two step coordinates with the most
   iterations (and 9-bit line steps) form the affine micro-loop, the rest unroll into separate
   instructions;
3. after the last step of a C tile (its reduction is complete: the mapping keeps partial sums
   in the accumulator), STOREs it.

Dependency flags follow VTA: a unit waits (pop) for the other unit's task that last touched
the buffer half it is about to use, and that task sends (push) exactly one token for it.
Because every unit runs its queue in order, waiting for the newest such task suffices, and
the k-th pop of a queue always matches its k-th push. So the next tile's LOADs overlap the
current COMPUTEs, and the previous tile's STORE overlaps them too.

DRAM layout (`tensorforge.compiler.layout`): operands first (A, B at ``base`` 0 upwards,
each dense and padded with its line index innermost, or gathered when it cannot be), then the
output, then host-only inputs of later stages, then the instruction stream itself.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from tensorforge.compiler.layout import (
    DramLayout,
    aligned,
    check_addressable,
    dense_layout,
    gather_layout,
)
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.program import Program
from tensorforge.compiler.tiling import OperandTile, Tiling, build_tiling
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.isa import (
    FORMATS,
    Buffer,
    Compute,
    ComputeMode,
    Finish,
    Instruction,
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
LOAD, COMPUTE, STORE = 0, 1, 2


def generate(workload: Workload, mapping: Mapping, config: AcceleratorConfig) -> Program:
    """The program that runs ``workload`` as ``mapping`` says on ``config``."""
    lowering = Lowering(workload, mapping.groups, mapping.choice.stage)
    device = lowering.device
    tiling = build_tiling(device, mapping.choice, mapping.tile_sizes, config)
    mapping.check_order(tiling)
    layouts, extras, end = _layouts(lowering, tiling, config)
    emitter = _Emitter()
    _Walker(device, tiling, layouts, config, emitter).run(mapping.order)
    emitter.add(COMPUTE, Finish)
    instructions = emitter.build()
    check_addressable([*layouts.values(), *extras])
    return Program(config=config, workload=workload, lowering=lowering, mapping=mapping,
                   instructions=tuple(instructions), operands=(layouts["A"], layouts["B"]),
                   output=layouts["C"], extras=tuple(extras), instruction_base=aligned(end))


def _layouts(lowering: Lowering, tiling: Tiling, config: AcceleratorConfig):
    device, sizes = lowering.device, lowering.device.sizes
    shapes, base, layouts = device.shapes, 0, {}
    for role in ("A", "B", "C"):
        tile = tiling.operand(role)
        name = tile.access.tensor
        elem_bytes = config.precision.acc_bytes if role == "C" else config.precision.in_bytes
        layout = dense_layout(name, shapes[name], (tile.access,), sizes, base, elem_bytes,
                              tile.elem)
        if layout is None:
            layout = gather_layout(name, tile.access, sizes, base, elem_bytes, tile.elem)
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


# ---------------------------------------------------------------------- tokens


@dataclass
class _Group:
    unit: int
    first: int  # instruction positions
    last: int


@dataclass
class _Emitter:
    """Instructions as field dicts, grouped into unit tasks, with the token bookkeeping."""

    kinds: list[type[Instruction]] = field(default_factory=list)
    fields: list[dict] = field(default_factory=list)
    groups: list[_Group] = field(default_factory=list)
    waited: dict[tuple[int, int], int] = field(default_factory=dict)
    writer: dict[tuple, int] = field(default_factory=dict)
    reader: dict[tuple, int] = field(default_factory=dict)
    open_group: int | None = None

    def begin(self, unit: int) -> int:
        self.groups.append(_Group(unit, len(self.fields), len(self.fields) - 1))
        self.open_group = len(self.groups) - 1
        return self.open_group

    def add(self, unit: int, kind: type[Instruction], **values) -> None:
        self.kinds.append(kind)
        self.fields.append(values)
        if self.open_group is not None:
            self.groups[self.open_group].last = len(self.fields) - 1

    def end(self, reads: list[tuple] = (), writes: list[tuple] = ()) -> None:
        """Close the open task: wait for the tasks it conflicts with, then record its regions."""
        gid = self.open_group
        self.open_group = None
        group = self.groups[gid]
        if group.last < group.first:
            return
        producers = [self.writer[r] for r in reads if r in self.writer]
        producers += [table[r] for r in writes for table in (self.reader, self.writer)
                      if r in table]
        newest: dict[int, int] = {}  # one wait per unit: its newest conflicting task
        for producer in producers:
            unit = self.groups[producer].unit
            newest[unit] = max(newest.get(unit, -1), producer)
        for producer in newest.values():
            self._wait(gid, producer)
        for region in reads:
            self.reader[region] = gid
        for region in writes:
            self.writer[region] = gid

    def _wait(self, consumer: int, producer: int) -> None:
        cunit, punit = self.groups[consumer].unit, self.groups[producer].unit
        if cunit == punit or producer <= self.waited.get((cunit, punit), -1):
            return
        self.waited[(cunit, punit)] = producer
        pop = "pop_prev" if punit == cunit - 1 else "pop_next"
        push = "push_next" if cunit == punit + 1 else "push_prev"
        self.fields[self.groups[consumer].first][pop] = True
        self.fields[self.groups[producer].last][push] = True

    def build(self) -> list[Instruction]:
        return [kind(**values) for kind, values in zip(self.kinds, self.fields, strict=True)]


# ---------------------------------------------------------------------- the walk


class _Walker:
    """Emits the instructions of every tile step, in loop order."""

    def __init__(self, device: Workload, tiling: Tiling, layouts: dict[str, DramLayout],
                 config: AcceleratorConfig, emitter: _Emitter) -> None:
        self.device, self.tiling, self.config, self.emit = device, tiling, config, emitter
        self.sizes = device.sizes
        self.tiles = dict(tiling.tiles)
        self.block = dict(tiling.block)
        self.layouts = layouts
        self.addressing = {r: layouts[r].index_strides(tiling.operand(r).access) for r in layouts}
        self.uses = {r: tiling.operand(r).access.indices for r in layouts}
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

    def run(self, order: tuple[str, ...]) -> None:
        counts = [range(self.tiling.count(n)) for n in order]
        steps = [dict(zip(order, coords, strict=True)) for coords in itertools.product(*counts)]
        current = {"A": None, "B": None, "C": None}
        slot = {"A": -1, "B": -1, "C": -1}
        for position, step in enumerate(steps):
            origin = {n: step[n] * self.tiles[n] for n in order}
            valid = {n: min(self.tiles[n], self.sizes[n] - origin[n]) for n in order}
            for role in ("A", "B", "C"):
                key = tuple(step[n] for n in self.uses[role])
                if key != current[role]:
                    current[role] = key
                    slot[role] = (slot[role] + 1) % len(self.bases[role])
                    if role != "C":
                        self._load(role, slot[role], origin, valid)
            new_c = position == 0 or self._key(steps[position - 1]) != current["C"]
            self._compute(slot, origin, valid, zero_first=new_c)
            last_c = (position == len(steps) - 1
                      or self._key(steps[position + 1]) != current["C"])
            if last_c:
                self._store(slot["C"], origin, valid)

    def _key(self, step: dict) -> tuple:
        return tuple(step[n] for n in self.uses["C"])

    # ------------------------------------------------------------------ data movement

    def _runs(self, tile: OperandTile, origin: dict, valid: dict, padded: bool):
        """``(line, dram_elem, rows, row_len, stride, pad_after)`` per LOAD/STORE row run.

        ``dram_elem`` is None for a run of zero lines only. Loads (``padded``) cover every
        line the valid blocks read; stores only the lines holding results.
        """
        offset, strides = self.addressing[tile.role]
        dims = tile.dims
        if not dims:
            yield 0, offset, 1, 1, 0, 0
            return
        data = [_valid_lines(dim, valid) for dim in dims]
        need = [_needed_lines(dim, valid) for dim in dims]
        apart = any(dim.kind == "blocks" for dim in dims)
        extent = need if padded else data
        inner = dims[-1]
        for outer in itertools.product(*(range(e) for e in extent[:-1])):
            line = sum(c * d.step for c, d in zip(outer, dims, strict=False))
            if apart:  # a block axis holds the valid part of its own block only
                local = dict(valid)
                for c, dim in zip(outer, dims, strict=False):
                    if dim.kind == "blocks":
                        n, _, size = dim.entries[0]
                        local[n] = min(size, valid[n] - c * size)
                data = [_valid_lines(dim, local) if dim.kind == "block_axis" else lines
                        for dim, lines in zip(dims, data, strict=True)]
            last = need[-1] if padded else data[-1]
            if any(c >= d for c, d in zip(outer, data, strict=False)):
                yield line, None, 0, 0, 0, last
                continue
            coords, row_len = dict(origin), 1
            for c, dim in zip(outer, dims, strict=False):
                n, iota, size = next((e for e in dim.entries if e[0]), (None, None, 1))
                if n is None:
                    continue
                coords[n] += c if dim.is_line_axis else c * size
                if dim.kind == "group" and iota is not None:
                    row_len = min(size, valid[n] - c * size)
            address = offset + sum(coords[n] * strides[n] for n in self.uses[tile.role])
            n, iota, size = next((e for e in inner.entries if e[0]), (None, None, 1))
            if inner.kind == "group" and iota is not None:  # blocks of the line index
                full = valid[n] // size
                if full:
                    yield line, address, full, size, strides[n] * size, 0
                if valid[n] % size:
                    yield (line + full, address + full * strides[n] * size, 1, valid[n] % size,
                           0, 0)
                continue
            stride = strides[n] if n is not None else 0
            yield line, address, data[-1], row_len, stride, last - data[-1]

    def _load(self, role: str, slot: int, origin: dict, valid: dict) -> None:
        tile = self.tiling.operand(role)
        layout = self.layouts[role]
        base = self.bases[role][slot]
        emit = self.emit
        emit.begin(LOAD)
        for line, address, rows, row_len, stride, pad in self._runs(tile, origin, valid, True):
            if address is None or rows == 0:
                _zero_lines(emit, base + line, pad)
                continue
            _rows(emit, Load, base + line, layout, address, rows, row_len, stride, pad)
        emit.end(writes=[(role, slot)])

    def _store(self, slot: int, origin: dict, valid: dict) -> None:
        tile = self.tiling.operand("C")
        emit = self.emit
        emit.begin(STORE)
        for line, address, rows, row_len, stride, _ in self._runs(tile, origin, valid, False):
            if address is not None and rows:
                _rows(emit, Store, self.bases["C"][slot] + line, self.layouts["C"], address,
                      rows, row_len, stride, 0)
        emit.end(reads=[("C", slot)])

    # ------------------------------------------------------------------ compute

    def _compute(self, slot: dict, origin: dict, valid: dict, zero_first: bool) -> None:
        tiling, emit = self.tiling, self.emit
        c_tile = tiling.operand("C")
        c_base = self.bases["C"][slot["C"]]
        emit.begin(COMPUTE)
        if zero_first:
            block_lines = self.config.blocks["C"].lines
            count = c_tile.lines // block_lines
            step = block_lines if block_lines <= MAX_STEP else 0
            for start in range(0, count, MAX_EXTENT if step else 1):
                emit.add(COMPUTE, Compute, mode=ComputeMode.ZERO,
                         inner=min(MAX_EXTENT, count - start) if step else 1,
                         acc_base=c_base + start * block_lines, acc_inner=step)
        counts = {n: (-(-valid[n] // self.block[n])) for n in self.sizes}
        coefs = {r: tiling.operand(r).coef for r in ("A", "B", "C")}
        bases = {"A": self.bases["A"][slot["A"]], "B": self.bases["B"][slot["B"]], "C": c_base}
        loopable = sorted((n for n in counts if counts[n] > 1
                           and all(coefs[r].get(n, 0) <= MAX_STEP for r in coefs)),
                          key=lambda n: -counts[n])
        inner = loopable[0] if loopable else None
        outer = loopable[1] if len(loopable) > 1 else None
        rest = [n for n in counts if n not in (inner, outer)]
        for coords in itertools.product(*(range(counts[n]) for n in rest)):
            start = dict(zip(rest, coords, strict=True))
            for o0 in range(0, counts.get(outer, 1), MAX_EXTENT):
                for i0 in range(0, counts.get(inner, 1), MAX_EXTENT):
                    at = {**start, **({outer: o0} if outer else {}),
                          **({inner: i0} if inner else {})}
                    addr = {r: bases[r] + sum(at.get(n, 0) * c for n, c in coefs[r].items())
                            for r in coefs}
                    emit.add(COMPUTE, Compute, mode=ComputeMode.MAC,
                             outer=min(MAX_EXTENT, counts[outer] - o0) if outer else 1,
                             inner=min(MAX_EXTENT, counts[inner] - i0) if inner else 1,
                             acc_base=addr["C"], a_base=addr["A"], b_base=addr["B"],
                             acc_outer=coefs["C"].get(outer, 0), acc_inner=coefs["C"].get(inner, 0),
                             a_outer=coefs["A"].get(outer, 0), a_inner=coefs["A"].get(inner, 0),
                             b_outer=coefs["B"].get(outer, 0), b_inner=coefs["B"].get(inner, 0))
        emit.end(reads=[("A", slot["A"]), ("B", slot["B"])], writes=[("C", slot["C"])])


def _valid_lines(dim, valid: dict) -> int:
    """Lines of one tile dimension that hold data (``valid`` elements per index)."""
    if not dim.is_line_axis:
        n, _, size = dim.entries[0]
        return -(-valid[n] // size)
    if dim.kind == "block_axis":  # at most one block's worth
        return sum(min(valid[n], size) if n else 1
                   for n, _, size in dim.entries) - len(dim.entries) + 1
    return sum(valid[n] if n else 1 for n, _, _ in dim.entries) - len(dim.entries) + 1


def _needed_lines(dim, valid: dict) -> int:
    """Lines of one tile dimension that the valid blocks read (data and zero padding)."""
    if dim.kind == "block_axis":
        return dim.lines
    if dim.kind == "axis":
        return sum(size * (-(-valid[n] // size) if n else 1)
                   for n, _, size in dim.entries) - len(dim.entries) + 1
    return _valid_lines(dim, valid)


def _check_sliding_axes(tile: OperandTile, strides: dict[str, int]) -> None:
    for dim in tile.dims:
        if dim.is_line_axis and len({strides[n] for n in dim.indices}) > 1:
            raise MappingError(
                f"{tile.access} cannot be loaded as the sliding window "
                f"{'+'.join(i for _, i, _ in dim.entries)}: {' and '.join(dim.indices)} have "
                "different DRAM "
                "strides; use another tensorize choice")


def _zero_lines(emit: _Emitter, line: int, count: int) -> None:
    for start in range(0, count, MAX_PAD):
        emit.add(LOAD, Load, line=line + start, pad_after=min(MAX_PAD, count - start))


def _rows(emit, kind, line, layout, address, rows, row_len, stride, pad) -> None:
    """One LOAD/STORE per chunk of rows that fits the ISA fields; pad lines after."""
    if stride < 0 or stride > MAX_STRIDE:
        chunk = 1
    else:
        chunk = MAX_ROWS
    extra = {"buffer": Buffer.SPAD} if kind is Load else {}
    for start in range(0, rows, chunk):
        count = min(chunk, rows - start)
        emit.add(LOAD if kind is Load else STORE, kind, line=line + start,
                 dram_addr=layout.base + (address + start * stride) * layout.elem_bytes,
                 rows=count, row_len=row_len, stride=stride if count > 1 else 0, **extra)
    if pad:
        _zero_lines(emit, line + rows, pad)
