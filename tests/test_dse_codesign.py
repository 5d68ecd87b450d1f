"""The co-design loop on tiny workloads with the first-order evaluator (injected: these tests are
about the loop, not the model; the default evaluator is HASCO's software search)."""

from __future__ import annotations

import numpy as np
import pytest
from dse_evaluators import FailOnRows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import (
    SweepSpec,
    layer_seed,
    make_evaluator,
    make_hardware_model,
    merge_layers,
    run_sweep,
)
from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
from tensorforge.dse.evaluate import FirstOrderAreaPower
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.report import headline, write_reports
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_search import SEARCHES, library
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.dse.sweep_store import FAILED, INFEASIBLE, OK, SweepStore
from tensorforge.errors import ConfigError
from tensorforge.memory import DEFAULT_MEMORY

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=32,j=48,k=64", name="gemm")
CONV = parse_workload(
    "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=16,c=8,x=8,y=8,r=3,s=3", name="conv"
)
SMALL_SPACE = {
    "intrinsic": {"choices": ["gemm", "conv2d"]},
    "rows": {"choices": [4, 8, 16]},
    "cols": {"choices": [4, 8, 16]},
    "interconnect": {"choices": ["systolic", "none", "full"]},
    "dataflow": {"choices": ["ws", "os"]},
    "local_bytes": {"choices": [0, 16]},
    "spad_kib": {"choices": [16, 32, 64]},
    "banks": {"choices": [1, 4]},
}


def _spec(**changes: object) -> SweepSpec:
    values: dict = {
        "workload_name": "tiny",
        "layers": merge_layers([("gemm", GEMM, 2), ("conv", CONV, 1)]),
        "space": HardwareSpace(SMALL_SPACE),
        "method": "random",
        "trials": 12,
        "seed": 3,
        "evaluator": FirstOrderEvaluator(),
        "hardware_model": FirstOrderAreaPower(),
    }
    values.update(changes)
    return SweepSpec(**values)


def _dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True)
    )


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 1000), power_w=st.sampled_from([0.05, 0.2, 1.0, 10.0]))
def test_pareto_set_is_non_dominated_and_feasible(tmp_path, seed: int, power_w: float) -> None:
    spec = _spec(seed=seed, scenario=Scenario(power_w=power_w))
    result = run_sweep(spec, store=SweepStore(tmp_path / f"{seed}-{power_w}.sqlite"))
    assert len(result.trials) == spec.trials
    ok = [t for t in result.trials if t.status == OK]
    feasible = [t for t in ok if t.metrics["power_w"] <= power_w]
    pareto = result.pareto()
    if feasible:
        assert result.any_feasible
        for trial in pareto:
            assert trial.metrics["power_w"] <= power_w
            assert not any(_dominates(o.objectives, trial.objectives) for o in feasible)
        # and every non-dominated feasible trial is in it (independent brute force)
        expected = {
            t.index
            for t in feasible
            if not any(_dominates(o.objectives, t.objectives) for o in feasible)
        }
        assert {t.index for t in pareto} == expected
    else:
        assert not result.any_feasible
        assert "No design met the constraints" in headline(result)
        least = min(t.metrics["power_w"] for t in ok)
        assert [t.metrics["power_w"] for t in pareto] == [least] * len(pareto)


def test_objectives_are_layer_sums_times_counts(tmp_path) -> None:
    spec = _spec(trials=4)
    result = run_sweep(spec, store=SweepStore(tmp_path / "s.sqlite"))
    evaluator = FirstOrderEvaluator()
    for trial in result.trials:
        if trial.status != OK:
            continue
        config = AcceleratorConfig.from_dict(trial.config)
        cycles = 2 * evaluator(GEMM, config, 0).cycles + evaluator(CONV, config, 0).cycles
        assert trial.metrics["latency_cycles"] == cycles
        assert trial.objectives[0] == pytest.approx(cycles / trial.metrics["clock_mhz"] / 1e3)


def test_identical_layers_are_merged() -> None:
    again = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=32,j=48,k=64", name="other")
    layers = merge_layers([("a", GEMM, 2), ("b", CONV, 1), ("c", again, 3)])
    assert [(la.name, la.count) for la in layers] == [("a", 5), ("b", 1)]
    with pytest.raises(ConfigError):
        merge_layers([])


def test_invalid_points_are_repaired_or_recorded_infeasible(tmp_path) -> None:
    """A weight-stationary CONV2D needs local memory for its taps: where the space offers
    some, the repair moves every draw there; where it offers none, nothing can be mended and
    each trial is recorded infeasible with the reason."""
    conv_ws = {**SMALL_SPACE, "intrinsic": "conv2d", "dataflow": "ws"}
    mendable = HardwareSpace({**conv_ws, "local_bytes": {"choices": [0, 16]}})
    result = run_sweep(_spec(space=mendable, trials=8),
                       store=SweepStore(tmp_path / "mendable.sqlite"))
    assert len(result.trials) == 8 and all(t.status == OK for t in result.trials)
    assert all(t.point["local_bytes"] == 16 for t in result.trials)

    unmendable = HardwareSpace({**conv_ws, "local_bytes": 0})
    result = run_sweep(_spec(space=unmendable, trials=3),
                       store=SweepStore(tmp_path / "unmendable.sqlite"))
    assert result.trials and all(t.status == INFEASIBLE for t in result.trials)
    assert all("local_bytes" in t.error for t in result.trials)


@pytest.mark.parametrize("hard", [False, True], ids=["exception", "process-death"])
def test_worker_crash_fails_the_trial_and_the_sweep_goes_on(tmp_path, hard: bool) -> None:
    spec = _spec(
        layers=merge_layers([("gemm", GEMM, 1)]),
        trials=4,
        seed=0,
        evaluator=FailOnRows(8, hard),
        batch_size=4,
        space=HardwareSpace({**SMALL_SPACE, "intrinsic": "gemm"}),
    )
    result = run_sweep(spec, store=SweepStore(tmp_path / "s.sqlite"), workers=2)
    assert len(result.trials) == 4
    for trial in result.trials:
        if trial.point["rows"] == 8:
            assert trial.status == FAILED
            assert (
                "simulated evaluator crash" if not hard else "worker process died"
            ) in trial.error
        else:
            assert trial.status in (OK, INFEASIBLE)
    assert {t.point["rows"] for t in result.trials if t.status == FAILED} <= {8}
    assert any(t.status == FAILED for t in result.trials)
    stored = SweepStore(tmp_path / "s.sqlite").trials(spec.sweep_id)
    assert [t.status for t in stored] == [t.status for t in result.trials]


def test_hypervolume_trace_is_monotone(tmp_path) -> None:
    result = run_sweep(
        _spec(method="nsga2", method_options={"population_size": 4}, trials=10),
        store=SweepStore(tmp_path / "s.sqlite"),
    )
    trace = np.array(result.hypervolumes)
    assert len(trace) == 10 and np.all(np.diff(trace) >= 0)


def test_default_evaluator_is_hascos_software_search() -> None:
    spec = SweepSpec("tiny", merge_layers([("gemm", GEMM, 1)]))
    assert isinstance(spec.evaluator, SoftwareSearchEvaluator)
    assert spec.evaluator.method == "hasco"
    assert "hasco" in spec.description()["evaluator"]
    assert isinstance(make_evaluator("first-order"), FirstOrderEvaluator)
    assert isinstance(make_hardware_model("first-order"), FirstOrderAreaPower)
    with pytest.raises(ConfigError, match="first-order"):
        make_evaluator("maestro")
    with pytest.raises(ConfigError, match="synthesis"):
        make_hardware_model("vivado")


def test_software_search_objectives_are_its_layer_results(tmp_path) -> None:
    evaluator = SoftwareSearchEvaluator(budget=40)
    layers = merge_layers([("gemm", GEMM, 2)])
    spec = _spec(
        layers=layers,
        trials=2,
        evaluator=evaluator,
        space=HardwareSpace({**SMALL_SPACE, "intrinsic": "gemm"}),
    )
    result = run_sweep(spec, store=SweepStore(tmp_path / "s.sqlite"))
    ok = [t for t in result.trials if t.status == OK]
    assert ok
    for trial in ok:
        config = AcceleratorConfig.from_dict(trial.config)
        alone = evaluator(GEMM, config, layer_seed(spec.seed, layers[0]))
        assert trial.metrics["latency_cycles"] == 2 * alone.cycles
        assert trial.layers[0]["mapping"] == alone.mapping and alone.mapping["choice"]
        # the layer's program, counted: what the report's per-layer "instructions" shows
        program = generate(GEMM, Mapping.from_dict(alone.mapping, GEMM), config)
        assert alone.details["instructions"] == len(program.instructions)
    write_reports(result, tmp_path / "out", plots=False)
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"| {ok[0].layers[0]['details']['instructions']:,.0f} |" in report


@pytest.mark.parametrize("budget", [1, 60])
def test_software_search_evaluator_keeps_the_faster_of_search_and_library(budget: int) -> None:
    config = AcceleratorConfig.from_dict(
        {"array": {"rows": 16, "cols": 16}, "scratchpad": {"capacity": 64 * 1024, "banks": 4}}
    )
    # the evaluator prices on its memory (the default, ddr3), both candidates with the
    # program's own transfer counts (evaluate_mapping)
    parameters = rtl_parameters(DEFAULT_MEMORY, config)
    searched = SEARCHES["hasco"](SoftwareSpace.build(CONV, config, parameters=parameters),
                                 budget, 5)
    searched_cycles = (evaluate_mapping(CONV, searched.mapping, config, parameters)["cycles"]
                       if searched.found else np.inf)
    library_cycles = library(CONV, config, parameters).cycles
    found = SoftwareSearchEvaluator(budget=budget)(CONV, config, 5)
    assert found.cycles == int(min(library_cycles, searched_cycles))
    assert found.details["library"] == float(library_cycles < searched_cycles)
