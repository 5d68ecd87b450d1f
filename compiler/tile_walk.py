"""The walk over a mapping's tile steps that emits a program's LOAD / COMPUTE / STORE tasks,
with their dependency tokens (`TileWalker`); the first and last steps cut into chunks.

It exists apart from `codegen.generate`, which lays the program out and walks it (twice
where the output stage's parameter blocks must first be placed), and apart from what a step's
instructions are made of: the row runs of a tile (`tile_runs`) and the MAC micro-loops
(`mac_plan`). The cost model runs a walker's LOADs and STOREs to count a tile's transfers
(`dse.cost_transfers`).
"""

from __future__ import annotations

import itertools

from tensorforge.compiler.field_limits import MAX_EXTENT, MAX_PAD, MAX_ROWS, MAX_STEP, MAX_STRIDE
from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.mac_plan import mac_plan, mac_visits, overwrite_plan
from tensorforge.compiler.output_stage import ParamBlocks, ParamRegion
from tensorforge.compiler.param_reload import TileParams
from tensorforge.compiler.tile_runs import (
    check_sliding_axes,
    coalesce,
    run_plan,
    tile_runs,
    transfer_rows,
    zero_lines,
)
from tensorforge.compiler.tiling import ROLES, Tiling
from tensorforge.compiler.tokens import COMPUTE, LOAD, STORE, Emitter
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.hw.dataflow_plan import plan_for
from tensorforge.isa import Buffer, Compute, ComputeMode, Load, Reduction, Store


class TileWalker:
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
            check_sliding_axes(tiling.operand(role), self.addressing[role][1])
        self.plans = {r: run_plan(tiling.operand(r), *self.addressing[r]) for r in layouts}
        self.mac_plans: dict[tuple[int, ...], list] = {}  # by blocks per index of a step
        self.overwrite_plans: dict[tuple[int, ...], list[bool] | None] = {}  # same keys
        self.stationary = plan_for(config).stationary.value  # the operand the PEs hold
        # a max= workload's MACs keep the larger of C and the step's product
        self.reduce = Reduction.MAX if device.reduction == "max" else Reduction.ADD

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
        runs = coalesce(tile_runs(self.plans[tile.role], origin, valid, True),
                        self._widen_to(role))
        for line, address, rows, row_len, stride, pad in runs:
            if address is None or rows == 0:
                zero_lines(emit, base + line, pad)
            elif rows <= MAX_ROWS and 0 <= stride <= MAX_STRIDE and pad <= MAX_PAD:
                emit.add(LOAD, Load, line=base + line,  # the common case of `transfer_rows`, inline
                         dram_addr=dram_base + address * elem_bytes, rows=rows, row_len=row_len,
                         stride=stride if rows > 1 else 0, buffer=Buffer.SPAD)
                if pad:
                    emit.add(LOAD, Load, line=base + line + rows, pad_after=pad)
            else:
                transfer_rows(emit, Load, base + line, layout, address, rows, row_len, stride, pad)
        emit.end(writes=[_region(role, slot, part)])

    def _widen_to(self, role: str) -> int:
        """Elements a row of ``role`` may be widened to (`coalesce`): its tile-major block
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
        runs = coalesce(tile_runs(self.plans[tile.role], origin, valid, False),
                        self._widen_to("C"))
        params = None if self.params is None else self.params.for_tile(self._tile(origin))
        for line, address, rows, row_len, stride, _ in runs:
            if address is None or not rows:
                continue
            if params is None:
                transfer_rows(emit, Store, base + line, self.layouts["C"], address, rows,
                              row_len, stride, 0)
                continue
            for first, count, fields in params.store_groups(address, rows, row_len, stride):
                transfer_rows(emit, Store, base + line + first, self.layouts["C"],
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
            plan = self.mac_plans[counts] = mac_plan(dict(zip(self.sizes, counts, strict=True)),
                                                     self.tiling, self.stationary)
        overwrites = [False] * len(plan)
        if self.overwrite and first_visit:
            if counts not in self.overwrite_plans:
                self.overwrite_plans[counts] = overwrite_plan(plan, self.config.blocks["C"].lines)
            if self.overwrite_plans[counts] is not None:
                overwrites = self.overwrite_plans[counts]
            elif self.reduce is Reduction.MAX:  # zero is no start for a max
                raise MappingError(f"{self.device.text}: the overwrite rule cannot pick the "
                                   "first visits of this tiling's C blocks, and a max needs "
                                   "them to initialize C; choose another mapping")
            else:  # the rule cannot express this plan's first visits: clear them with ZEROs
                self._zero_first_visits(plan, c_base + offsets.get("C", 0))
        elif new_tile and not self.overwrite:
            self._zero_tile(c_base)
        a_base = self.bases["A"][slot["A"]] + offsets.get("A", 0) + self._held_offset("A", origin)
        b_base = self.bases["B"][slot["B"]] + offsets.get("B", 0) + self._held_offset("B", origin)
        acc_base = c_base + offsets.get("C", 0)
        for (acc, a, b, loop), overwrite in zip(plan, overwrites, strict=True):
            emit.add(COMPUTE, Compute, mode=ComputeMode.MAC, acc_base=acc_base + acc,
                     a_base=a_base + a, b_base=b_base + b, overwrite=overwrite,
                     reduce=self.reduce, **loop)
        reads = [_region(r, slot[r], parts.get(r)) for r in ("A", "B")]
        tile = self._tile(origin) if new_tile and self.params is not None else None
        if tile is not None and self.params.slot(tile) is not None:
            reads.append(("P", self.params.slot(tile)))  # the tile's blocks are in
        task = emit.end(reads=reads, writes=[_region("C", slot["C"], parts.get("C"))])
        if tile is not None and self.params.transfer_before(tile + 1) is not None:
            load_params(emit, self.region, self.params.transfer_before(tile + 1),
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
        blocks = sorted({acc for acc, _ in mac_visits(plan)})
        for acc in blocks:
            self.emit.add(COMPUTE, Compute, mode=ComputeMode.ZERO, acc_base=acc_base + acc)



def load_params(emit: Emitter, region: ParamRegion, transfer: int, slot: int = 0,
                after: list[int] = ()) -> None:
    """LOADs of a transfer of parameter lines into the accumulator. At the start, the
    program's first task: the first COMPUTE waits for a later LOAD, and every STORE for a
    COMPUTE, so no STORE reads them before they are in (the functional simulator's hazard
    check confirms it); per tile, see `param_reload`."""
    emit.begin(LOAD)
    for fields in region.loads(transfer):
        emit.add(LOAD, Load, **fields)
    emit.end(writes=[("P", slot)], after=after)


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
