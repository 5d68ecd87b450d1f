"""Turn what the bench saw when a program went wrong into a message that names the instruction.

The bench records raw facts (`JobOutcome`): the cycle limit was hit, the DRAM refused writes,
STATUS.error was set, and what each unit's controller gate held at the end. This module maps
them back onto the program: a refused write to the STORE whose rows cover the address, a hang
to the instruction each unit was stuck on (its encoding, found in the program), and, where
the model does not expose the gates, to the functional simulator's view of the same program
(a deadlock it finds names the instruction that waits forever).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import SimulationError
from tensorforge.hw.registers import Status
from tensorforge.isa import Instruction, Store
from tensorforge.sim.axi_traffic import dram_rows
from tensorforge.sim.rtl_jobs import JobOutcome

_UNIT_NAMES = {"load": "load unit", "compute": "compute unit", "store": "store unit"}


def _name(index: int, instruction: Instruction) -> str:
    return f"instruction #{index} ({instruction.describe()})"


def _writers(config: AcceleratorConfig, program: Sequence[Instruction], address: int, length: int):
    for index, instruction in enumerate(program):
        if isinstance(instruction, Store) and any(
            start < address + length and address < start + size
            for start, size in dram_rows(config, instruction)
        ):
            yield index, instruction


def explain_violations(
    config: AcceleratorConfig,
    program: Sequence[Instruction],
    violations: Sequence[tuple[int, int]],
    writable: Sequence[tuple[int, int]],
) -> str:
    address, length = violations[0]
    regions = ", ".join(f"[{start:#x}, {end:#x})" for start, end in writable)
    writers = list(_writers(config, program, address, length))
    if writers:
        culprit = _name(*writers[0])
        more = f" (and {len(writers) - 1} more STOREs)" if len(writers) > 1 else ""
    else:
        culprit, more = "no STORE of the program (the store unit wrote where none asked)", ""
    return (
        f"the program wrote {length} B at {address:#x}, outside its output region {regions}: "
        f"{culprit}{more}; {len(violations)} refused write(s) in all"
    )


def _locate(program: Sequence[Instruction], word: int) -> str:
    matches = [i for i, instruction in enumerate(program) if instruction.encode() == word]
    if not matches:
        return f"an instruction word {word:#034x} that is not in the program"
    also = f" (same encoding as #{', #'.join(map(str, matches[1:4]))})" if matches[1:] else ""
    return _name(matches[0], program[matches[0]]) + also


def explain_hang(
    program: Sequence[Instruction], outcome: JobOutcome, functional_view: str = ""
) -> str:
    lines = [f"the program did not finish within {outcome.waited_cycles} cycles"]
    for unit, gate in outcome.in_flight.items():
        if gate["word"] is None:
            lines.append(f"  {_UNIT_NAMES[unit]}: holds no instruction")
            continue
        state = "waits for a token" if gate["waits_for_token"] else "is executing"
        lines.append(f"  {_UNIT_NAMES[unit]} {state}: {_locate(program, gate['word'])}")
    if functional_view:
        lines.append(f"  functional simulator: {functional_view}")
    counters = ", ".join(f"{name} {value}" for name, value in outcome.counters.items())
    lines.append(f"  counters: {counters}")
    return "\n".join(lines)


def functional_view(config: AcceleratorConfig, program: Sequence[Instruction],
                    image: bytes) -> str:
    """What the functional simulator says about the program: '' if it runs, else its error."""
    from tensorforge.sim.functional import run_program

    try:
        run_program(config, list(program), bytearray(image))
    except SimulationError as error:
        return str(error)
    return "runs to completion (so the RTL, not the program, is stuck)"


def explain(
    config: AcceleratorConfig,
    program: Sequence[Instruction],
    outcome: JobOutcome,
    writable: Sequence[tuple[int, int]],
    image: bytes,
) -> str:
    """'' for a clean run; else what went wrong, naming the instruction responsible."""
    if outcome.violations:
        return explain_violations(config, program, outcome.violations, writable)
    if not outcome.finished:
        view = "" if outcome.in_flight else functional_view(config, program, image)
        return explain_hang(program, outcome, view)
    if Status.ERROR in Status(outcome.status):
        return (
            "STATUS.error is set: a token counter overflowed, or DRAM or the activation memory "
            "answered a LOAD or STORE with an error (an access past the end of the DRAM image "
            "or of the activation window)"
        )
    return ""
