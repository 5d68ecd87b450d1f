"""``tensorforge explore`` and ``tensorforge demo`` run in-process."""

from __future__ import annotations

import csv

import pytest

from tensorforge.cli import main
from tensorforge.commands.explore import resolve_workload
from tensorforge.errors import WorkloadError

GEMM = "C[i,j] += A[i,k] * B[k,j]"


def _explore(tmp_path, *extra: str) -> list[str]:
    return [
        "explore",
        "--workload",
        GEMM,
        "--sizes",
        "i=64,j=64,k=64",
        "--sizes",
        "i=32,j=128,k=16",
        "--evaluator",
        "first-order",
        "--hardware-model",
        "first-order",
        "--method",
        "random",
        "--trials",
        "5",
        "--workers",
        "1",
        "--seed",
        "2",
        "--store",
        str(tmp_path / "sweeps.sqlite"),
        "--out",
        str(tmp_path / "out"),
        *extra,
    ]


def _rows(path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_explore_writes_every_report(tmp_path, capsys) -> None:
    assert main(_explore(tmp_path, "--power-w", "50")) == 0
    out = tmp_path / "out"
    for name in ("trials.csv", "pareto.csv", "report.md", "pareto.png", "hypervolume.png"):
        assert (out / name).stat().st_size > 0, name
    trials = _rows(out / "trials.csv")
    assert [int(row["trial"]) for row in trials] == list(range(5))
    pareto = _rows(out / "pareto.csv")
    ok = [row for row in trials if row["status"] == "ok"]
    assert 0 < len(pareto) <= len(ok)
    assert all(float(row["power_w"]) <= 50 for row in pareto)
    report = (out / "report.md").read_text()
    assert "## Pareto set" in report and "power_w <= 50" in report
    assert "Pareto set" in capsys.readouterr().out


def test_rerun_resumes_from_the_store(tmp_path, capsys) -> None:
    assert main(_explore(tmp_path)) == 0
    capsys.readouterr()
    assert main(_explore(tmp_path)) == 0
    assert "5 resumed from the store" in (tmp_path / "out" / "report.md").read_text()


def test_unreachable_constraints_are_reported(tmp_path, capsys) -> None:
    assert main(_explore(tmp_path, "--scenario", "edge", "--power-w", "1e-6")) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "No design met the constraints" in report
    assert "## Closest designs" in report


def test_unknown_workload_lists_known_names(tmp_path, capsys) -> None:
    args = _explore(tmp_path)
    args[args.index(GEMM)] = "resnet5O"
    del args[args.index("--sizes") : args.index("--sizes") + 4]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert "unknown workload 'resnet5O'" in error
    assert "resnet50" in error and "mobilenet" in error and "bert" in error


def test_empty_space_is_a_clear_error(tmp_path, capsys) -> None:
    space = tmp_path / "space.toml"
    space.write_text("rows = {choices = []}\n")
    assert main(_explore(tmp_path, "--space", str(space))) == 1
    assert "design space is empty" in capsys.readouterr().err


def test_workload_names_resolve() -> None:
    name, layers = resolve_workload("mobilenet")
    assert name == "mobilenet_v1" and len(layers) > 3
    assert resolve_workload("resnet50:conv1")[1][0][2] == 1
    with pytest.raises(WorkloadError, match="--sizes"):
        resolve_workload(GEMM)


def test_demo_help_says_where_it_writes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "current directory" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.synth
def test_synthesize_top_puts_synthesis_beside_the_model(tmp_path) -> None:
    assert main(_explore(tmp_path, "--synthesize-top", "1")) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Synthesized designs (model vs synthesis)" in report


def test_default_hardware_model_is_the_ihp_calibration_and_reports_say_so(tmp_path, capsys):
    """Without --hardware-model the sweep prices area and clock with the IHP-calibrated model;
    the CLI summary, report.md and the CSVs name its technology, fit RTL and held-out errors."""
    from tensorforge.dse.area_power import load_fit

    args = _explore(tmp_path)
    del args[args.index("--hardware-model"):args.index("--hardware-model") + 2]
    assert main(args) == 0
    fitted = load_fit()
    printed = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "IHP SG13G2" in printed and "held-out error" in printed
    report = (tmp_path / "out" / "report.md").read_text()
    assert "IHP SG13G2" in report and fitted.rtl_commit in report
    assert f"clock {fitted.worst_error('critical_path_ns'):.1%}" in report
    assert "docs/energy_model.md" in report
    pareto = _rows(tmp_path / "out" / "pareto.csv")
    assert pareto[0]["hw_technology"].startswith("IHP SG13G2")
    assert float(pareto[0]["area_held_out_error"]) == pytest.approx(
        fitted.worst_error("area_um2"), abs=1e-4)
    from tensorforge.dse.energy_ihp import load_energy_fit

    assert float(pareto[0]["power_held_out_error"]) == pytest.approx(
        load_energy_fit().held_out_error(), abs=1e-4)
