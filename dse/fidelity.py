"""How well the cost model predicts the RTL: run programs on both and measure the agreement.

The sweep ranks designs by `dse.cost_model`, so its agreement with the Verilator model of the
generated RTL on programs it was not fitted on is the number that says whether a sweep can be
trusted. `validate` runs `FidelityCase` programs (`dse.fidelity_cases`) on the RTL and asks the
model for the same program under the same DRAM timing (`model_cycles`), and `Agreement`
summarizes the pairs: per-case relative error, mean and max absolute error, and the rank
correlations (Spearman, Kendall) that decide whether the model orders designs as the RTL does.

RTL runs are the expensive part (a Verilator build per configuration, then seconds a
program), so each result is kept in the result store keyed by the content hash of everything
that decides it: the hardware sources, the configuration, the encoded program, the input
image, the memory and the simulated DRAM's sources (`dram_digest`). Editing the model never
invalidates them; editing the hardware, the DRAM model or the compiler's output does.
Configurations run in parallel worker processes, one simulator
process each.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.fidelity_cases import FidelityCase
from tensorforge.errors import SimulationError
from tensorforge.hashing import stable_hash
from tensorforge.memory import MemorySystem
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

STORE_KIND = "fidelity_rtl"
#: The held-out agreement as last measured (`tensorforge validate --write`), shipped with the
#: package so sweep reports can quote it without running the RTL.
SUMMARY_FILE = "fidelity_summary.json"
#: The modules whose code decides the model's cycles: a summary made with other code is stale.
MODEL_MODULES = ("tensorforge.dse.cost_model", "tensorforge.dse.cost_parameters",
                 "tensorforge.dse.cost_batch", "tensorforge.dse.cost_mapping",
                 "tensorforge.dse.cost_micro_loop", "tensorforge.dse.cost_tile_step",
                 "tensorforge.dse.cost_overlap", "tensorforge.dse.cost_boundary",
                 "tensorforge.dse.cost_split", "tensorforge.dse.cost_timeline",
                 "tensorforge.dse.cost_geometry", "tensorforge.dse.cost_space",
                 "tensorforge.dse.cost_rows", "tensorforge.dse.cost_transfers",
                 "tensorforge.dse.cost_trace", "tensorforge.dse.cost_holds")
#: How reports name the model whose cycles they quote.
MODEL_NAME = "instruction-level timeline of the compiled program (dse/cost_trace.py)"
#: The model a software search ranks its candidates with, thousands at a time.
SEARCH_MODEL_NAME = "batch model (dse/cost_model.py)"
#: The held-out targets of issue 14: the sweep's model must meet them on programs it never saw.
TARGET_MEAN_ERROR = 0.05
TARGET_MAX_ERROR = 0.10
TARGET_SPEARMAN = 0.98


def model_prediction(workload: Workload, mapping: Mapping, config: AcceleratorConfig,
                     memory: MemorySystem) -> dict[str, float]:
    """The cost model's row for one mapping on ``memory``, with ``accelerator_cycles``: its
    cycles without the host-side copy of a gathered or im2col layout, which happens before
    the RTL starts counting."""
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters

    row = evaluate_mapping(workload, mapping, config, rtl_parameters(memory, config))
    row["accelerator_cycles"] = row["cycles"] - row["host_cycles"]
    return row


def model_cycles(workload: Workload, mapping: Mapping, config: AcceleratorConfig,
                 memory: MemorySystem) -> float:
    """The cost model's accelerator cycles for exactly this program (see `model_prediction`)."""
    return model_prediction(workload, mapping, config, memory)["accelerator_cycles"]


@dataclass(frozen=True)
class RtlMeasurement:
    """What the RTL said about one program (the stored payload)."""

    cycles: int
    match: bool
    load_busy: int
    compute_busy: int
    store_busy: int
    instructions: int
    sim_seconds: float


@dataclass(frozen=True)
class CaseOutcome:
    """A case with the RTL's measurement and the model's prediction."""

    case: FidelityCase
    rtl: RtlMeasurement
    model: dict[str, float]
    cached: bool
    run_key: str = ""  # `_prepare`'s key: what decided the RTL run (program, inputs, RTL)

    @property
    def model_cycles(self) -> float:
        return self.model["accelerator_cycles"]

    @property
    def error(self) -> float:
        """Model / RTL - 1: above 0 the model is pessimistic."""
        return self.model_cycles / self.rtl.cycles - 1


@dataclass(frozen=True)
class _Prepared:
    case: FidelityCase
    key: str
    program: object
    inputs: dict


def dram_digest() -> str:
    """The simulated DRAM the RTL runs against (`RunOptions` default, the Verilog one of the
    simulation top): its sources are part of an RTL result's identity, as the hardware's are."""
    from pathlib import Path

    import tensorforge.sim

    folder = Path(tensorforge.sim.__file__).parent
    sources = [folder / name for name in ("axi_dram.v", "sim_top.py", "fast_dram.py")]
    return stable_hash("fast", *[(p.name, p.read_bytes().hex()) for p in sources])


def _prepare(case: FidelityCase) -> _Prepared:
    """Compile the case and hash what decides its RTL run."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.isa import encode_program
    from tensorforge.sim.rtl_identity import rtl_digest

    workload = case.workload()
    program = generate(workload, case.resolve_mapping(), case.config)
    inputs = workload.random_inputs(np.random.default_rng(case.seed))
    image = hashlib.sha256(bytes(program.pack_inputs(inputs))).hexdigest()
    key = stable_hash(rtl_digest(case.config), dram_digest(), case.config.to_json(), image,
                      encode_program(list(program.instructions)).hex(),
                      program.instruction_base, case.memory().to_dict())
    return _Prepared(case, key, program, inputs)


def _run_config(cases: Sequence[FidelityCase]) -> list[tuple[str, dict]]:
    """Run one configuration's cases on its RTL (one simulator process per DRAM latency).

    A worker-process entry point: returns (key, measurement) pairs for the caller to store.
    """
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    prepared = [_prepare(case) for case in cases]
    config = cases[0].config
    out = []
    for latency in sorted({p.case.dram_latency for p in prepared}):
        group = [p for p in prepared if p.case.dram_latency == latency]
        rtl_cases = [RtlCase(p.case.workload(), inputs=p.inputs, seed=p.case.seed,
                             program=p.program) for p in group]
        options = RunOptions(memory=group[0].case.memory(), seed=group[0].case.seed)
        for p, result in zip(group, run_programs_on_rtl(config, rtl_cases, options),
                             strict=True):
            out.append((p.key, {
                "cycles": result.cycles, "match": result.match,
                "load_busy": result.load_busy, "compute_busy": result.compute_busy,
                "store_busy": result.store_busy, "instructions": result.instructions,
                "sim_seconds": result.sim_seconds,
            }))
    return out


def validate(cases: Sequence[FidelityCase], *, jobs: int = 1,
             store: ResultStore | None = None,
             progress: Callable[[str], None] | None = None) -> list[CaseOutcome]:
    """Every case on the RTL (from the store where it ran before) beside the model; in order.

    Configurations with a case missing from the store run in ``jobs`` worker processes; each
    result is stored as soon as its configuration finishes, so an interrupted validation
    resumes where it stopped.
    """
    store = store or ResultStore()
    prepared = {case.name: _prepare(case) for case in cases}
    stored = {name: store.get(STORE_KIND, p.key) for name, p in prepared.items()}
    missing: dict[str, list[FidelityCase]] = {}
    for case in cases:
        if stored[case.name] is None:
            missing.setdefault(case.config_name, []).append(case)
    fresh: dict[str, dict] = {}
    if missing:
        def record(pairs: list[tuple[str, dict]]) -> None:
            for key, payload in pairs:
                store.put(STORE_KIND, key, payload)
                fresh[key] = payload

        if jobs <= 1 or len(missing) == 1:
            for name, group in missing.items():
                record(_run_config(group))
                if progress:
                    progress(f"{name}: {len(group)} programs on RTL")
        else:
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(_run_config, group): name
                           for name, group in missing.items()}
                for future in as_completed(futures):
                    record(future.result())
                    if progress:
                        progress(f"{futures[future]}: {len(missing[futures[future]])} "
                                 "programs on RTL")
    outcomes = []
    for case in cases:
        p = prepared[case.name]
        entry = stored[case.name]
        if entry is None and p.key not in fresh:
            raise SimulationError(
                f"{case.name}: its program changed while the validation ran (the code "
                "generator or the hardware was edited); the results so far are stored, so "
                "run it again")
        payload = entry.payload if entry is not None else fresh[p.key]
        model = model_prediction(case.workload(), p.program.mapping, case.config,
                                 case.memory())
        outcomes.append(CaseOutcome(case, RtlMeasurement(**payload), model, entry is not None,
                                    p.key))
    return outcomes


@dataclass(frozen=True)
class Agreement:
    """Model against RTL over a set of programs."""

    count: int
    mean_abs_error: float
    max_abs_error: float
    worst: str
    spearman: float
    kendall: float
    bias: float  # mean signed error: above 0 the model is pessimistic on average

    @classmethod
    def of(cls, outcomes: Sequence[CaseOutcome]) -> Agreement:
        from scipy.stats import kendalltau, spearmanr

        if not outcomes:
            raise ValueError("no outcomes to summarize")
        errors = np.array([o.error for o in outcomes])
        model = np.array([o.model_cycles for o in outcomes])
        rtl = np.array([o.rtl.cycles for o in outcomes], dtype=float)
        worst = int(np.argmax(np.abs(errors)))
        rank = len(outcomes) > 2
        return cls(
            count=len(outcomes),
            mean_abs_error=float(np.mean(np.abs(errors))),
            max_abs_error=float(np.abs(errors[worst])),
            worst=outcomes[worst].case.name,
            spearman=float(spearmanr(model, rtl).statistic) if rank else math.nan,
            kendall=float(kendalltau(model, rtl).statistic) if rank else math.nan,
            bias=float(np.mean(errors)),
        )

    @classmethod
    def of_search_model(cls, outcomes: Sequence[CaseOutcome]) -> Agreement:
        """The agreement of the batch model the software search ranks candidates with
        (`cost_model.evaluate`, ``batch_cycles``), on the same programs."""
        return cls.of([replace(o, model={**o.model, "accelerator_cycles":
                                         o.model["batch_cycles"] - o.model["host_cycles"]})
                       for o in outcomes])

    def meets_targets(self) -> bool:
        return (self.mean_abs_error <= TARGET_MEAN_ERROR
                and self.max_abs_error <= TARGET_MAX_ERROR
                and self.spearman >= TARGET_SPEARMAN)


def summary(outcomes: Sequence[CaseOutcome], *, commit: str) -> dict:
    """The agreement per set, with what it was measured on (`SUMMARY_FILE`'s content)."""
    from tensorforge.hashing import source_digest
    from tensorforge.sim.rtl_identity import reference_rtl
    from tensorforge.sim.rtl_run import hardware_digest

    sets, search_sets = {}, {}
    for split in sorted({o.case.split for o in outcomes}):
        group = [o for o in outcomes if o.case.split == split]
        sets[split] = vars(Agreement.of(group))
        search_sets[split] = vars(Agreement.of_search_model(group))
    return {"model": MODEL_NAME, "rtl_commit": commit, "hardware_digest": hardware_digest(),
            "reference_rtl": reference_rtl(o.case.config for o in outcomes),
            "model_digest": source_digest(*MODEL_MODULES),
            "program_digest": program_digest(), "sets": sets,
            "search_model": {"name": SEARCH_MODEL_NAME, "sets": search_sets},
            "programs": {o.case.name: {"rtl_cycles": o.rtl.cycles,
                                       "model_cycles": round(o.model_cycles, 3),
                                       "run_key": o.run_key}
                         for o in outcomes}}


def program_digest() -> str:
    """A digest of the code that decides the programs both sides run (every module of the
    compiler, and the ISA): editing it may change a program, and so its RTL cycles, which
    `restamped_summary` alone can tell."""
    from tensorforge.hashing import package_modules, source_digest

    return source_digest(*package_modules("tensorforge.compiler"), "tensorforge.isa")


def load_summary() -> dict | None:
    """The shipped summary, or None where none was written yet."""
    import json
    from importlib import resources

    path = resources.files("tensorforge.dse") / "data" / SUMMARY_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def stale_reasons(measured: dict) -> list[str]:
    """Why a summary no longer describes this code: the hardware or the model changed since."""
    from tensorforge.hashing import source_digest
    from tensorforge.sim.rtl_identity import rtl_changed

    reasons = []
    if rtl_changed(measured.get("hardware_digest", ""), measured.get("reference_rtl", [])):
        reasons.append("the RTL changed since it was measured")
    if measured.get("model_digest") != source_digest(*MODEL_MODULES):
        reasons.append("the cost model changed since it was measured")
    if measured.get("program_digest") != program_digest():
        reasons.append("the compiler changed since it was measured")
    return reasons


def restamped_summary(measured: dict, cases: Sequence[FidelityCase], *,
                      store: ResultStore | None = None) -> dict:
    """``measured`` (the shipped summary) under today's model and compiler code, with no
    simulator run: allowed only when the RTL is unchanged, today's compiler gives every
    program's RTL run exactly what was measured (its `_prepare` key, stored beside its cycles;
    where a summary predates the keys, the result store must hold the measurement of today's
    key with the summary's cycles), and today's model gives every program, and so every set's
    agreement, exactly the figures the summary holds (a refactor, not a change). Otherwise
    `SimulationError` says to run ``tensorforge validate --write``."""
    import json

    from tensorforge.sim.rtl_identity import rtl_changed

    def redo(why: str) -> SimulationError:
        return SimulationError(f"the fidelity summary cannot be restamped: {why}; run "
                               "`tensorforge validate --write` to measure it again")

    if rtl_changed(measured.get("hardware_digest", ""), measured.get("reference_rtl", [])):
        raise redo("the RTL changed since it was measured")
    stored = measured["programs"]
    if sorted(stored) != sorted(case.name for case in cases):
        raise redo("the fidelity programs are not the ones it measured")
    outcomes, other_runs = [], []
    for case in cases:
        prepared = _prepare(case)
        if not _same_run(stored[case.name], prepared.key, store):
            other_runs.append(case.name)
        model = model_prediction(case.workload(), prepared.program.mapping, case.config,
                                 case.memory())
        # only the cycles enter the summary; the rest of a measurement is not kept in it
        rtl = RtlMeasurement(cycles=stored[case.name]["rtl_cycles"], match=True, load_busy=0,
                             compute_busy=0, store_busy=0, instructions=0, sim_seconds=0.0)
        outcomes.append(CaseOutcome(case, rtl, model, True, prepared.key))
    if other_runs:
        raise redo(f"the compiler now gives {len(other_runs)} programs another RTL run than "
                   f"the one measured ({', '.join(other_runs[:3])}"
                   f"{', ...' if len(other_runs) > 3 else ''})")
    fresh = summary(outcomes, commit=measured["rtl_commit"])
    figures = ("sets", "search_model")
    changed = [name for name in stored
               if _figures(stored[name]) != _figures(fresh["programs"][name])]
    if changed:
        raise redo(f"the model now gives other cycles for {len(changed)} programs "
                   f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})")
    if any(json.dumps(measured[k], sort_keys=True) != json.dumps(fresh[k], sort_keys=True)
           for k in figures):
        raise redo("the model's figures changed")
    return {**measured, "model_digest": fresh["model_digest"],
            "program_digest": fresh["program_digest"], "programs": fresh["programs"]}


def _figures(program: dict) -> tuple:
    return program["rtl_cycles"], program["model_cycles"]


def _same_run(program: dict, key: str, store: ResultStore | None) -> bool:
    """Whether ``key`` is the RTL run whose cycles ``program`` (a summary entry) holds."""
    if "run_key" in program:
        return program["run_key"] == key
    entry = (store or ResultStore()).get(STORE_KIND, key)
    return entry is not None and entry.payload["cycles"] == program["rtl_cycles"]

