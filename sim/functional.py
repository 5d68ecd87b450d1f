"""The functional simulator: runs a task-ISA program on numpy models of DRAM and the buffers.

It implements exactly the semantics written in `tensorforge.isa`'s docstring and uses
`tensorforge.intrinsics.apply_intrinsic` for every COMPUTE step, so the golden model and the
encoder cannot disagree. Results are bit-exact (operands sign-extended from ``in_bits``,
accumulators wrapped to ``acc_bits``).

The three units (load, compute, store) run their own instruction queues, which the fetch unit
fills in program order (queues are modelled as unbounded). A unit starts its head instruction
only when every token it pops is available; the simulator picks runnable units round-robin, so
the results do not depend on a particular interleaving *if* the program's tokens order every
conflicting access. That is checked too: each instruction gets a vector clock from program
order and the tokens it popped, and two instructions of different units that touch the same
scratchpad line, accumulator line or DRAM byte (one of them writing) without being ordered are
reported as an unprotected hazard. A pop that can never be satisfied is a deadlock. Both raise
`SimulationError` naming the instruction index and its text, as do out-of-range addresses.

DMA addresses in the configuration's activation window (`AcceleratorConfig.activation_window`,
``scratchpad.activations`` bytes at ``ACTIVATION_BASE``) are an on-chip memory, not DRAM: a
separate byte buffer whose traffic `Statistics` counts apart from DRAM's. Its content is
undefined until written (the hardware's block RAM keeps whatever it held), so a LOAD of a
window byte no STORE of the simulator wrote is an error, as is a transfer that straddles the
window's end or reaches it on an accelerator without one.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig
from tensorforge.errors import SimulationError
from tensorforge.intrinsics import apply_intrinsic, wrap
from tensorforge.isa import (
    Buffer,
    Compute,
    ComputeMode,
    Finish,
    Instruction,
    Load,
    Reduction,
    Store,
    decode_program,
    expand,
)
from tensorforge.requant import PARAM_LINES, requantize_lines


class Unit(enum.IntEnum):
    LOAD = 0
    COMPUTE = 1
    STORE = 2


# (producer, consumer) token queues, VTA-style.
_QUEUES = (
    (Unit.LOAD, Unit.COMPUTE),
    (Unit.COMPUTE, Unit.LOAD),
    (Unit.COMPUTE, Unit.STORE),
    (Unit.STORE, Unit.COMPUTE),
)


@dataclass
class Statistics:
    """What one run did: instruction counts, DRAM traffic and work issued. DRAM counts DRAM
    only; the activation window's traffic (on chip) is ``window_bytes_*``, listed by
    `as_dict` where there was any."""

    instructions: Counter = field(default_factory=Counter)
    dram_bytes_read: int = 0
    dram_bytes_written: int = 0
    window_bytes_read: int = 0
    window_bytes_written: int = 0
    macs: int = 0  # multiply-accumulates issued by MAC steps, padding included
    mac_steps: int = 0
    zero_steps: int = 0
    overwrite_steps: int = 0  # MAC steps that wrote C instead of accumulating (``overwrite``)
    tokens: Counter = field(default_factory=Counter)  # pushes per queue, "load->compute"

    def as_dict(self) -> dict[str, object]:
        window = {"window_bytes_read": self.window_bytes_read,
                  "window_bytes_written": self.window_bytes_written}
        return {
            "instructions": dict(sorted(self.instructions.items())),
            "dram_bytes_read": self.dram_bytes_read,
            "dram_bytes_written": self.dram_bytes_written,
            **(window if any(window.values()) else {}),
            "macs": self.macs,
            "mac_steps": self.mac_steps,
            "zero_steps": self.zero_steps,
            "overwrite_steps": self.overwrite_steps,
            "tokens": dict(sorted(self.tokens.items())),
        }


def _unit_of(instruction: Instruction) -> Unit | None:
    return {Load: Unit.LOAD, Compute: Unit.COMPUTE, Store: Unit.STORE}.get(type(instruction))


class _Tracker:
    """Last access position per unit for every line/byte of one memory, for hazard checks."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        # 1-based position of the last access per unit; 0: never. Allocated on first use.
        self.writes: dict[Unit, np.ndarray] = {}
        self.reads: dict[Unit, np.ndarray] = {}

    def _last(self, table: dict[Unit, np.ndarray], unit: Unit) -> np.ndarray:
        if unit not in table:
            table[unit] = np.zeros(self.size, dtype=np.int32)
        return table[unit]

    def touch(
        self,
        unit: Unit,
        position: int,
        clock: np.ndarray,
        ranges: list[tuple[int, int]],
        write: bool,
    ) -> tuple[Unit, int, str] | None:
        """Record accesses to ``[start, stop)`` ranges; (unit, position, what) of a conflict."""
        for start, stop in ranges:
            if start >= stop:
                continue
            for other in Unit:
                if other is unit:
                    continue
                seen = 0
                if other in self.writes:
                    seen = int(self.writes[other][start:stop].max())
                if write and other in self.reads:
                    seen = max(seen, int(self.reads[other][start:stop].max()))
                if seen > clock[other]:
                    kind = "writes" if write else "reads"
                    return other, seen, f"{kind} {self.name} [{start}, {stop})"
            self._last(self.writes if write else self.reads, unit)[start:stop] = position
        return None


class FunctionalSimulator:
    """Executes programs for one `AcceleratorConfig`; holds the scratchpad and accumulator.

    ``spad`` is ``spad_lines x spad_line_elems`` and ``acc`` is ``acc_lines x acc_line_elems``
    (int64 arrays holding ``in_bits``/``acc_bits`` values). ``check_hazards`` turns the token
    race detector off for speed; deadlocks and bounds are always checked.

    The buffers start zeroed, unless ``garbage`` (a seeded generator) fills them with random
    values: real SRAM keeps whatever earlier programs left, so a program must read only lines it
    loaded or computed itself, and a run from garbage shows whether it does. ``window`` is the
    activation memory (``scratchpad.activations`` bytes, module docstring); ``window_written``
    marks the bytes STOREs wrote, the only ones a LOAD may read.
    """

    def __init__(self, config: AcceleratorConfig, *, check_hazards: bool = True,
                 garbage: np.random.Generator | None = None) -> None:
        self.config = config
        self.check_hazards = check_hazards
        spad_shape = (config.spad_lines, config.spad_line_elems)
        acc_shape = (config.acc_lines, config.acc_line_elems)
        if garbage is None:
            self.spad = np.zeros(spad_shape, dtype=np.int64)
            self.acc = np.zeros(acc_shape, dtype=np.int64)
        else:
            self.spad = _random_values(garbage, spad_shape, config.precision.in_bits)
            self.acc = _random_values(garbage, acc_shape, config.precision.acc_bits)
        self.window = np.zeros(len(config.activation_window), dtype=np.uint8)
        self.window_written = np.zeros(len(self.window), dtype=bool)

    # ------------------------------------------------------------------ the run loop

    def run(self, program: bytes | list[Instruction], dram: bytearray) -> Statistics:
        """Run ``program`` to its FINISH against ``dram`` (modified in place)."""
        instructions = (
            decode_program(bytes(program))
            if isinstance(program, bytes | bytearray)
            else list(program)
        )
        fetched = Counter(type(ins).__name__.upper() for ins in instructions
                          if not isinstance(ins, Finish))
        self._check_repeats(instructions)
        precision = self.config.precision
        instructions = expand(instructions, precision.in_bytes, precision.acc_bytes)
        queues = self._queues(instructions)
        self._instructions = instructions
        memory = np.frombuffer(dram, dtype=np.uint8) if len(dram) else np.zeros(0, np.uint8)
        if not memory.flags.writeable:
            raise SimulationError("dram must be a writable buffer such as a bytearray")
        stats = Statistics()
        tokens = Counter()
        heads = [0, 0, 0]
        last_clock = [np.zeros(3, dtype=np.int64) for _ in Unit]
        pending: dict[tuple[Unit, Unit], list[np.ndarray]] = {q: [] for q in _QUEUES}
        trackers = self._trackers(len(memory)) if self.check_hazards else None
        while any(heads[u] < len(queues[u]) for u in Unit):
            progressed = False
            for unit in Unit:
                while heads[unit] < len(queues[unit]):
                    pc = queues[unit][heads[unit]]
                    instruction = instructions[pc]
                    pops = self._pops(unit, instruction)
                    if any(tokens[q] == 0 for q in pops):
                        break
                    clock = last_clock[unit].copy()
                    for queue in pops:
                        tokens[queue] -= 1
                        clock = np.maximum(clock, pending[queue].pop(0))
                    heads[unit] += 1
                    clock[unit] = heads[unit]
                    self._execute(pc, instruction, memory, stats, trackers, unit, clock, queues)
                    last_clock[unit] = clock
                    for queue in self._pushes(unit, instruction):
                        tokens[queue] += 1
                        pending[queue].append(clock)
                        stats.tokens[f"{queue[0].name.lower()}->{queue[1].name.lower()}"] += 1
                    progressed = True
            if not progressed:
                raise SimulationError(self._deadlock(instructions, queues, heads, tokens))
        stats.instructions = fetched  # as fetched: a repeated LOAD or STORE counts once
        stats.instructions["FINISH"] += 1
        return stats

    def _check_repeats(self, instructions: list[Instruction]) -> None:
        if self.config.controller.repeat:
            return
        for pc, ins in enumerate(instructions):
            if getattr(ins, "repeat", 0) or getattr(ins, "repeat_stride", 0):
                raise SimulationError(
                    f"instruction {pc} ({ins.describe()}) repeats, but the accelerator is built "
                    "without controller.repeat; build it with --repeat or compile for this one")

    def _queues(self, instructions: list[Instruction]) -> list[list[int]]:
        finish = next((pc for pc, ins in enumerate(instructions) if isinstance(ins, Finish)), None)
        if finish is None:
            raise SimulationError(
                "the program has no FINISH; the accelerator would never raise "
                "done. End every program with Finish()."
            )
        if finish != len(instructions) - 1:
            raise SimulationError(
                f"instruction {finish + 1} ({instructions[finish + 1].describe()}) follows "
                "FINISH and would never run"
            )
        queues: list[list[int]] = [[], [], []]
        for pc, instruction in enumerate(instructions[:finish]):
            queues[_unit_of(instruction)].append(pc)
        return queues

    @staticmethod
    def _pops(unit: Unit, ins: Instruction) -> list[tuple[Unit, Unit]]:
        found = []
        if ins.pop_prev:
            found.append((Unit(unit - 1), unit))
        if ins.pop_next:
            found.append((Unit(unit + 1), unit))
        return found

    @staticmethod
    def _pushes(unit: Unit, ins: Instruction) -> list[tuple[Unit, Unit]]:
        found = []
        if ins.push_prev:
            found.append((unit, Unit(unit - 1)))
        if ins.push_next:
            found.append((unit, Unit(unit + 1)))
        return found

    @staticmethod
    def _deadlock(instructions, queues, heads, tokens) -> str:
        lines = ["deadlock: no unit can start its next instruction"]
        for unit in Unit:
            if heads[unit] < len(queues[unit]):
                pc = queues[unit][heads[unit]]
                waits = [
                    f"{q[0].name.lower()}->{q[1].name.lower()}"
                    for q in FunctionalSimulator._pops(unit, instructions[pc])
                    if tokens[q] == 0
                ]
                lines.append(
                    f"  {unit.name.lower()} unit waits at instruction {pc} "
                    f"({instructions[pc].describe()}) for a {' and '.join(waits)} "
                    "token that is never pushed"
                )
        return "\n".join(lines)

    def _trackers(self, dram_size: int) -> dict[str, _Tracker]:
        return {
            "spad": _Tracker("scratchpad lines", self.config.spad_lines),
            "acc": _Tracker("accumulator lines", self.config.acc_lines),
            "dram": _Tracker("DRAM bytes", dram_size),
            "window": _Tracker("activation window bytes", len(self.window)),
        }

    # ------------------------------------------------------------------ semantics

    def _execute(self, pc, instruction, memory, stats, trackers, unit, clock, queues) -> None:
        try:
            if isinstance(instruction, Load):
                accesses = self._load(instruction, memory, stats)
            elif isinstance(instruction, Store):
                accesses = self._store(instruction, memory, stats)
            else:
                accesses = self._compute(instruction, stats)
        except SimulationError as error:
            raise SimulationError(f"instruction {pc} ({instruction.describe()}): {error}") from None
        if trackers is None:
            return
        for memory_name, ranges, write in accesses:
            problem = trackers[memory_name].touch(unit, int(clock[unit]), clock, ranges, write)
            if problem:
                other, seen, what = problem
                other_pc = queues[other][seen - 1]
                raise SimulationError(
                    f"unprotected hazard: instruction {pc} ({instruction.describe()}) {what}, "
                    f"which instruction {other_pc} ({self._instructions[other_pc].describe()}) "
                    f"of the {other.name.lower()} unit also uses, and no token orders them"
                )

    def _dram_rows(self, ins: Load | Store, elem_bytes: int, size: int
                   ) -> list[tuple[str, int, int]]:
        """``(memory, start, stop)`` per row: ``"dram"`` or ``"window"`` (the activation
        memory, offsets from its base), checked to lie wholly in one of them."""
        window = self.config.activation_window
        rows = []
        for r in range(ins.rows if ins.row_len else 0):
            start = ins.dram_addr + r * ins.stride * elem_bytes
            stop = start + ins.row_len * elem_bytes
            if start >= ACTIVATION_BASE:
                if not window:
                    raise SimulationError(
                        f"DRAM bytes {start:#x}..{stop - 1:#x} lie in the activation window "
                        f"(from {ACTIVATION_BASE:#x}), but this accelerator has no activation "
                        "memory (scratchpad.activations = 0): build it with --activations or "
                        "compile for this one")
                if stop > window.stop:
                    raise SimulationError(
                        f"DRAM bytes {start:#x}..{stop - 1:#x} straddle the end of the "
                        f"{len(window)}-byte activation window at {window.stop:#x}")
                rows.append(("window", start - ACTIVATION_BASE, stop - ACTIVATION_BASE))
            else:
                rows.append(("dram", start, stop))
        dram = [stop for memory, _, stop in rows if memory == "dram"]
        if dram and max(dram) > size:
            raise SimulationError(
                f"DRAM bytes up to {max(dram)} are outside the {size}-byte DRAM"
            )
        return rows

    def _memory(self, name: str, dram: np.ndarray) -> np.ndarray:
        return self.window if name == "window" else dram

    @staticmethod
    def _count(stats: Statistics, rows: list[tuple[str, int, int]], direction: str) -> None:
        for memory, start, stop in rows:
            what = f"{memory}_bytes_{direction}"
            setattr(stats, what, getattr(stats, what) + stop - start)

    @staticmethod
    def _accesses(rows: list[tuple[str, int, int]], write: bool) -> list:
        """The hazard tracker's entries for ``rows``, one per memory touched."""
        return [(memory, [(a, b) for m, a, b in rows if m == memory], write)
                for memory in ("dram", "window") if any(m == memory for m, _, _ in rows)]

    def _load(self, ins: Load, memory: np.ndarray, stats: Statistics):
        to_acc = ins.buffer is Buffer.ACC
        target, name = (self.acc, "acc") if to_acc else (self.spad, "spad")
        bits = self.config.precision.acc_bits if to_acc else self.config.precision.in_bits
        elem_bytes = bits // 8
        first, last = ins.line, ins.line + ins.pad_before + ins.rows + ins.pad_after
        if last > target.shape[0]:
            raise SimulationError(
                f"writes {name} lines {first}..{last - 1}, past its {target.shape[0]} lines"
            )
        if ins.row_len > target.shape[1]:
            raise SimulationError(
                f"row_len {ins.row_len} is wider than a {name} line ({target.shape[1]} elements)"
            )
        rows = self._dram_rows(ins, elem_bytes, len(memory))
        for where, start, stop in rows:
            if where == "window" and not self.window_written[start:stop].all():
                unset = start + int(np.argmin(self.window_written[start:stop]))
                raise SimulationError(
                    f"reads activation window byte {ACTIVATION_BASE + unset:#x}, which no "
                    "STORE wrote: the on-chip memory's content is undefined until written")
        target[first:last] = 0
        dtype = np.dtype(f"<i{elem_bytes}")
        for r, (where, start, stop) in enumerate(rows):
            values = self._memory(where, memory)[start:stop].view(dtype)
            target[first + ins.pad_before + r, : ins.row_len] = values
        self._count(stats, rows, "read")
        return [(name, [(first, last)], True), *self._accesses(rows, False)]

    def _store(self, ins: Store, memory: np.ndarray, stats: Statistics):
        precision = self.config.precision
        elem_bytes = precision.in_bytes if ins.requant else precision.acc_bytes
        blocks = self._output_params(ins)
        if ins.line + ins.rows > self.acc.shape[0]:
            raise SimulationError(
                f"reads accumulator lines {ins.line}..{ins.line + ins.rows - 1}"
                f", past its {self.acc.shape[0]} lines"
            )
        if ins.row_len > self.acc.shape[1]:
            raise SimulationError(
                f"row_len {ins.row_len} is wider than an accumulator line "
                f"({self.acc.shape[1]} elements)"
            )
        rows = self._dram_rows(ins, elem_bytes, len(memory))
        dtype = np.dtype(f"<i{elem_bytes}")
        for r, (where, start, stop) in enumerate(rows):
            line = wrap(self.acc[ins.line + r, : ins.row_len], precision.acc_bits)
            if blocks is not None:
                line = requantize_lines(line, self._row_params(ins, blocks, r),
                                        precision.in_bits, precision.acc_bits)
            self._memory(where, memory)[start:stop] = line.astype(dtype).view(np.uint8)
            if where == "window":
                self.window_written[start:stop] = True
        self._count(stats, rows, "written")
        read = [(ins.line, ins.line + ins.rows)]
        if blocks is not None:
            read.append((ins.params, ins.params + len(blocks) * PARAM_LINES))
        return [("acc", _merge(read), False), *self._accesses(rows, True)]

    def _output_params(self, ins: Store) -> np.ndarray | None:
        """The parameter blocks a requantizing STORE reads (``blocks x PARAM_LINES x lanes``,
        `tensorforge.requant`): one, or one per ``line_elems`` rows if ``per_row``; else None."""
        if not ins.requant:
            return None
        if not self.config.output_pipeline:
            raise SimulationError("requantizes, but this accelerator has no output pipeline "
                                  "(build it with output_pipeline = true)")
        lanes = self.acc.shape[1]
        count = max(1, -(-ins.rows // lanes)) if ins.per_row else 1
        end = ins.params + count * PARAM_LINES
        if end > self.acc.shape[0]:
            raise SimulationError(
                f"reads output parameter lines {ins.params}..{end - 1}, past the "
                f"accumulator's {self.acc.shape[0]} lines")
        lines = wrap(self.acc[ins.params : end], self.config.precision.acc_bits)
        return lines.reshape(count, PARAM_LINES, lanes)

    @staticmethod
    def _row_params(ins: Store, blocks: np.ndarray, row: int) -> np.ndarray:
        """Row ``row``'s parameter lines, cut to the row: its block's lanes, or (``per_row``)
        lane ``row mod lanes`` of block ``row div lanes`` for every element."""
        if not ins.per_row:
            return blocks[0][:, : ins.row_len]
        lanes = blocks.shape[2]
        column = blocks[row // lanes][:, row % lanes : row % lanes + 1]
        return np.repeat(column, ins.row_len, axis=1)

    def _compute(self, ins: Compute, stats: Statistics):
        config = self.config
        blocks = config.blocks
        sizes = config.intrinsic_sizes
        steps = [(o, i) for o in range(ins.outer) for i in range(ins.inner)]
        reads, writes = [], []

        def span(base: int, outer: int, inner: int, lines: int, limit: int, what: str):
            top = base + (ins.outer - 1) * outer + (ins.inner - 1) * inner + lines
            if steps and top > limit:
                raise SimulationError(
                    f"its {what} blocks reach line {top - 1}, past the {limit} lines of the buffer"
                )

        span(ins.acc_base, ins.acc_outer, ins.acc_inner, blocks["C"].lines, len(self.acc), "C")
        if ins.reduce is Reduction.MAX and not config.output_pipeline:
            raise SimulationError("takes the max (reduce=MAX), but this accelerator has no "
                                  "max datapath (build it with output_pipeline = true)")
        if ins.mode is ComputeMode.MAC:
            span(ins.a_base, ins.a_outer, ins.a_inner, blocks["A"].lines, len(self.spad), "A")
            span(ins.b_base, ins.b_outer, ins.b_inner, blocks["B"].lines, len(self.spad), "B")
        # C lines this instruction wrote so far: an overwriting step must not revisit one
        written = np.zeros(len(self.acc), dtype=bool) if ins.overwrite else None
        for o, i in steps:
            c = ins.acc_base + o * ins.acc_outer + i * ins.acc_inner
            c_lines = slice(c, c + blocks["C"].lines)
            if written is not None:
                if ins.overwrites(o, i) and written[c_lines].any():
                    raise SimulationError(
                        f"its overwriting step (o={o}, i={i}) writes C lines {c_lines.start}.."
                        f"{c_lines.stop - 1}, which an earlier step of it wrote; overwrite "
                        "only the first visit of each C block"
                    )
                written[c_lines] = True
            writes.append((c_lines.start, c_lines.stop))
            if ins.mode is ComputeMode.ZERO:
                self.acc[c_lines] = 0
                stats.zero_steps += 1
                continue
            a = ins.a_base + o * ins.a_outer + i * ins.a_inner
            b = ins.b_base + o * ins.b_outer + i * ins.b_inner
            reads += [(a, a + blocks["A"].lines), (b, b + blocks["B"].lines)]
            overwrite = ins.overwrites(o, i)
            maximum = ins.reduce is Reduction.MAX and not overwrite
            result = apply_intrinsic(
                config.intrinsic,
                sizes,
                self.spad[a : a + blocks["A"].lines],
                self.spad[b : b + blocks["B"].lines],
                np.zeros_like(self.acc[c_lines]) if overwrite or maximum else self.acc[c_lines],
                config.precision.acc_bits,
            )
            # MAX: the step's products, then the larger of them and C, lane by lane
            self.acc[c_lines] = np.maximum(self.acc[c_lines], result) if maximum else result
            stats.overwrite_steps += overwrite
            stats.mac_steps += 1
            stats.macs += config.macs_per_step
        return [("spad", _merge(reads), False), ("acc", _merge(writes), True)]


def _random_values(rng: np.random.Generator, shape: tuple[int, int], bits: int) -> np.ndarray:
    """Uniform ``bits``-wide two's-complement values (what uninitialized SRAM may hold)."""
    bits = min(bits, 63)
    return rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=shape, dtype=np.int64)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of half-open ranges, so the hazard check touches each line once."""
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def run_program(
    config: AcceleratorConfig,
    program: bytes | list[Instruction],
    dram: bytearray,
    *,
    check_hazards: bool = True,
    garbage: np.random.Generator | None = None,
) -> Statistics:
    """Run ``program`` on a fresh accelerator against ``dram`` (in place); its buffers start
    zeroed, or filled from ``garbage`` (see `FunctionalSimulator`)."""
    simulator = FunctionalSimulator(config, check_hazards=check_hazards, garbage=garbage)
    return simulator.run(program, dram)
