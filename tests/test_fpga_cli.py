"""`tensorforge synth` and the errors of the flows, as a user meets them."""

from __future__ import annotations

import json

import pytest
from amaranth.back import verilog as amaranth_verilog

from tensorforge.cli import main
from tensorforge.errors import ToolError
from tensorforge.fpga.asic import synthesize_asic
from tensorforge.fpga.ecp5 import synthesize_ecp5
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
    """A fresh store per error test; a failed synthesis must leave it empty."""
    store = ResultStore(tmp_path / "errors.sqlite")
    yield store
    assert store.kinds() == []


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


def test_place_and_route_failure_names_nextpnr(store):
    too_wide = "module wide(input [299:0] a, output [299:0] y);\n  assign y = ~a;\nendmodule\n"
    with pytest.raises(ToolError) as error:
        synthesize_ecp5(too_wide, "wide", store=store)
    assert error.value.tool == "nextpnr-ecp5"
    assert "Unable to place" in error.value.cause
    assert "TRELLIS_IO" in str(error.value)


def test_timeout_names_the_tool(store, mac_file):
    with pytest.raises(ToolError) as error:
        synthesize_ecp5(mac_file.read_text(), "mac", timeout_s=0.05,
                        store=store)
    assert error.value.tool == "yosys"
    assert "timed out after 0.05 s" in str(error.value)

