"""The differential fuzzer: compiled program, functional simulator, RTL and numpy must agree.

Why four parties: numpy (`Workload.reference`) knows nothing of tiles or instructions; the
functional simulator runs the compiled program on the ISA's reference semantics, started from
random (not zeroed) buffers so a program that reads what it never wrote shows; the RTL runs
the same encoded program on the generated accelerator against the Verilog DRAM with the
case's timing. A case passes when all three outputs are equal and the RTL's AXI counters
move exactly the bytes the program's instructions say (`RtlResult.traffic_consistent`).

A failing case gets a verdict naming the first stage that disagreed (`VERDICTS`) and the
message, and is written as a JSON case file that ``tensorforge fuzz --replay FILE`` reruns.

Cases run grouped by configuration, up to `BATCH` programs in one simulator process
(starting one costs more than a small program). An error that stops a process (a hang past
the cycle limit, a write out of bounds) does not say which program caused it, so that batch
reruns one program a process to find it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from tensorforge.errors import TensorforgeError
from tensorforge.sim.fuzz_cases import FuzzCase

logger = logging.getLogger(__name__)

PASS = "pass"
#: Failure verdicts, in the order the stages run.
VERDICTS = ("compile-error", "functional-error", "functional-mismatch", "rtl-error",
            "rtl-mismatch", "traffic-mismatch")
BATCH = 16
CASE_FILE_VERSION = 1


@dataclass(frozen=True)
class FuzzOutcome:
    """What one case did: `PASS` or a verdict of `VERDICTS`, the detail, the RTL's cycles."""

    case: FuzzCase
    verdict: str
    detail: str = ""
    cycles: int | None = None
    instructions: int | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


@dataclass(frozen=True)
class _Compiled:
    case: FuzzCase
    program: object
    inputs: dict
    expected: np.ndarray


def _text(error: Exception) -> str:
    """An error as a finding's detail: user-facing errors as they are, others with their type."""
    return str(error) if isinstance(error, TensorforgeError) else f"{type(error).__name__}: {error}"


def _mismatch(name: str, output: np.ndarray, expected: np.ndarray) -> str:
    if output.shape != expected.shape:
        return f"{name} shape {output.shape}, numpy {expected.shape}"
    wrong = np.argwhere(output != expected)
    first = tuple(int(i) for i in wrong[0])
    return (f"{len(wrong)} of {expected.size} elements differ from numpy; first at {first}: "
            f"{name} {int(output[first])}, numpy {int(expected[first])}")


def _front(case: FuzzCase) -> _Compiled | FuzzOutcome:
    """Compile the case and run it on the functional simulator: the stages before the RTL."""
    from tensorforge.compiler.codegen import generate

    workload = case.workload()
    inputs = case.inputs()
    expected = workload.reference(inputs)
    try:
        program = generate(workload, case.resolve_mapping(), case.config)
    except Exception as error:  # noqa: BLE001 - any crash of a stage is a finding
        return FuzzOutcome(case, "compile-error", _text(error))
    try:
        functional = program.run_functional(
            inputs, garbage=np.random.default_rng((case.seed, 1)))
    except Exception as error:  # noqa: BLE001
        return FuzzOutcome(case, "functional-error", _text(error))
    if functional.shape != expected.shape or np.any(functional != expected):
        return FuzzOutcome(case, "functional-mismatch",
                           _mismatch("functional", functional, expected))
    return _Compiled(case, program, inputs, expected)


def _judge(item: _Compiled, result) -> FuzzOutcome:
    """Compare the RTL's output with numpy's on the case's own inputs (computed here, not
    taken from the run's own check) and its AXI traffic with the instructions'."""
    figures = {"cycles": result.cycles, "instructions": result.instructions}
    output = np.asarray(result.output)
    if output.shape != item.expected.shape or np.any(output != item.expected):
        return FuzzOutcome(item.case, "rtl-mismatch", _mismatch("RTL", output, item.expected),
                           **figures)
    if not result.traffic_consistent:
        return FuzzOutcome(item.case, "traffic-mismatch",
                           f"AXI counters read {result.dram_bytes_read} / wrote "
                           f"{result.dram_bytes_written} B, the instructions move "
                           f"{result.expected_traffic}", **figures)
    return FuzzOutcome(item.case, PASS, **figures)


def _rtl(items: Sequence[_Compiled]) -> list[FuzzOutcome]:
    """Run one configuration's compiled cases in one simulator process; on an error that
    stopped the process, each on its own to say which one it was."""
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    if not items:
        return []
    config = items[0].case.config
    cases = [RtlCase(i.case.workload(), inputs=i.inputs, seed=i.case.seed, program=i.program,
                     memory=i.case.memory) for i in items]
    try:
        results = run_programs_on_rtl(config, cases, RunOptions(seed=items[0].case.seed))
    except Exception as error:  # noqa: BLE001
        if len(items) == 1:
            return [FuzzOutcome(items[0].case, "rtl-error", _text(error))]
        logger.info("a batch on %s stopped (%s); rerunning its programs one by one",
                    config.describe(), error)
        return [outcome for item in items for outcome in _rtl([item])]
    return [_judge(item, result) for item, result in zip(items, results, strict=True)]


def check_batch(cases: Sequence[FuzzCase]) -> list[FuzzOutcome]:
    """Every stage for cases of one configuration; outcomes in the cases' order.

    A worker-process entry point (top level, picklable arguments).
    """
    fronts = [_front(case) for case in cases]
    compiled = [f for f in fronts if isinstance(f, _Compiled)]
    by_index = {o.case.index: o for o in _rtl(compiled)}
    return [f if isinstance(f, FuzzOutcome) else by_index[f.case.index] for f in fronts]


def batches(cases: Sequence[FuzzCase], size: int = BATCH) -> list[list[FuzzCase]]:
    """Cases grouped by configuration, at most ``size`` a group, groups in first-seen order."""
    groups: dict[str, list[FuzzCase]] = {}
    for case in cases:
        groups.setdefault(case.config_name, []).append(case)
    return [group[start:start + size] for group in groups.values()
            for start in range(0, len(group), size)]


def run_cases(cases: Sequence[FuzzCase], *, jobs: int = 1,
              progress: Callable[[list[FuzzOutcome]], None] | None = None
              ) -> list[FuzzOutcome]:
    """Check every case (``jobs`` simulator processes at a time); outcomes in case order.

    ``progress`` is called with each batch's outcomes as it finishes (the campaign writes its
    summary there, so an interrupted campaign still leaves one).
    """
    done: dict[int, FuzzOutcome] = {}

    def record(outcomes: list[FuzzOutcome]) -> None:
        done.update((o.case.index, o) for o in outcomes)
        if progress:
            progress(outcomes)

    for outcomes in _each_batch(batches(cases), jobs):
        record(outcomes)
    return [done[case.index] for case in cases]


def _each_batch(groups: list[list[FuzzCase]], jobs: int) -> Iterator[list[FuzzOutcome]]:
    if jobs <= 1:
        for group in groups:
            yield check_batch(group)
        return
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(check_batch, group) for group in groups]):
            yield future.result()


def write_case_file(outcome: FuzzOutcome, directory: Path) -> Path:
    """The failing case as JSON (with its verdict), for ``tensorforge fuzz --replay``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{outcome.case.name}.json"
    path.write_text(json.dumps({"version": CASE_FILE_VERSION, "case": outcome.case.to_dict(),
                                "verdict": outcome.verdict, "detail": outcome.detail},
                               indent=2) + "\n")
    return path


def read_case_file(path: Path) -> FuzzCase:
    """The case a `write_case_file` file holds; a `TensorforgeError` naming the file if not."""
    from tensorforge.errors import ConfigError

    try:
        data = json.loads(Path(path).read_text())
        if data.get("version") != CASE_FILE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {CASE_FILE_VERSION}")
        return FuzzCase.from_dict(data["case"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(f"{path} is not a fuzz case file ({error}); replay a file that "
                          "`tensorforge fuzz` wrote for a failing case") from None
