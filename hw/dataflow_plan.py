"""How one intrinsic step is scheduled on the PE array: the *plan* for an intrinsic x dataflow.

Every PE is a multiply-accumulate with a small local store (distributeCache). One operand block
is *stationary*: its lines are written into the PEs' local stores (``load_map``). The other is
*streamed*: one line per *beat*; each PE takes one element of it (``stream_elem``), multiplies
it by the local-store slot the beat names and accumulates. A *group* of beats ends with ``last``;
the array then turns the PE sums into output lines (`Drain`):

=========  =============  ==========  ==========  =====================  ======  ===========
intrinsic  dataflow       stationary  streamed    beats per step         drain   local slots
=========  =============  ==========  ==========  =====================  ======  ===========
GEMM       ws             B (k -> r)  A line i    R, one group each      COLUMNS 1
GEMV       ws             B (k -> r)  A line i    C, one group, col i    COLUMNS 1
CONV2D     ws             B (c -> r)  A line y+s  R*taps, groups of taps COLUMNS taps
GEMM       os, is         A (i -> r)  B line k    R, one group           ROWS    R
CONV2D     os             A (y -> r)  B line s,c  R*taps, one group      ROWS    taps*R
GEMV       os             A (i -> c)  B line      1                      COLUMNS 1
DOT        os             A (k->r,c)  B line      1                      ALL     1
=========  =============  ==========  ==========  =====================  ======  ===========

With ``os`` the outputs also stay in the PEs across consecutive steps that target the same C
block (the group spans them); ``is`` drains every step and only keeps the A block resident.
This module is pure Python: the array and the compute unit generate their hardware from it,
and the tests read it to know what to expect.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tensorforge.config import DATAFLOWS, AcceleratorConfig, Dataflow, Interconnect
from tensorforge.intrinsics import Intrinsic


class Operand(enum.Enum):
    A = "A"
    B = "B"


class Drain(enum.Enum):
    """How the PE sums of a finished group become output lines."""

    COLUMNS = "columns"  # one line: element c is the sum down column c
    ROWS = "rows"  # R lines: line r is row r of the PE sums
    ALL = "all"  # one line of one element: the sum of every PE


@dataclass(frozen=True)
class Beat:
    """One streamed line: its offset in the streamed block and what the PEs do with it."""

    line: int
    slot: int
    first: bool  # starts a group (the MACs clear)
    last: bool  # ends a group (the array drains)
    columns: int  # bit mask of the PE columns that compute on this beat


@dataclass(frozen=True)
class ArrayPlan:
    """The schedule of one intrinsic step; see the module docstring for every case."""

    rows: int
    cols: int
    stationary: Operand
    stationary_lines: int
    slots: int
    load_map: tuple[tuple[tuple[tuple[int, int, int, int], ...], ...], ...]
    stream_elem: tuple[tuple[int, ...], ...]
    beats: tuple[Beat, ...]
    drain: Drain
    output_lines: tuple[int, ...]  # C line offsets written per group, in emission order
    groups_span_steps: bool  # os: a group continues while the C block stays the same

    @property
    def streamed(self) -> Operand:
        return Operand.B if self.stationary is Operand.A else Operand.A

    @property
    def lines_per_group(self) -> int:
        return self.rows if self.drain is Drain.ROWS else 1

    @property
    def groups_per_step(self) -> int:
        return sum(beat.last for beat in self.beats)

    def loads_of_line(self, line: int) -> tuple[tuple[int, int, int, int], ...]:
        """``(row, col, slot, element)`` writes made when stationary ``line`` arrives."""
        return self.load_map[line]


def _all_columns(cols: int) -> int:
    return (1 << cols) - 1


def plan_for(config: AcceleratorConfig) -> ArrayPlan:
    """The `ArrayPlan` of ``config``'s intrinsic and dataflow on its R x C array."""
    rows, cols = config.array.rows, config.array.cols
    taps = config.conv_taps
    every = _all_columns(cols)
    grid = [(r, c) for r in range(rows) for c in range(cols)]
    dataflow = config.array.dataflow
    weight_stationary = dataflow is Dataflow.WEIGHT_STATIONARY
    match config.intrinsic, weight_stationary:
        case Intrinsic.GEMM, True:
            loads = [[(k, c, 0, c) for c in range(cols)] for k in range(rows)]
            stream = [[r] * cols for r in range(rows)]
            beats = [Beat(i, 0, True, True, every) for i in range(rows)]
            drain, outputs, slots = Drain.COLUMNS, list(range(rows)), 1
        case Intrinsic.GEMV, True:
            loads = [[(r, c, 0, r) for r, c in grid]]
            stream = [[r] * cols for r in range(rows)]
            beats = [Beat(i, 0, True, i == cols - 1, 1 << i) for i in range(cols)]
            drain, outputs, slots = Drain.COLUMNS, [0], 1
        case Intrinsic.CONV2D, True:
            loads = [
                [(channel, k, s, k) for k in range(cols)]
                for s in range(taps)
                for channel in range(rows)
            ]
            stream = [[r] * cols for r in range(rows)]
            beats = [
                Beat(y + s, s, s == 0, s == taps - 1, every)
                for y in range(rows)
                for s in range(taps)
            ]
            drain, outputs, slots = Drain.COLUMNS, list(range(rows)), taps
        case Intrinsic.GEMM, False:
            loads = [[(i, c, e, e) for c in range(cols) for e in range(rows)] for i in range(rows)]
            stream = [list(range(cols)) for _ in range(rows)]
            beats = [Beat(k, k, k == 0, k == rows - 1, every) for k in range(rows)]
            drain, outputs, slots = Drain.ROWS, list(range(rows)), rows
        case Intrinsic.CONV2D, False:
            a_lines = rows + taps - 1
            loads = [
                [
                    (y, c, (a - y) * rows + e, e)
                    for y in range(rows)
                    if 0 <= a - y < taps
                    for c in range(cols)
                    for e in range(rows)
                ]
                for a in range(a_lines)
            ]
            stream = [list(range(cols)) for _ in range(rows)]
            count = taps * rows
            beats = [Beat(n, n, n == 0, n == count - 1, every) for n in range(count)]
            drain, outputs, slots = Drain.ROWS, list(range(rows)), taps * rows
        case Intrinsic.GEMV, False:
            loads = [[(r, i, 0, r) for r in range(rows)] for i in range(cols)]
            stream = [[r] * cols for r in range(rows)]
            beats = [Beat(0, 0, True, True, every)]
            drain, outputs, slots = Drain.COLUMNS, [0], 1
        case Intrinsic.DOT, False:
            loads = [[(r, c, 0, r * cols + c) for r, c in grid]]
            stream = [[r * cols + c for c in range(cols)] for r in range(rows)]
            beats = [Beat(0, 0, True, True, every)]
            drain, outputs, slots = Drain.ALL, [0], 1
        case _:  # config validation rules these out
            raise ValueError(f"no plan for {config.intrinsic.value} {dataflow.value}")
    return ArrayPlan(
        rows=rows,
        cols=cols,
        stationary=Operand.B if weight_stationary else Operand.A,
        stationary_lines=len(loads),
        slots=slots,
        load_map=tuple(tuple(line) for line in loads),
        stream_elem=tuple(tuple(row) for row in stream),
        beats=tuple(beats),
        drain=drain,
        output_lines=tuple(outputs),
        groups_span_steps=dataflow is Dataflow.OUTPUT_STATIONARY,
    )


def local_banks(config: AcceleratorConfig, plan: ArrayPlan) -> int:
    """Stationary blocks each PE holds: two (load one while computing on the other), or more
    when ``array.local_bytes`` (distributeCache) has room for more copies of the slots."""
    slot_bytes = plan.slots * config.precision.in_bytes
    return max(2, int(config.array.local_bytes) // slot_bytes)


def design_grid(shapes, interconnects=tuple(Interconnect)):
    """Every ``(intrinsic, dataflow, interconnect, rows, cols)`` the templates support over
    ``shapes`` (input-stationary only on square arrays): the grid the tests sweep."""
    for intrinsic, dataflows in DATAFLOWS.items():
        for dataflow in dataflows:
            for interconnect in interconnects:
                for rows, cols in shapes:
                    if dataflow is Dataflow.INPUT_STATIONARY and rows != cols:
                        continue
                    yield intrinsic, dataflow, interconnect, rows, cols
