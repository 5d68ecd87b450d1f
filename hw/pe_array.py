"""The R x C PE array, generated for any intrinsic x interconnect x dataflow from one plan.

What moves where is the `ArrayPlan` (``tensorforge.hw.dataflow_plan``); how it moves is the
interconnect (linkPEs):

* ``none``: the streamed line is broadcast/multicast to the PEs over wires, and the PE sums are
  reduced by a separate adder per column (or per row, then across rows) outside the PEs.
* ``systolic``: beats enter at the array edge through skew registers and hop from PE to PE
  (control rightwards along rows, operands along the row or down the column they are shared
  by), partial sums hop down the columns (or along the rows, then down the last column); the
  results leave the array in a wavefront that deskew registers realign (Gemmini style).
* ``full``: every PE picks its operand from the whole line through a registered crossbar, and
  the reductions are pipelined binary adder trees across the PEs they span.

The array has no back-pressure; the compute unit freezes it (``EnableInserter``) when it
cannot take an output line.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig, Interconnect
from tensorforge.hw.dataflow_plan import ArrayPlan, Drain, local_banks, plan_for
from tensorforge.hw.dsp import MAX_DSPS, check_operand_bits
from tensorforge.hw.interconnect import adder_tree, delayed, flat_sum
from tensorforge.hw.pe import ProcessingElement
from tensorforge.hw.ports import acc_line_layout, spad_line_layout
from tensorforge.hw.targets import Target, parse_target


def load_layout(config: AcceleratorConfig, plan: ArrayPlan, banks: int) -> data.StructLayout:
    """One stationary line on its way into bank ``bank`` of the PE stores."""
    return data.StructLayout(
        {"bank": range(banks), "index": range(plan.stationary_lines),
         "line": spad_line_layout(config)}
    )


def beat_layout(config: AcceleratorConfig, plan: ArrayPlan, banks: int) -> data.StructLayout:
    """One streamed line and what to do with it (see `Beat`)."""
    return data.StructLayout(
        {"first": 1, "last": 1, "slot": range(plan.slots), "bank": range(banks),
         "columns": plan.cols, "line": spad_line_layout(config)}
    )


def control_delay(config: AcceleratorConfig, row: int, col: int) -> int:
    """Cycles from a beat entering ``beat`` to PE (row, col) reading its store for it: the input
    register, then the crossbar stage (``full``) or ``row + col`` hops (``systolic``)."""
    match config.array.interconnect:
        case Interconnect.SYSTOLIC:
            return 1 + row + col
        case Interconnect.FULL:
            return 2
        case _:
            return 1


def load_skew(config: AcceleratorConfig, plan: ArrayPlan) -> tuple[int, ...]:
    """Cycles each PE column's stationary writes are delayed, per column.

    On a systolic array the last beat that reads a bank reaches column c ``c`` cycles after
    column 0; delaying column c's writes by as much lets the next block into that bank follow
    the last beat at once (the switch travels with the data, as Gemmini's preload does). Only
    where each column takes one element of a stationary line (the ``ws`` plans), so the delay
    lines stay one element wide; elsewhere the writes are not delayed.
    """
    one_element = all(len(_column_elements(plan, c)) <= 1 for c in range(plan.cols))
    if config.array.interconnect is not Interconnect.SYSTOLIC or not one_element:
        return (0,) * plan.cols
    return tuple(range(plan.cols))


def _column_elements(plan: ArrayPlan, col: int) -> list[int]:
    """The stationary-line elements written into the PEs of column ``col``."""
    return sorted({elem for line in range(plan.stationary_lines)
                   for _, c, _, elem in plan.loads_of_line(line) if c == col})


def bank_reuse_gap(config: AcceleratorConfig) -> int:
    """Least cycles from taking the last beat that reads a bank to taking the first stationary
    line that overwrites it, when lines are taken in order at most one per cycle.

    Line ``k`` taken at cycle ``t + k`` lands in PE (r, c) at the end of cycle
    ``t + k + skew(c)``; the beat taken at cycle ``b`` reads it in cycle ``b + delay(r, c)``.
    """
    plan = plan_for(config)
    skew = load_skew(config, plan)
    return max(0, max(control_delay(config, r, c) - skew[c] - line
                      for line in range(plan.stationary_lines)
                      for r, c, _, _ in plan.loads_of_line(line)))


def array_latency(config: AcceleratorConfig) -> int:
    """Cycles from a group's last beat entering ``beat`` to ``out`` showing its first line.

    The beat is registered on entry (1); ``none`` reaches every PE then, ``full`` one crossbar
    stage later, ``systolic`` PE (r, c) after ``r + c`` more hops; the PE sum is ready one
    cycle later (MAC); the drain then adds its stages (see `PEArray._drain`).
    """
    plan = plan_for(config)
    rows, cols = plan.rows, plan.cols
    pe = ProcessingElement.latency
    match config.array.interconnect:
        case Interconnect.SYSTOLIC:
            last_pe_done = 1 + (rows - 1) + (cols - 1) + pe
            return {
                Drain.COLUMNS: last_pe_done + 1,
                Drain.ALL: last_pe_done + 2,
                Drain.ROWS: last_pe_done - (rows - 1) + 1,  # row 0 leaves first
            }[plan.drain]
        case Interconnect.FULL:
            done = 2 + pe
            return done + {
                Drain.COLUMNS: (rows - 1).bit_length(),
                Drain.ALL: (rows * cols - 1).bit_length(),
                Drain.ROWS: 1,
            }[plan.drain]
        case _:
            done = 1 + pe
            return done + {Drain.COLUMNS: 1, Drain.ALL: 2, Drain.ROWS: 1}[plan.drain]


class PEArray(wiring.Component):
    """R x C PEs with the interconnect and dataflow of ``config``.

    Contract: one ``load`` (a stationary line into a bank of the PE stores) and one ``beat``
    per cycle. A load is usable by beats that enter after it; it may overwrite a bank
    `bank_reuse_gap` cycles after the last beat that reads the bank. The first output line of a
    group
    appears ``latency`` cycles after the group's last beat entered (`array_latency`); ROWS
    groups emit R lines on consecutive cycles. Groups must be at least ``rows`` beats apart for
    ROWS drains (every plan guarantees it). Throughput: one beat per cycle.

    ``target`` ``ecp5``: PEs on MULT18X18D slices (`ProcessingElement`; the first `MAX_DSPS`
    in row-major order, the rest generic), with ``advance`` (the
    clock enable the array is frozen with) for the DSPs' registers, and every load registered
    on entry like a beat, which cuts the block RAM -> PE store path in two. Still usable by the
    beats that enter after it (a beat is registered on entry too and reaches a store a cycle
    later at the earliest), and a later write only widens `bank_reuse_gap`'s margin: no cycle
    count changes.
    """

    def __init__(self, config: AcceleratorConfig, target: Target | str = Target.GENERIC) -> None:
        self.config = config
        self.target = parse_target(target)
        if self.target is Target.ECP5:
            check_operand_bits(config.precision.in_bits)
        self.plan = plan_for(config)
        self.banks = local_banks(config, self.plan)
        self.latency = array_latency(config)
        dsp = {"advance": In(1)} if self.target is Target.ECP5 else {}
        super().__init__(
            {
                **dsp,
                "load": In(stream.Signature(load_layout(config, self.plan, self.banks),
                                            always_ready=True)),
                "beat": In(stream.Signature(beat_layout(config, self.plan, self.banks),
                                            always_ready=True)),
                "out": Out(stream.Signature(acc_line_layout(config), always_ready=True)),
            }
        )

    # --- distribution -----------------------------------------------------------------------

    def _control_at(self, m: Module, beat, valid, row: int, col: int, grid: dict) -> tuple:
        """The beat's control as PE (row, col) sees it under this interconnect."""
        control = Signal.like(beat, name=f"ctrl_{row}_{col}")
        control_valid = Signal(name=f"ctrl_valid_{row}_{col}")
        interconnect = self.config.array.interconnect
        if interconnect is Interconnect.NONE:
            m.d.comb += [control.eq(beat), control_valid.eq(valid)]
        elif interconnect is Interconnect.FULL:
            m.d.sync += [control.eq(beat), control_valid.eq(valid)]  # crossbar stage
        elif col == 0:  # systolic: skew into the row's first PE, then hop right
            m.d.comb += [control.eq(delayed(m, beat.as_value(), row, f"skew_ctrl_{row}")),
                         control_valid.eq(delayed(m, valid, row, f"skew_valid_{row}"))]
        else:
            left, left_valid = grid[row, col - 1]
            m.d.sync += [control.eq(left), control_valid.eq(left_valid)]
        grid[row, col] = (control, control_valid)
        return control, control_valid

    def _operands(self, m: Module, line) -> dict[tuple[int, int], object]:
        """The streamed element each PE multiplies, timed like its control."""
        plan, rows, cols = self.plan, self.plan.rows, self.plan.cols
        elem = plan.stream_elem
        interconnect = self.config.array.interconnect
        if interconnect is Interconnect.NONE:
            return {(r, c): line[elem[r][c]] for r in range(rows) for c in range(cols)}
        if interconnect is Interconnect.FULL:
            operands = {}
            for r in range(rows):
                for c in range(cols):
                    routed = Signal(signed(self.config.precision.in_bits), name=f"xbar_{r}_{c}")
                    m.d.sync += routed.eq(line[elem[r][c]])
                    operands[r, c] = routed
            return operands
        by_row = all(elem[r][c] == elem[r][0] for r in range(rows) for c in range(cols))
        by_col = all(elem[r][c] == elem[0][c] for r in range(rows) for c in range(cols))
        operands = {}
        for r in range(rows):
            for c in range(cols):
                if by_row and c > 0:  # shared along the row: hop right
                    operands[r, c] = delayed(m, operands[r, c - 1], 1, f"fwd_{r}_{c}")
                elif by_col and not by_row and r > 0:  # shared down the column: hop down
                    operands[r, c] = delayed(m, operands[r - 1, c], 1, f"fwd_{r}_{c}")
                else:  # edge of the array (or no sharing, as in DOT): a skew register chain
                    operands[r, c] = delayed(m, line[elem[r][c]], r + c, f"skew_{r}_{c}")
        return operands

    # --- reduction / drain ------------------------------------------------------------------

    def _drain(self, m: Module, acc: dict, done: dict) -> tuple[list, object]:
        """Output line elements and their valid, from the PE sums and ``done`` flags."""
        rows, cols = self.plan.rows, self.plan.cols
        bits = self.config.precision.acc_bits
        systolic = self.config.array.interconnect is Interconnect.SYSTOLIC
        full = self.config.array.interconnect is Interconnect.FULL
        match self.plan.drain, systolic, full:
            case Drain.COLUMNS, True, _:  # partial sums hop down each column
                outputs = []
                for c in range(cols):
                    psum = 0
                    for r in range(rows):
                        register = Signal(signed(bits), name=f"psum_{r}_{c}")
                        m.d.sync += register.eq(psum + acc[r, c])
                        psum = register
                    outputs.append(delayed(m, psum, cols - 1 - c, f"deskew_{c}"))
                return outputs, delayed(m, done[rows - 1, cols - 1], 1, "psum_valid")
            case Drain.COLUMNS, False, True:
                trees = [adder_tree(m, [acc[r, c] for r in range(rows)], bits, f"tree_{c}")
                         for c in range(cols)]
                return [s for s, _ in trees], delayed(m, done[0, 0], trees[0][1], "tree_valid")
            case Drain.COLUMNS, False, False:
                outputs = [Signal(signed(bits), name=f"colsum_{c}") for c in range(cols)]
                m.d.sync += [outputs[c].eq(flat_sum([acc[r, c] for r in range(rows)]))
                             for c in range(cols)]
                return outputs, delayed(m, done[0, 0], 1, "colsum_valid")
            case Drain.ALL, True, _:  # along each row, then down the last column
                total = 0
                for r in range(rows):
                    row_sum = 0
                    for c in range(cols):
                        register = Signal(signed(bits), name=f"rsum_{r}_{c}")
                        m.d.sync += register.eq(row_sum + acc[r, c])
                        row_sum = register
                    column = Signal(signed(bits), name=f"csum_{r}")
                    m.d.sync += column.eq(total + row_sum)
                    total = column
                return [total], delayed(m, done[rows - 1, cols - 1], 2, "sum_valid")
            case Drain.ALL, False, True:
                total, depth = adder_tree(m, list(acc.values()), bits, "tree")
                return [total], delayed(m, done[0, 0], depth, "tree_valid")
            case Drain.ALL, False, False:
                row_sums = [Signal(signed(bits), name=f"rowsum_{r}") for r in range(rows)]
                m.d.sync += [row_sums[r].eq(flat_sum([acc[r, c] for c in range(cols)]))
                             for r in range(rows)]
                total = Signal(signed(bits), name="total")
                m.d.sync += total.eq(flat_sum(row_sums))
                return [total], delayed(m, done[0, 0], 2, "total_valid")
            case Drain.ROWS, True, _:  # the wavefront finishes one row per cycle per column
                outputs = []
                for c in range(cols):
                    element = Signal(signed(bits), name=f"rowout_{c}")
                    for r in range(rows):
                        with m.If(done[r, c]):
                            m.d.sync += element.eq(acc[r, c])
                    outputs.append(delayed(m, element, cols - 1 - c, f"deskew_{c}"))
                valid = delayed(m, flat_or([done[r, cols - 1] for r in range(rows)]), 1, "rv")
                return outputs, valid
            case Drain.ROWS, False, _:  # capture every sum, then shift the rows out
                held = [[Signal(signed(bits), name=f"held_{r}_{c}") for c in range(cols)]
                        for r in range(rows)]
                pending = Signal(rows, name="rows_pending")
                with m.If(done[0, 0]):
                    m.d.sync += [held[r][c].eq(acc[r, c]) for r in range(rows)
                                 for c in range(cols)]
                    m.d.sync += pending.eq((1 << rows) - 1)
                with m.Else():
                    m.d.sync += [held[r][c].eq(held[r + 1][c]) for r in range(rows - 1)
                                 for c in range(cols)]
                    m.d.sync += pending.eq(pending >> 1)
                return held[0], pending[0]
        raise AssertionError("unreachable")

    def elaborate(self, platform) -> Module:
        m = Module()
        plan, rows, cols = self.plan, self.plan.rows, self.plan.cols
        in_bits, acc_bits = self.config.precision.in_bits, self.config.precision.acc_bits

        beat = Signal.like(self.beat.payload, name="beat_q")  # input register, every variant
        beat_valid = Signal(name="beat_valid_q")
        m.d.sync += [beat.eq(self.beat.payload), beat_valid.eq(self.beat.valid)]
        operands = self._operands(m, beat.line)

        grid, acc, done = {}, {}, {}
        column_loads = self._column_loads(m)
        for r in range(rows):
            for c in range(cols):
                on_dsp = self.target is Target.ECP5 and r * cols + c < MAX_DSPS
                pe = ProcessingElement(in_bits, acc_bits, plan.slots, self.banks,
                                       Target.ECP5 if on_dsp else Target.GENERIC)
                m.submodules[f"pe_{r}_{c}"] = pe
                if on_dsp:
                    m.d.comb += pe.advance.eq(self.advance)
                control, valid = self._control_at(m, beat, beat_valid, r, c, grid)
                m.d.comb += [
                    pe.enable.eq(valid & control.columns[c]),
                    pe.first.eq(control.first),
                    pe.last.eq(valid & control.last),
                    pe.slot.eq(control.slot),
                    pe.bank.eq(control.bank),
                    pe.operand.eq(operands[r, c]),
                ]
                self._wire_loads(m, pe, r, c, column_loads[c])
                acc[r, c], done[r, c] = pe.acc, pe.done

        outputs, valid = self._drain(m, acc, done)
        m.d.comb += self.out.valid.eq(valid)
        m.d.comb += [self.out.payload[i].eq(value) for i, value in enumerate(outputs)]
        return m

    def _column_loads(self, m: Module) -> list[tuple]:
        """``(valid, bank, index, elements)`` of the load as each column sees it (`load_skew`)."""
        load, load_valid, columns = self.load.payload, self.load.valid, []
        if self.target is Target.ECP5:  # registered on entry (see the class docstring)
            load, load_valid = Signal.like(load, name="load_q"), Signal(name="load_valid_q")
            m.d.sync += [load.eq(self.load.payload), load_valid.eq(self.load.valid)]
        for col, skew in enumerate(load_skew(self.config, self.plan)):
            elements = {e: delayed(m, load.line[e], skew, f"load_{col}_e{e}")
                        for e in _column_elements(self.plan, col)}
            columns.append((delayed(m, load_valid, skew, f"load_{col}_valid"),
                            delayed(m, load.bank, skew, f"load_{col}_bank"),
                            delayed(m, load.index, skew, f"load_{col}_index"), elements))
        return columns

    def _wire_loads(self, m: Module, pe: ProcessingElement, row: int, col: int,
                    column_load: tuple) -> None:
        """Multicast each stationary line's elements into the stores of the PEs that keep them."""
        valid, bank, index_of_line, elements = column_load
        for index in range(self.plan.stationary_lines):
            writes = [(slot, elem) for r, c, slot, elem in self.plan.loads_of_line(index)
                      if (r, c) == (row, col)]
            if not writes:
                continue
            with m.If(valid & (index_of_line == index)):
                m.d.comb += [pe.load_valid.eq(1), pe.load_bank.eq(bank)]
                for slot, elem in writes:
                    m.d.comb += [pe.load_mask[slot].eq(1), pe.load_data[slot].eq(elements[elem])]


def flat_or(values: list) -> object:
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result
