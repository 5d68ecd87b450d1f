"""The fidelity harness: its program sets, its statistics, and the cost model against the RTL
on the held-out CI sample."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorforge.dse.fidelity import (
    TARGET_MAX_ERROR,
    TARGET_MEAN_ERROR,
    TARGET_SPEARMAN,
    Agreement,
    CaseOutcome,
    RtlMeasurement,
    model_prediction,
    validate,
)
from tensorforge.dse.fidelity_cases import (
    CI_SAMPLE_SIZE,
    FidelityCase,
    calibration_cases,
    ci_sample,
    coverage,
    design_space_triples,
    held_out_cases,
)


def _program(case: FidelityCase) -> tuple:
    return (case.config.to_json(), case.kind, case.sizes, case.mapping, case.dram_latency)


def test_held_out_set_covers_the_design_space():
    """Every intrinsic x legal dataflow x interconnect, >= 60 programs, non-square and one-row
    arrays, odd bank counts, random and default mappings, several DRAM latencies."""
    cases = held_out_cases()
    assert len(cases) >= 60
    assert coverage(cases) == design_space_triples()
    shapes = {(c.config.array.rows, c.config.array.cols) for c in cases}
    assert any(r != c and min(r, c) > 1 for r, c in shapes)
    assert any(min(r, c) == 1 for r, c in shapes)
    assert {3, 5, 7} <= {c.config.scratchpad.banks for c in cases}
    assert len({c.mapping for c in cases}) >= 3
    assert len({c.dram_latency for c in cases}) >= 4
    kinds = {c.kind for c in cases}
    assert {"conv_stride2_pad1", "conv_pad1", "depthwise", "ttm", "mttkrp"} <= kinds
    assert len({c.name for c in cases}) == len(cases)


def test_held_out_set_shares_no_program_with_the_calibration_set():
    calibration = {_program(c) for c in calibration_cases()}
    assert not calibration & {_program(c) for c in held_out_cases()}
    # nor a workload at the same sizes: the held-out programs are new shapes
    assert not {(c.kind, c.sizes) for c in calibration_cases()} & {
        (c.kind, c.sizes) for c in held_out_cases()}


def test_ci_sample_is_held_out_and_built_by_the_regression_suite():
    """Its configurations are the regression suite's, so it costs no extra Verilator build."""
    sample = ci_sample()
    assert len(sample) == CI_SAMPLE_SIZE
    assert set(sample) <= set(held_out_cases())
    from test_rtl_regression import SUITE  # tests/ is on sys.path (pytest's prepend mode)

    for case in sample:
        assert SUITE[case.config_name][0] == case.config, case.config_name


def test_every_program_compiles_and_is_priced():
    """The model prices each program (finite cycles, at least the ideal MAC steps)."""
    for case in [*calibration_cases(), *held_out_cases()]:
        mapping = case.resolve_mapping()
        row = model_prediction(case.workload(), mapping, case.config, case.memory())
        assert math.isfinite(row["accelerator_cycles"]), case.name
        assert row["accelerator_cycles"] >= row["mac_steps"], case.name


def _outcome(rtl: int, model: float, name: str = "p") -> CaseOutcome:
    case = held_out_cases()[0]
    measurement = RtlMeasurement(cycles=rtl, match=True, load_busy=0, compute_busy=0,
                                 store_busy=0, instructions=1, sim_seconds=0.0)
    return CaseOutcome(FidelityCase(name, case.split, case.config_name, case.config, case.kind,
                                    case.sizes), measurement,
                       {"accelerator_cycles": model}, cached=False)


def test_agreement_by_hand():
    """Errors +10%, -20%, 0, +5%: mean |error| 8.75%, max 20% (on the second), bias -1.25%;
    the model orders the four as the RTL does (rank correlations 1)."""
    outcomes = [_outcome(100, 110, "a"), _outcome(1000, 800, "b"), _outcome(50, 50, "c"),
                _outcome(400, 420, "d")]
    a = Agreement.of(outcomes)
    assert a.count == 4
    assert a.mean_abs_error == pytest.approx(0.0875)
    assert a.max_abs_error == pytest.approx(0.20)
    assert a.worst == "b"
    assert a.bias == pytest.approx(-0.0125)
    assert a.spearman == pytest.approx(1.0) and a.kendall == pytest.approx(1.0)
    assert not a.meets_targets()  # 20% is over the 10% max
    swapped = Agreement.of([_outcome(100, 300, "a"), _outcome(200, 150, "b"),
                            _outcome(300, 310, "c")])
    assert swapped.spearman == pytest.approx(0.5)  # ranks (3, 1, 2) against (1, 2, 3)


def _ci_outcomes() -> list[CaseOutcome]:
    """The CI sample on RTL, through the default result store (keyed by the hardware, the
    program and the memory: a second run reuses the first's RTL runs)."""
    outcomes = validate(list(ci_sample()))
    for o in outcomes:
        assert o.rtl.match, f"{o.case.name}: RTL output differs from numpy"
    return outcomes


@pytest.mark.rtl
def test_ci_sample_meets_the_targets():
    """Issue 14's gate on the fixed 12-program held-out sample: no program above 10% |error|,
    mean at most 5%, and the model orders the programs as the RTL does (Spearman >= 0.98)."""
    outcomes = _ci_outcomes()
    errors = np.array([abs(o.error) for o in outcomes])
    worst = outcomes[int(np.argmax(errors))].case.name
    assert errors.max() <= TARGET_MAX_ERROR, f"max |error| {errors.max():.1%} on {worst}"
    assert errors.mean() <= TARGET_MEAN_ERROR, f"mean |error| {errors.mean():.1%}"
    assert Agreement.of(outcomes).spearman >= TARGET_SPEARMAN


def test_shipped_fidelity_summary_is_the_current_model():
    """docs/fidelity.md and dse/data/fidelity_summary.json are regenerated together
    (`tensorforge validate --write`): every program they list is still a fidelity program and
    the cost model still gives the cycles they quote, so a model change without a new report
    fails here. (A hardware change is flagged, not failed: sweep reports mark the figures
    stale, `fidelity.stale_reasons`, until the RTL is run again.)"""
    from tensorforge.dse.fidelity import load_summary

    summary = load_summary()
    assert summary is not None, "no fidelity summary: run `tensorforge validate --write`"
    cases = {c.name: c for c in [*calibration_cases(), *held_out_cases()]}
    assert set(summary["programs"]) == set(cases), "the program sets changed: regenerate"
    for name, quoted in summary["programs"].items():
        case = cases[name]
        now = model_prediction(case.workload(), case.resolve_mapping(), case.config,
                               case.memory())["accelerator_cycles"]
        assert now == pytest.approx(quoted["model_cycles"], abs=0.01), (
            f"{name}: the model now gives {now:.0f} cycles, docs/fidelity.md {quoted}: "
            "run `tensorforge validate --write`")


def test_a_summary_made_with_other_hardware_or_model_code_is_flagged_stale():
    """Sweep reports mark the quoted error stale when the RTL or the model changed since it
    was measured (here: the shipped summary with changed digests); other hw/ sources that
    generate the same Verilog are not a change."""
    from tensorforge.dse.fidelity import load_summary, stale_reasons

    summary = load_summary()
    assert "the RTL changed since it was measured" not in stale_reasons(
        {**summary, "hardware_digest": "0" * 16})
    other_rtl = [[config, "f" * 16] for config, _ in summary["reference_rtl"]]
    assert "the RTL changed since it was measured" in stale_reasons(
        {**summary, "hardware_digest": "0" * 16, "reference_rtl": other_rtl})
    assert "the cost model changed since it was measured" in stale_reasons(
        {**summary, "model_digest": "0" * 12})
    assert stale_reasons({**summary, "program_digest": "0" * 12}) == [
        "the compiler changed since it was measured"]


def test_shipped_fidelity_summary_is_not_stale():
    """A sweep report quotes the summary's held-out error as current only when it was made
    with today's RTL and model code; an edit of the model's code that keeps its figures is
    recorded with `tensorforge validate --restamp` (no RTL run), any other change with
    `tensorforge validate --write`."""
    from tensorforge.dse.fidelity import load_summary, stale_reasons

    assert stale_reasons(load_summary()) == [], (
        "run `tensorforge validate --restamp` (model code edited, figures the same) or "
        "`tensorforge validate --write`")


def _summary_of(cases) -> dict:
    """A summary of ``cases`` as `validate --write` makes it, from the shipped RTL cycles."""
    from tensorforge.dse.fidelity import _prepare, load_summary, summary
    from tensorforge.sim.rtl_identity import reference_rtl

    shipped = load_summary()["programs"]
    outcomes = []
    for case in cases:
        rtl = RtlMeasurement(cycles=shipped[case.name]["rtl_cycles"], match=True, load_busy=0,
                             compute_busy=0, store_busy=0, instructions=0, sim_seconds=0.0)
        model = model_prediction(case.workload(), case.resolve_mapping(), case.config,
                                 case.memory())
        outcomes.append(CaseOutcome(case, rtl, model, True, _prepare(case).key))
    made = summary(outcomes, commit="0000000")
    assert made["reference_rtl"] == reference_rtl(case.config for case in cases)
    return made


def test_restamp_records_new_model_code_only_when_every_figure_is_the_same():
    from tensorforge.dse.fidelity import restamped_summary
    from tensorforge.errors import SimulationError

    cases = list(ci_sample())[:3]
    measured = {**_summary_of(cases), "model_digest": "0" * 12}
    restamped = restamped_summary(measured, cases)
    assert restamped["model_digest"] != measured["model_digest"]
    assert {k: v for k, v in restamped.items() if k != "model_digest"} == {
        k: v for k, v in measured.items() if k != "model_digest"}

    name = cases[1].name
    moved = {**measured, "programs": {**measured["programs"], name: {
        **measured["programs"][name], "model_cycles": measured["programs"][name]["model_cycles"]
        + 1}}}
    with pytest.raises(SimulationError, match=f"other cycles for 1 programs \\({name}"):
        restamped_summary(moved, cases)
    with pytest.raises(SimulationError, match="not the ones it measured"):
        restamped_summary(measured, cases[:2])
    other_rtl = [[config, "f" * 16] for config, _ in measured["reference_rtl"]]
    with pytest.raises(SimulationError, match="RTL changed"):
        restamped_summary({**measured, "hardware_digest": "0" * 16, "reference_rtl": other_rtl},
                          cases)


def test_restamp_records_new_compiler_code_only_when_every_program_runs_the_same(tmp_path):
    """A compiler edit may change a program and so its RTL cycles, which only an RTL run can
    tell: restamp accepts it only when every program's run (its `_prepare` key: program,
    inputs, RTL) is the one measured. A summary without keys is checked against the result
    store instead, which must hold today's run with the summary's cycles."""
    from tensorforge.dse.fidelity import STORE_KIND, _prepare, restamped_summary
    from tensorforge.errors import SimulationError
    from tensorforge.store import ResultStore

    cases = list(ci_sample())[:3]
    measured = {**_summary_of(cases), "program_digest": "0" * 12}
    restamped = restamped_summary(measured, cases, store=ResultStore(tmp_path / "empty.sqlite"))
    assert restamped["program_digest"] != measured["program_digest"]
    assert restamped["programs"] == measured["programs"]

    name = cases[2].name
    recompiled = {**measured, "programs": {**measured["programs"], name: {
        **measured["programs"][name], "run_key": "0" * 64}}}
    with pytest.raises(SimulationError, match=f"another RTL run than the one measured \\({name}"):
        restamped_summary(recompiled, cases)

    unkeyed = {**measured, "programs": {case: {k: v for k, v in entry.items() if k != "run_key"}
                                        for case, entry in measured["programs"].items()}}
    store = ResultStore(tmp_path / "runs.sqlite")
    with pytest.raises(SimulationError, match="another RTL run than the one measured"):
        restamped_summary(unkeyed, cases, store=store)
    for case in cases:
        cycles = measured["programs"][case.name]["rtl_cycles"]
        store.put(STORE_KIND, _prepare(case).key, {"cycles": cycles + (case.name == name)})
    with pytest.raises(SimulationError, match=f"\\({name}\\)"):  # one run measured otherwise
        restamped_summary(unkeyed, cases, store=store)
    store.put(STORE_KIND, _prepare(cases[2]).key, {"cycles": measured["programs"][name]
                                                   ["rtl_cycles"]})
    assert restamped_summary(unkeyed, cases, store=store)["programs"] == measured["programs"]
