"""The co-design loop: hardware search outside, per-layer evaluation inside (HASCO Fig. 5).

For each hardware trial the optimizer asks for, every distinct layer of the workload is
evaluated on that accelerator by the pluggable `LayerEvaluator` (identical layers are merged
and their counts multiplied), in worker processes; latency and energy are summed, power and
area come from the `AreaPowerModel`, and the optimizer is told the objectives (latency ms,
power W, area mm^2) and the constraint margins of the `Scenario`.

Points that are not valid accelerators and trials whose evaluation failed are told as well,
with penalty values (objectives at twice the reference point, every constraint violated by
100 %), because NSGA-II cannot move on with members of its generation unanswered and a
surrogate should learn where invalid designs lie. A ``valid`` constraint (0 for a real design,
1 otherwise) makes them infeasible for every method.

Every trial lands in the `SweepStore` as it finishes. Running the same sweep again (same
`SweepSpec`, hence the same sweep id) replays the stored trials into a fresh optimizer in the
same ask/tell batches instead of evaluating them, so its random stream and state continue
exactly where the killed run stopped. The id includes a digest of the search code's and the
evaluator's source, so after a code change the same arguments start a new sweep rather than
replaying stored trials into an optimizer that would now propose other designs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.coverage import host_layer
from tensorforge.dse.evaluate import (
    AreaPowerModel,
    LayerEvaluator,
    LayerMetrics,
    aggregate,
)
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.known_constraints import KnownConstraints
from tensorforge.dse.layer_pool import LayerJob, LayerPool
from tensorforge.dse.optimizers import make_optimizer
from tensorforge.dse.pareto import pareto_indices, total_violation
from tensorforge.dse.problem import Constraint, Problem
from tensorforge.dse.registry import BACKENDS, EVALUATORS, HARDWARE_MODELS, resolve
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_schedule import SoftwareSchedule
from tensorforge.dse.sweep_store import FAILED, INFEASIBLE, OK, SweepStore, TrialRecord
from tensorforge.errors import ConfigError, TensorforgeError
from tensorforge.hashing import source_digest, stable_hash
from tensorforge.memory import MemorySystem

logger = logging.getLogger(__name__)

OBJECTIVES = ("latency_ms", "power_w", "area_mm2")
VALID = "invalid"  # the penalty constraint's metric: 0 for a real design, 1 otherwise

#: Cost-model evaluations per layer and hardware trial of the default software search. Measured
#: on 8 ResNet-50 layers x 3 random designs (2 busy cores): budget 100 / 200 / 400 took 0.70 /
#: 0.60 / 0.94 s per layer (building the layer's space is most of it) and found mappings
#: totalling 18.5M / 15.9M / 14.9M cycles; at 200 `tensorforge demo` (8 layers, 12 trials, 2
#: workers) takes under a minute.
CODESIGN_SEARCH_BUDGET = 200


def hasco_evaluator() -> LayerEvaluator:
    """HASCO's software search (heuristic + Q-learning) under the analytical cost model."""
    return SoftwareSearchEvaluator(method="hasco", budget=CODESIGN_SEARCH_BUDGET)


def make_evaluator(name: str, memory: MemorySystem | None = None) -> LayerEvaluator:
    """The layer evaluator registered as ``name`` in `tensorforge.dse.registry.EVALUATORS`,
    on ``memory`` where it prices DRAM timing (None: its default, `DEFAULT_MEMORY`)."""
    evaluator = resolve(EVALUATORS, "evaluator", name)()
    if memory is not None and hasattr(evaluator, "memory"):
        evaluator = replace(evaluator, memory=memory, version="")
    return evaluator


def make_hardware_model(name: str) -> AreaPowerModel:
    """The area/power model registered as ``name`` in `registry.HARDWARE_MODELS`."""
    return resolve(HARDWARE_MODELS, "hardware model", name)()


def _default_evaluator() -> LayerEvaluator:
    return make_evaluator(next(iter(EVALUATORS)))


def _default_hardware_model() -> AreaPowerModel:
    return make_hardware_model(next(iter(HARDWARE_MODELS)))


@dataclass(frozen=True)
class SweepLayer:
    """One distinct layer of the workload and how often the workload runs it."""

    name: str
    workload: Workload
    count: int


def merge_layers(layers: Sequence[tuple[str, Workload, int]]) -> tuple[SweepLayer, ...]:
    """Identical workloads (same text and sizes) merged into one layer, counts summed."""
    merged: dict[tuple[str, str], SweepLayer] = {}
    for name, workload, count in layers:
        if count < 1:
            raise ConfigError(f"layer {name} has count {count}; counts must be positive")
        key = (workload.text, workload.sizes_text)
        if key in merged:
            first = merged[key]
            merged[key] = SweepLayer(first.name, first.workload, first.count + count)
        else:
            merged[key] = SweepLayer(name, workload, count)
    if not merged:
        raise ConfigError("the workload has no layers to evaluate")
    return tuple(merged.values())


@dataclass(frozen=True)
class SweepSpec:
    """Everything that determines a sweep's results; its hash is the sweep id."""

    workload_name: str
    layers: tuple[SweepLayer, ...]
    space: HardwareSpace = field(default_factory=HardwareSpace)
    scenario: Scenario = field(default_factory=Scenario)
    method: str = "random"
    trials: int = 40
    seed: int = 0
    batch_size: int = 1
    method_options: dict[str, Any] = field(default_factory=dict)
    evaluator: LayerEvaluator = field(default_factory=_default_evaluator)
    hardware_model: AreaPowerModel = field(default_factory=_default_hardware_model)

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ConfigError(f"trials must be a positive integer, not {self.trials}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, not {self.batch_size}")

    def description(self) -> dict[str, Any]:
        """The JSON identity of the sweep (stored next to its trials)."""
        return {
            "workload": self.workload_name,
            "layers": [
                [la.name, la.workload.text, la.workload.sizes_text, la.count] for la in self.layers
            ],
            "space": self.space.spec,
            "constraints": [str(c) for c in self.scenario.constraints()],
            "method": self.method,
            "method_options": self.method_options,
            "seed": self.seed,
            "trials": self.trials,
            "batch_size": self.batch_size,
            "evaluator": _version(self.evaluator),
            "hardware_model": _version(self.hardware_model),
            "search_code": source_digest(*SEARCH_MODULES),
        }

    @property
    def sweep_id(self) -> str:
        return stable_hash(self.description())


# the hardware search's code: a sweep resumed under changed search code would propose other
# designs than it stored, so that code is part of the sweep's identity
SEARCH_MODULES = tuple(
    f"tensorforge.dse.{name}"
    for name in (
        "space", "pareto", "opt_base", "opt_random", "opt_nsga2", "opt_mobo", "sw_schedule",
        "opt_shibo", "opt_unico", "successive_halving", "robustness", "scalarize",
        "known_constraints", "rejection", "gp_lcb", "opt_poros", "poros_net", "joint_mapping",
    )
)


def _version(model: object) -> str:
    return str(getattr(model, "version", None) or type(model).__qualname__)


def layer_seed(seed: int, layer: SweepLayer) -> int:
    """The evaluator's seed for a layer: fixed by the sweep seed and the layer, not the trial."""
    return int(stable_hash(seed, layer.workload.text, layer.workload.sizes_text)[:8], 16)


def reference_point(spec: SweepSpec) -> tuple[float, ...]:
    """Hypervolume reference: the scenario's bounds, else loose bounds from the space.

    Area and power: 1.1x the largest area and peak power of 64 designs sampled from the space
    (a fixed sample, so the reference is part of the sweep's identity). Latency: the whole
    workload at 10 % utilization of the smallest array at the slowest clock in that sample.
    """
    rng = np.random.default_rng(20240)
    costs, pes = [], []
    for point in spec.space.space.sample(64, rng):
        try:
            config = spec.space.to_config(point)
        except ConfigError:
            continue
        costs.append(spec.hardware_model(config))
        pes.append(config.array.pes)
    macs = sum(layer.workload.macs * layer.count for layer in spec.layers)
    if costs:
        area = 1.1 * max(c.area_mm2 for c in costs)
        power = 1.1 * max(c.peak_power_w for c in costs)
        clock_hz = min(c.clock_mhz for c in costs) * 1e6
        latency = 10 * macs / (min(pes) * clock_hz) * 1e3
    else:  # nothing valid sampled: every trial will say why; any finite box will do
        area, power, latency = 1e3, 1e3, 1e3
    defaults = {"latency_ms": latency, "power_w": power, "area_mm2": area}
    return tuple(spec.scenario.bound(name) or defaults[name] for name in OBJECTIVES)


def make_problem(spec: SweepSpec) -> Problem:
    constraints = (*spec.scenario.constraints(), Constraint(VALID, 0.0))
    screen = KnownConstraints(spec.space, spec.hardware_model, spec.scenario.area_mm2)
    return Problem(spec.space.space, OBJECTIVES, reference_point(spec), constraints, screen)


@dataclass(frozen=True)
class SweepProgress:
    """What a progress display needs after each trial."""

    trial: TrialRecord
    done: int
    total: int
    replayed: bool
    hypervolume: float
    pareto_size: int
    elapsed_s: float


@dataclass
class SweepResult:
    """The finished (or exhausted) sweep: every trial, the optimizer's history, the Pareto set."""

    spec: SweepSpec
    sweep_id: str
    problem: Problem
    trials: list[TrialRecord]
    hypervolumes: list[float]
    replayed: int = 0
    evaluated: int = 0

    def feasible(self, trial: TrialRecord) -> bool:
        return trial.status == OK and all(v <= 0 for v in trial.constraint_values)

    @property
    def any_feasible(self) -> bool:
        return any(self.feasible(t) for t in self.trials)

    def pareto(self) -> list[TrialRecord]:
        """Non-dominated feasible trials; when none is feasible, the least-violating ones."""
        ok = [t for t in self.trials if t.status == OK]
        if not ok:
            return []
        objectives = np.array([t.objectives for t in ok], dtype=float)
        values = np.array([t.constraint_values for t in ok], dtype=float)
        chosen = pareto_indices(objectives, values)
        return sorted((ok[i] for i in chosen), key=lambda t: t.objectives)

    def violation(self, trial: TrialRecord) -> float:
        return float(total_violation(np.array([trial.constraint_values]))[0])


ProgressCallback = Callable[[SweepProgress], None]


def run_sweep(
    spec: SweepSpec,
    *,
    store: SweepStore | None = None,
    workers: int = 1,
    on_trial: ProgressCallback | None = None,
    backend: str = "local",
    backend_options: dict[str, Any] | None = None,
) -> SweepResult:
    """Run (or resume) ``spec``; every trial is stored in ``store`` as it finishes.

    Layers are evaluated by the ``backend`` registered in `registry.BACKENDS` (``workers``
    wide, with ``backend_options``); results do not depend on which, and only this process
    writes to ``store``."""
    store = store if store is not None else SweepStore()
    sweep_id = spec.sweep_id
    store.open_sweep(sweep_id, spec.description())
    stored = {t.index: t for t in store.trials(sweep_id)}
    problem = make_problem(spec)
    optimizer = make_optimizer(spec.method, problem, seed=spec.seed, **spec.method_options)
    optimizer.attach_layers([layer.workload for layer in spec.layers])
    result = SweepResult(spec, sweep_id, problem, [], [])
    started = time.monotonic()
    pool_class = resolve(BACKENDS, "backend", backend)
    with pool_class(workers, **(backend_options or {})) as pool:
        while len(result.trials) < spec.trials:
            first = len(result.trials)
            points = optimizer.ask(min(spec.batch_size, spec.trials - first))
            if not points:
                logger.info("the optimizer has no new design to propose; stopping early")
                break
            batch: dict[int, TrialRecord] = {}
            fresh: list[tuple[int, dict[str, Any]]] = []
            for index, point in enumerate(points, start=first):
                if index in stored:
                    if stored[index].point != point:
                        raise TensorforgeError(
                            f"sweep {sweep_id} in {store.path} diverges at trial {index}: it "
                            f"stored {stored[index].point} but the optimizer now proposes "
                            f"{point}; the search code changed. Delete the sweep or use "
                            "another --store."
                        )
                    batch[index] = stored[index]
                else:
                    fresh.append((index, point))
            schedule = optimizer.software_schedule()
            for trial in _evaluate(spec, problem, fresh, pool, schedule):
                store.put_trial(sweep_id, trial)
                batch[trial.index] = trial
            ordered = [batch[i] for i in range(first, first + len(points))]
            optimizer.observe_layers(points, [t.layers for t in ordered])
            optimizer.tell(
                points,
                np.array([t.objectives for t in ordered], dtype=float),
                np.array([t.constraint_values for t in ordered], dtype=float),
            )
            result.trials.extend(ordered)
            result.hypervolumes = [float(h) for h in optimizer.history.hypervolumes]
            result.replayed += len(points) - len(fresh)
            result.evaluated += len(fresh)
            if on_trial is not None:
                pareto_size = len(result.pareto())
                for trial in ordered:
                    on_trial(
                        SweepProgress(
                            trial,
                            trial.index + 1,
                            spec.trials,
                            trial.index in stored,
                            optimizer.history.hypervolume,
                            pareto_size,
                            time.monotonic() - started,
                        )
                    )
    return result


def _evaluate(
    spec: SweepSpec,
    problem: Problem,
    fresh: list[tuple[int, dict[str, Any]]],
    pool: LayerPool,
    schedule: SoftwareSchedule,
) -> Iterator[TrialRecord]:
    """Evaluate new trials in the rounds ``schedule`` asks for, yielding each (to be stored)
    as soon as it is final: when its last layer is in for a one-round schedule, after the
    last round otherwise (see `tensorforge.dse.sw_schedule`)."""
    started = time.monotonic()
    configs = {}
    for index, point in fresh:
        try:
            configs[index] = spec.space.to_config(point)
        except ConfigError as error:
            yield _trial(problem, index, point, None, [], status=INFEASIBLE, error=str(error))
    points = dict(fresh)
    counts = [layer.count for layer in spec.layers]
    latest: dict[int, dict[int, tuple[str, Any]]] = {}

    def done(index: int) -> TrialRecord:
        trial = _finish(spec, problem, index, points[index], configs[index], latest[index])
        return replace(trial, seconds=time.monotonic() - started)

    efforts = schedule.first(list(configs))
    while efforts:
        jobs = [
            LayerJob(
                (index, number),
                effort.apply(spec.evaluator),
                layer.workload,
                configs[index],
                layer_seed(spec.seed, layer),
            )
            for index, effort in efforts.items()
            for number, layer in enumerate(spec.layers)
        ]
        pending: dict[int, dict[int, tuple[str, Any]]] = {index: {} for index in efforts}
        for job, outcome in pool.run(jobs):
            index, number = job.key
            pending[index][number] = outcome
            if len(pending[index]) == len(spec.layers):
                latest[index] = pending.pop(index)
                if schedule.streams:
                    yield done(index)
        if schedule.streams:
            return
        outcomes = {i: [latest[i][n] for n in range(len(spec.layers))] for i in efforts}
        efforts = schedule.next(outcomes, counts)
    for index in sorted(latest):
        yield done(index)


def _finish(
    spec: SweepSpec,
    problem: Problem,
    index: int,
    point: dict[str, Any],
    config: AcceleratorConfig,
    outcomes: dict[int, tuple[str, Any]],
) -> TrialRecord:
    """The trial record once every layer of ``index`` has an outcome."""
    layers, errors, measured = [], [], []
    for number, layer in enumerate(spec.layers):
        status, value = outcomes[number]
        entry: dict[str, Any] = {"name": layer.name, "count": layer.count}
        if status != "ok":  # the intrinsic has no choice for it: priced on the host instead
            host = host_layer(layer.workload, config.intrinsic.value)
            status, value = ("ok", host) if host else (status, value)
        if status == "ok":
            entry.update(value)
            measured.append((LayerMetrics.from_dict(value), layer.count))
        else:
            entry["error"] = value
            errors.append(f"{layer.name}: {value}")
        layers.append(entry)
    config_dict = config.to_dict()
    if errors:
        return _trial(
            problem, index, point, config_dict, layers, status=FAILED, error="; ".join(errors)
        )
    try:
        metrics = aggregate(measured, spec.hardware_model(config)).to_dict()
    except Exception as error:  # noqa: BLE001 -- a broken hardware model fails this trial only
        failure = f"hardware model: {type(error).__name__}: {error}"
        return _trial(problem, index, point, config_dict, layers, status=FAILED, error=failure)
    if not all(math.isfinite(metrics[name]) for name in OBJECTIVES):
        failure = f"non-finite objectives {metrics}"
        return _trial(problem, index, point, config_dict, layers, status=FAILED, error=failure)
    metrics[VALID] = 0.0
    return _trial(problem, index, point, config_dict, layers, metrics=metrics)


def _trial(
    problem: Problem,
    index: int,
    point: dict[str, Any],
    config: dict[str, Any] | None,
    layers: list[dict[str, Any]],
    *,
    metrics: dict[str, float] | None = None,
    status: str = OK,
    error: str = "",
) -> TrialRecord:
    """A trial's record with what the optimizer is told: the objectives and constraint margins
    of ``metrics`` for an evaluated design, penalty values for a failed or infeasible one."""
    if status == OK and metrics is not None:
        objectives = [float(metrics[name]) for name in OBJECTIVES]
        margins = [float(v) for v in problem.constraint_values([metrics])[0]]
    else:
        objectives = [2.0 * r for r in problem.reference_point]
        margins = [1.0] * problem.n_constraints
    return TrialRecord(
        index=index,
        point=point,
        status=status,
        config=config,
        metrics=metrics or {},
        layers=layers,
        error=error,
        objectives=objectives,
        constraint_values=margins,
    )
