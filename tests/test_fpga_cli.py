"""`tensorforge synth` and the errors of the flows, as a user meets them."""

from __future__ import annotations

import json

import pytest
from amaranth.back import verilog as amaranth_verilog

from tensorforge.cli import main
from tensorforge.errors import ToolError
from tensorforge.fpga import ecp5
from tensorforge.fpga.asic import synthesize_asic
from tensorforge.fpga.ecp5 import (
    Ecp5Report,
    best_placement,
    synthesize_ecp5,
    synthesize_ecp5_seeds,
)
from tensorforge.fpga.ecp5_fit import DesignDoesNotFit
from tensorforge.fpga.ecp5_timing import read_run
from tensorforge.hw.mac import MultiplyAccumulate
from tensorforge.store import ResultStore

pytestmark = pytest.mark.synth

ECP5_KEYS = {"flow", "part", "luts", "ffs", "dsps", "brams", "fmax_mhz"}
ASIC_KEYS = {"flow", "area_um2", "cells", "critical_path_ns", "slack_ns", "power_mw"}
SYNTAX_ERROR = "module broken(input a, output y);\n  assign y = a &;\nendmodule\n"


@pytest.fixture(scope="module")
def mac_file(module_workspace):
    path = module_workspace / "mac.v"
    path.write_text(amaranth_verilog.convert(MultiplyAccumulate(), name="mac"))
    return path


@pytest.fixture
def store(module_workspace, tmp_path):
    """A fresh store per error test; a failed synthesis must store no report (a design that
    does not fit its part is stored as that failure, `synth_ecp5_failure`)."""
    store = ResultStore(tmp_path / "errors.sqlite")
    yield store
    assert set(store.kinds()) <= {"synth_ecp5_failure"}


def _synth(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["synth", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_json_ecp5_has_the_contract_keys(module_workspace, mac_file, capsys):
    code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                          "--store", module_workspace / "s.sqlite")
    assert code == 0
    result = json.loads(out)
    assert ECP5_KEYS <= result.keys()
    assert result["flow"] == "ecp5" and result["part"] == "LFE5U-85F"
    assert result["dsps"] >= 1 and result["fmax_mhz"] > 0


def test_cli_speed_grade_names_its_result(module_workspace, mac_file, capsys):
    """``--speed`` is the grade nextpnr times against: the same MAC reaches a higher Fmax on
    the fastest grade (8) than on the slowest (6), each result is stored under its own key,
    and each says which grade and placement seed made it."""
    store = module_workspace / "s.sqlite"
    runs = {}
    for speed in (6, 8):
        code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                              "--store", store, "--speed", speed)
        assert code == 0
        runs[speed] = json.loads(out)
    assert [runs[speed]["speed"] for speed in (6, 8)] == [6, 8]
    assert runs[6]["seed"] == runs[8]["seed"] == 1 and runs[6]["key"] != runs[8]["key"]
    assert runs[8]["fmax_mhz"] > runs[6]["fmax_mhz"]


def test_cli_seed_sweep_maps_once_and_reports_the_fastest(module_workspace, mac_file, capsys,
                                                          tmp_path):
    """``--seed 1 2 3``: Yosys maps once (one Yosys log; each seed's nextpnr files in its own
    folder, a run directory the timing report reads), each seed's result is what a run at that
    seed alone gives (nextpnr is deterministic for one netlist and seed) and is stored under
    that run's key, and the summary is the fastest placement, naming its seed."""
    store = module_workspace / "sweep.sqlite"
    kept = tmp_path / "sweep"
    code, out, err = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                            "--store", store, "--seed", 1, 2, 3, "--keep-run", kept)
    assert code == 0 and "each seed's nextpnr files in seed_N" in err
    result = json.loads(out)
    sweep = result["seeds"]
    assert [run["seed"] for run in sweep] == [1, 2, 3]
    fastest = max(run["fmax_mhz"] for run in sweep)
    assert result["fmax_mhz"] == fastest
    assert result["seed"] == next(run["seed"] for run in sweep if run["fmax_mhz"] == fastest)
    assert len(list(kept.glob("**/yosys.log"))) == 1 and (kept / "yosys.log").is_file()
    for seed in (1, 2, 3):
        assert read_run(kept / f"seed_{seed}").histogram_matches is True
    for run in sweep:
        code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                              "--store", store, "--seed", run["seed"])
        alone = json.loads(out)
        assert alone["cached"] is True and alone["fmax_mhz"] == run["fmax_mhz"]
    # run again, two seeds at once, in another order: the same placements
    code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                          "--store", store, "--seed", 3, 1, "--no-cache", "--jobs", 2)
    assert [(run["seed"], run["fmax_mhz"], run["cached"]) for run in json.loads(out)["seeds"]] \
        == [(seed, sweep[seed - 1]["fmax_mhz"], False) for seed in (3, 1)]


def test_a_failed_seed_keeps_the_seeds_before_it(module_workspace, mac_file, monkeypatch):
    """A sweep that stops at one seed's nextpnr run has stored every seed placed before it."""
    store = ResultStore(module_workspace / "failed-sweep.sqlite")
    place = ecp5._place_and_route

    def place_or_fail(mapped, floorplan, options, *args, **kwargs):
        if options.seed == 5:
            raise ToolError("nextpnr-ecp5", "stopped for this test", "")
        return place(mapped, floorplan, options, *args, **kwargs)

    monkeypatch.setattr(ecp5, "_place_and_route", place_or_fail)
    with pytest.raises(ToolError):
        synthesize_ecp5_seeds(mac_file.read_text(), "mac", (4, 5), store=store)
    monkeypatch.undo()
    assert synthesize_ecp5(mac_file.read_text(), "mac", seed=4, store=store).cached is True
    assert len(store.keys("synth_ecp5")) == 1


def test_a_parallel_sweep_runs_a_failing_yosys_once(store, monkeypatch):
    """Seeds placed at once share one mapping: a design Yosys rejects fails every seed with
    Yosys's error after one Yosys run, and nothing is stored."""
    mapped = []
    map_design = ecp5._map_design

    def counted(*args, **kwargs):
        mapped.append(args)
        return map_design(*args, **kwargs)

    monkeypatch.setattr(ecp5, "_map_design", counted)
    with pytest.raises(ToolError) as error:
        synthesize_ecp5_seeds(SYNTAX_ERROR, "broken", (1, 2, 3), jobs=3, store=store)
    assert error.value.tool == "yosys" and len(mapped) == 1


def test_best_placement_is_the_highest_fmax_then_the_first():
    def report(seed, fmax, critical=None):
        return Ecp5Report("t", "LFE5U-85F", "CABGA381", 8.0, 1, 1, 0, 0, fmax, critical,
                          seed=seed)

    assert best_placement([report(1, 90.0), report(2, 95.5), report(3, 95.5)]).seed == 2
    assert best_placement([report(1, None, 4.0), report(2, 50.0)]).seed == 2
    assert best_placement([report(1, None, 4.0), report(2, None, 3.5)]).seed == 2


@pytest.mark.parametrize(("args", "message"), [
    (("--seed", 2, 2), "placement seed 2 given twice"),
    (("--seed", 1, 2, "--jobs", 0), "jobs must be at least 1"),
    (("--flow", "asic", "--seed", 1, 2), "for the ecp5 flow"),
])
def test_cli_seed_sweep_errors(module_workspace, mac_file, capsys, args, message):
    code, out, err = _synth(capsys, mac_file, "--top", "mac", *args,
                            "--store", module_workspace / "s.sqlite")
    assert code == 1 and out == "" and message in err and "Traceback" not in err


def test_cli_json_asic_has_the_contract_keys(module_workspace, mac_file, capsys):
    code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "asic", "--json",
                          "--activity", "0.2", "--store", module_workspace / "s.sqlite")
    assert code == 0
    result = json.loads(out)
    assert ASIC_KEYS <= result.keys()
    assert set(result["power_mw"]) == {"internal", "switching", "leakage", "total"}
    assert result["area_um2"] > 0 and result["critical_path_ns"] > 0
    assert result["activity"] == 0.2


def test_cli_table_and_store_reuse(module_workspace, mac_file, capsys):
    store = module_workspace / "table.sqlite"
    _synth(capsys, mac_file, "--top", "mac", "--flow", "asic", "--store", store)
    code, out, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "asic", "--store", store)
    assert code == 0
    assert "total power" in out and "mW" in out
    assert "from the result store" in out
    assert len(ResultStore(store).keys("synth_asic")) == 1


def test_keep_run_leaves_every_log_of_a_real_run(module_workspace, mac_file, capsys, tmp_path):
    """--keep-run runs the tools even when the result is stored, and leaves their files: the
    nextpnr log names the critical path the summary only measures, and the report and SDF give
    every endpoint's slack (the flags that ask for them leave the result as it was)."""
    store = module_workspace / "s.sqlite"
    _, stored, _ = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                          "--store", store)
    kept = tmp_path / "run"
    code, out, err = _synth(capsys, mac_file, "--top", "mac", "--flow", "ecp5", "--json",
                            "--store", store, "--keep-run", kept)
    assert code == 0 and json.loads(out)["cached"] is False
    assert f"kept in {kept}" in err
    log = (kept / "nextpnr.log").read_text()
    assert "Critical path report" in log and (kept / "report.json").is_file()
    same = ("luts", "ffs", "dsps", "fmax_mhz", "critical_path_ns")
    assert {k: json.loads(out)[k] for k in same} == {k: json.loads(stored)[k] for k in same}
    timing = read_run(kept)
    assert timing.has_sdf and timing.endpoints and timing.histogram_matches is True
    code, _, err = _synth(capsys, mac_file, "--top", "mac", "--flow", "asic", "--store", store,
                          "--keep-run", kept)
    assert code == 1 and "not an empty directory" in err and "Traceback" not in err


def test_cli_reports_tool_errors_without_traceback(module_workspace, capsys):
    source = module_workspace / "broken.v"
    source.write_text(SYNTAX_ERROR)
    code, out, err = _synth(capsys, source, "--top", "broken",
                            "--store", module_workspace / "s.sqlite")
    assert code == 1
    assert out == ""
    # the stages that ran come first (progress on stderr), then the one error line
    stages, _, error = err.partition("error: yosys:")
    assert error and "syntax error" in error
    assert all(line.startswith("[synth ecp5") for line in stages.splitlines())
    assert "flatten failed after" in stages.splitlines()[-1]
    assert "Traceback" not in err


def test_cli_missing_file_is_a_clear_error(module_workspace, capsys):
    code, _, err = _synth(capsys, module_workspace / "absent.v", "--top", "x")
    assert code == 1
    assert "cannot read the Verilog file" in err


@pytest.mark.parametrize("flow", [synthesize_ecp5, synthesize_asic])
def test_syntax_error_names_yosys_and_the_line(store, flow):
    with pytest.raises(ToolError) as error:
        flow(SYNTAX_ERROR, "broken", store=store)
    assert error.value.tool == "yosys"
    assert "design.v:2: ERROR: syntax error" in str(error.value)
    assert "last lines of the yosys log" in str(error.value)


@pytest.mark.parametrize("flow", [synthesize_ecp5, synthesize_asic])
def test_unknown_top_names_the_module(store, mac_file, flow):
    with pytest.raises(ToolError) as error:
        flow(mac_file.read_text(), "no_such_top", store=store)
    assert error.value.tool == "yosys"
    assert "no_such_top" in error.value.cause and "not found" in error.value.cause


#: 600 ports, each a pin unless synthesized out of context.
TOO_WIDE = "module wide(input [299:0] a, output [299:0] y);\n  assign y = ~a;\nendmodule\n"


def test_more_ports_than_pins_is_a_design_that_does_not_fit(store):
    """600 ports as pins of a 365-pin part: stopped after packing, with what to do."""
    with pytest.raises(DesignDoesNotFit) as error:
        synthesize_ecp5(TOO_WIDE, "wide", store=store)
    assert error.value.over == {"TRELLIS_IO": (600, 365)}
    assert "TRELLIS_IO 600 of 365 (164%)" in str(error.value)
    assert "--out-of-context" in str(error.value)
    assert len(store.keys("synth_ecp5_failure")) == 1


def test_place_and_route_failure_names_nextpnr(store, monkeypatch):
    """A nextpnr error that is not a fit (here, with the fit check off): the tool's own."""
    from tensorforge.fpga import ecp5_fit

    monkeypatch.setattr(ecp5_fit.FitCheck, "__call__", lambda self, text: None)
    with pytest.raises(ToolError) as error:
        synthesize_ecp5(TOO_WIDE, "wide", store=store)
    assert error.value.tool == "nextpnr-ecp5"
    assert "Unable to place" in error.value.cause
    assert "TRELLIS_IO" in str(error.value)


def test_timeout_names_the_tool(store, mac_file):
    with pytest.raises(ToolError) as error:
        synthesize_ecp5(mac_file.read_text(), "mac", timeout_s=0.05,
                        store=store)
    assert error.value.tool == "yosys"
    assert "timed out after 0.05 s" in str(error.value)

