"""The LOAD/STORE instructions of a tile transfer, counted by the code generator itself.

How many instructions, bytes, beats and AXI bursts one tile transfer takes follows from the
DRAM layout (tile-major or not, dense or gathered), the buffer's line order, which runs lie
back to back and so coalesce into one long transfer (`compiler.tile_runs.coalesce`), which
rows are widened to a whole block, where zero lines pad a window, and how the DMA cuts runs
into bursts (`hw.dma_rows.transfer_runs`, `hw.axi.plan_bursts`). These rules have no closed
form worth keeping in step by hand, so the cost model does not restate them: `TransferCounter`
runs the code generator's own ``_load``/``_store`` for one tile (into a recorder instead of a
program) and measures what it emitted. Each distinct (operand, tile, valid extents) is
measured once and cached, so a search that prices thousands of mappings over the same few
hundred tile shapes pays the code generator only on the first sight of each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_geometry import distinct_rows
from tensorforge.errors import MappingError

COUNTS = ("instructions", "elements", "beats", "bursts", "rows", "lines", "commands")


@dataclass(frozen=True)
class TransferCounts:
    """One tile transfer: LOAD/STORE ``instructions`` fetched (zero-line LOADs included),
    DRAM ``elements`` moved (a widened row's padding included), bus ``beats`` and AXI
    ``bursts``, DRAM ``rows`` (one per line of data), buffer ``lines`` (data and zero
    lines), and the ``commands`` the DMA unit runs: one per instruction, or a repeated
    instruction's runs (`isa.expand`; `compiler.repeats`)."""

    instructions: int = 0
    elements: int = 0
    beats: int = 0
    bursts: int = 0
    rows: int = 0
    lines: int = 0
    commands: int = 0


class _Recorder:
    """Stands in for `compiler.tokens.Emitter`: keeps the instructions, ignores the tokens."""

    def __init__(self) -> None:
        self.instructions = []

    def begin(self, unit: int) -> int:
        return 0

    def add(self, unit: int, kind, **values) -> None:
        self.instructions.append(kind(**values))

    def end(self, reads=(), writes=()) -> None:
        pass


@dataclass(frozen=True)
class TransferShape:
    """One LOAD or STORE as the DMA moves it: its AXI bursts (beats each), its DRAM rows of
    data (one buffer line each), the elements they carry, and its zero lines (padding, and
    rows of no element); ``on_chip``: its address lies in the activation window, whose
    memory answers instead of DRAM."""

    bursts: tuple[int, ...]
    rows: int
    elements: int
    zero_lines: int
    on_chip: bool = False


def transfer_shape(config: AcceleratorConfig, instruction) -> TransferShape:
    """The bursts, rows and lines of one LOAD or STORE (`hw.dma_rows.transfer_runs` cut by
    `hw.axi.plan_bursts`, as the DMA units do)."""
    from tensorforge.hw.axi import plan_bursts
    from tensorforge.isa import Buffer, Load
    from tensorforge.sim.axi_traffic import dram_runs

    bus, burst = config.dma.bus_bytes, config.dma.max_burst
    bursts = tuple(count for start, length in dram_runs(config, instruction)
                   for _, count in plan_bursts(start, length, bus, burst))
    is_load = isinstance(instruction, Load)
    to_acc = not is_load or instruction.buffer is Buffer.ACC
    line_elems = config.acc_line_elems if to_acc else config.spad_line_elems
    row_elems = min(instruction.row_len, line_elems)
    rows = instruction.rows if row_elems else 0
    pads = instruction.pad_before + instruction.pad_after if is_load else 0
    return TransferShape(bursts, rows, rows * row_elems, pads + instruction.rows - rows,
                         instruction.dram_addr in config.activation_window)


def _measure(instructions, config: AcceleratorConfig) -> TransferCounts:
    """Counts of one transfer's (maybe repeated, `isa.expand`) instructions."""
    from tensorforge.isa import expand

    precision = config.precision
    shapes = [transfer_shape(config, i)
              for i in expand(instructions, precision.in_bytes, precision.acc_bytes)]
    return TransferCounts(
        instructions=len(instructions), elements=sum(s.elements for s in shapes),
        beats=sum(sum(s.bursts) for s in shapes), bursts=sum(len(s.bursts) for s in shapes),
        rows=sum(s.rows for s in shapes), lines=sum(s.rows + s.zero_lines for s in shapes),
        commands=len(shapes))


class TransferCounter:
    """Counts of one layer space's tile transfers (`count`), cached per distinct tile."""

    def __init__(self, workload: Workload, choice, groups, config: AcceleratorConfig) -> None:
        from tensorforge.compiler.lowering import Lowering

        self.lowering = Lowering(workload, groups, choice.stage)
        self.choice, self.config = choice, config
        self.device = self.lowering.device
        self.cache: dict[tuple, TransferCounts] = {}

    def count(self, role: str, tiles: dict[str, int], valid: dict[str, int],
              holds: tuple = ()) -> TransferCounts:
        """One transfer of ``role``'s tile (``tiles`` elements per device index) holding
        ``valid`` elements per index (a remainder tile or a chunk has fewer); ``holds`` as
        `tiling.build_tiling` takes it (a held index's whole extent is loaded)."""
        from tensorforge.compiler.program_layout import program_layouts
        from tensorforge.compiler.repeats import fold_repeats
        from tensorforge.compiler.tile_walk import TileWalker
        from tensorforge.compiler.tiling import build_tiling

        tiling = build_tiling(self.device, self.choice, tiles, self.config, holds)
        layouts, _, _ = program_layouts(self.lowering, tiling, self.config, True)
        recorder = _Recorder()
        walker = TileWalker(self.device, tiling, layouts, self.config, recorder, True)
        origin = dict.fromkeys(self.device.sizes, 0)
        if role == "C":
            walker._store(0, origin, valid)
        else:
            walker._load(role, 0, origin, valid)
        return _measure(fold_repeats(recorder.instructions, self.config), self.config)

    def folds(self) -> tuple[bool, bool, bool]:
        """Per operand (A, B, C): whether its runs of lines fold into repeated LOADs
        (STOREs) along the tile's second innermost dimension (`compiler.repeats`): that
        dimension's DRAM step is a whole number of the runs' row strides, and the number
        fits the ``repeat_stride`` field. The steps are the code generator's own
        (`compiler.tile_runs.run_plan`) on this space's DRAM layout, which does not depend
        on the tiles; a tile of one intrinsic block per index stands in for any."""
        from tensorforge.compiler.program_layout import program_layouts
        from tensorforge.compiler.repeats import repeat_capacity
        from tensorforge.compiler.tile_runs import run_plan
        from tensorforge.compiler.tiling import build_tiling
        from tensorforge.isa import Opcode

        if not self.config.controller.repeat:
            return False, False, False
        isizes = self.config.intrinsic_sizes
        block = {n: isizes.get(i, 1) for i, n in self.choice.index_map.items()}
        tiles = {n: min(size, block.get(n, 1)) for n, size in self.device.sizes.items()}
        try:
            tiling = build_tiling(self.device, self.choice, tiles, self.config)
        except MappingError:
            return False, False, False
        layouts, _, _ = program_layouts(self.lowering, tiling, self.config, True)
        out = []
        for role in ("A", "B", "C"):
            access = tiling.operand(role).access
            dims = run_plan(tiling.operand(role), *layouts[role].index_strides(access))[2]
            most_stride = repeat_capacity(Opcode.STORE if role == "C" else Opcode.LOAD)[1]
            if len(dims) < 2:
                out.append(False)
                continue
            row, step = dims[-1][5], dims[-2][5]
            out.append(bool(row > 0 and step > 0 and step % row == 0
                            and step // row <= most_stride))
        return tuple(out)

    def batch(self, role: str, uses: tuple[int, ...], names: tuple[str, ...],
              tiles: np.ndarray, valid: np.ndarray, legal: np.ndarray,
              holds: tuple = ()) -> dict[str, np.ndarray]:
        """`count` of every row of ``tiles``/``valid`` (``n x D``, columns in ``names``
        order; ``uses`` the columns of the operand's indices), measured once per distinct
        tile of the operand; zeros where ``legal`` is False. ``holds``: every row's, as
        `count` takes them."""
        key = np.concatenate([tiles[:, uses], valid[:, uses]], axis=1)
        out = {name: np.zeros(len(tiles)) for name in COUNTS}
        rows = np.flatnonzero(legal)
        if not len(rows):
            return out
        first, inverse = distinct_rows(key[rows])
        distinct = key[rows][first]
        values = np.zeros((len(distinct), len(COUNTS)))
        for d in range(len(distinct)):
            group = (rows[first[d]],)  # the group's other rows are tried only if this fails
            counts = (self._cached(role, distinct[d], names, tiles, valid, group, holds)
                      or self._cached(role, distinct[d], names, tiles, valid,
                                      rows[inverse == d], holds))
            if counts is not None:
                values[d] = [getattr(counts, f.name) for f in fields(counts)]
        for column, name in enumerate(COUNTS):
            out[name][rows] = values[inverse, column]
        return out

    def _cached(self, role, key, names, tiles, valid, rows, holds=()) -> TransferCounts | None:
        """The counts of the operand tile ``key`` names, from the first of ``rows`` whose whole
        tiling fits (another operand's tile may not); None when none does (illegal rows)."""
        cache_key = (role, holds, *key.tolist())
        counts = self.cache.get(cache_key)
        if counts is not None:
            return counts
        for row in rows:
            try:
                counts = self.count(role, dict(zip(names, map(int, tiles[row]), strict=True)),
                                    dict(zip(names, map(int, valid[row]), strict=True)), holds)
            except MappingError:
                continue
            self.cache[cache_key] = counts
            return counts
        return None
