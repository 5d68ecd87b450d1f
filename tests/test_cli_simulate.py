"""`tensorforge simulate`: the JSON contract, the table, and the exit status on a mismatch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tensorforge.cli import main
from tensorforge.sim.axi_traffic import Traffic
from tensorforge.sim.program_result import Mismatch, RtlResult

# The hardware flags of the 4x4 GEMM accelerator the RTL tests share (one Verilator build).
HARDWARE = ["--pe", "4x4", "--link", "systolic", "--dataflow", "ws", "--spad", "2",
            "--banks", "4", "--acc", "1", "--bus", "64", "--burst", "16"]
GEMM = ["--workload", "C[i,j] += A[i,k] * B[k,j]", "--sizes", "i=8,j=6,k=5"]
JSON_KEYS = {"match", "cycles", "ideal_cycles", "utilization", "bank_conflict_stalls",
             "dram_bytes_read", "dram_bytes_written", "sim_cycles_per_second"}


def _fake_result(match: bool) -> RtlResult:
    expected = np.arange(6).reshape(2, 3)
    output = expected.copy()
    mismatches = ()
    if not match:
        output[1, 2] = 99
        mismatches = (Mismatch((1, 2), 99, 5),)
    return RtlResult(
        workload="w", config="c", seed=0, match=match, output=output, expected=expected,
        mismatches=mismatches, cycles=100, ideal_cycles=50.0, load_busy=10, compute_busy=60,
        store_busy=5, bank_conflict_stalls=0, dependency_waits=3, dram_bytes_read=64,
        dram_bytes_written=32, expected_traffic=Traffic(64, 32, 16), instructions=4,
        sim_seconds=0.5,
    )


def test_mismatch_prints_first_differing_elements_and_fails(monkeypatch, capsys):
    import tensorforge.sim.rtl_run as rtl_run

    monkeypatch.setattr(rtl_run, "run_on_rtl", lambda *a, **k: _fake_result(match=False))
    assert main(["simulate", *GEMM, *HARDWARE, "--json"]) == 1
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["match"] is False
    kinds = summary["instructions_by_kind"]  # the program's, as compile --json counts them
    assert set(kinds) <= {"LOAD", "COMPUTE", "STORE", "FINISH"} and kinds["FINISH"] == 1
    assert kinds["LOAD"] > 0 and kinds["COMPUTE"] > 0 and kinds["STORE"] > 0
    assert "[1, 2]: RTL 99, numpy 5" in captured.err


def test_table_output(monkeypatch, capsys):
    import tensorforge.sim.rtl_run as rtl_run

    monkeypatch.setattr(rtl_run, "run_on_rtl", lambda *a, **k: _fake_result(match=True))
    assert main(["simulate", *GEMM, *HARDWARE]) == 0
    out = capsys.readouterr().out
    assert "PE utilization" in out and "50.0%" in out and "matches numpy" in out


def test_a_failed_power_run_keeps_the_rtl_figures(monkeypatch, capsys):
    """OpenSTA outlasting --timeout on a large design must not lose the simulation: the RTL's
    figures print beside the tool's error, and the exit status says it failed."""
    import tensorforge.sim.power as power
    import tensorforge.sim.rtl_run as rtl_run
    from tensorforge.errors import ToolError

    seen = {}

    def timed_out(*args, **kwargs):
        seen.update(kwargs)
        raise ToolError("sta", f"timed out after {kwargs['timeout_s']:g} s")

    monkeypatch.setattr(rtl_run, "run_on_rtl", lambda *a, **k: _fake_result(match=True))
    monkeypatch.setattr(power, "power_of_activity", timed_out)
    assert main(["simulate", *GEMM, *HARDWARE, "--power", "--timeout", "7", "--json"]) == 1
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["cycles"], summary["match"]) == (100, True) and "power" not in summary
    assert "timed out after 7 s" in summary["power_error"] and seen["timeout_s"] == 7
    assert "larger --timeout, now 7 s" in captured.err and "Traceback" not in captured.err
    with pytest.raises(SystemExit):
        main(["simulate", *GEMM, *HARDWARE, "--power", "--timeout", "-1"])
    assert "--timeout takes a positive number of seconds, not '-1'" in capsys.readouterr().err


def test_bad_hardware_flag_is_a_clean_error(capsys):
    assert main(["simulate", *GEMM, "--pe", "4by4"]) == 1
    assert "--pe must be ROWSxCOLS" in capsys.readouterr().err


@pytest.mark.rtl
def test_simulate_json_on_rtl(capsys):
    assert main(["simulate", *GEMM, *HARDWARE, "--seed", "4", "--json",
                 "--dram-latency", "5"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert JSON_KEYS <= set(summary)
    assert summary["match"] is True
    assert summary["ideal_cycles"] == 8 * 6 * 5 / 16
    assert 0 < summary["utilization"] == pytest.approx(
        summary["ideal_cycles"] / summary["cycles"])
    assert summary["dram_bytes_read"] == summary["expected_dram_bytes_read"]
