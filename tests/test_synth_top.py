"""--synthesize-top: the ASIC flow runs at the clock the sweep's model gave the design, and its
Fmax is the shortest period met (clock - slack, setup included), not the data's arrival. The
flows are stand-ins here; the slow explore test runs the real ones."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from tensorforge.config import AcceleratorConfig
from tensorforge.dse import synth_top
from tensorforge.dse.sweep_store import TrialRecord
from tensorforge.errors import ToolError


def test_asic_flow_runs_at_the_model_clock_and_reports_the_period_met(monkeypatch):
    import tensorforge.fpga as flows

    seen = {}

    def fake_asic(verilog, top, *, clock_ns):
        seen["clock_ns"] = clock_ns
        # data arrives at 6.0 ns; with the macros' setup the shortest period met is 7.0 ns
        return SimpleNamespace(area_um2=2.5e6, power_mw=SimpleNamespace(total=800.0),
                               critical_path_ns=6.0, min_period_ns=7.0)

    def failing_ecp5(*args, **kwargs):
        raise ToolError("nextpnr-ecp5", "not run in this test")

    monkeypatch.setattr(flows, "synthesize_asic", fake_asic)
    monkeypatch.setattr(flows, "synthesize_ecp5", failing_ecp5)
    monkeypatch.setattr(synth_top, "accelerator_verilog", lambda config: "module m; endmodule")
    monkeypatch.setattr(synth_top, "_calibrated", lambda config, notes: None)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    trial = TrialRecord(index=3, point={}, status="ok", config=AcceleratorConfig().to_dict(),
                        metrics={"clock_mhz": 125.0, "area_mm2": 2.4})
    row = synth_top._synthesize(trial, clock_ns=10.0)
    assert seen["clock_ns"] == 8.0  # 125 MHz, not the 10 ns default
    assert row.asic["fmax_mhz"] == 1e3 / 7.0
    assert row.asic["critical_path_ns"] == 6.0 and row.asic["clock_ns"] == 8.0
    assert row.asic["area_mm2"] == 2.5
    assert any("ECP5 flow" in note for note in row.notes)


def test_block_verilog_builds_the_ecp5_target_of_the_blocks_that_have_one():
    """The synthesis benchmark's ECP5 rows come from the ECP5 build: the PE array's
    multipliers are MULT18X18D instances there, and none in the generic RTL; a block without an
    ECP5 build says so instead of silently giving the generic one."""
    from tensorforge.dse.calibrate import Design, block_verilog

    config = AcceleratorConfig.from_dict({"array": {"rows": 2, "cols": 2}})
    generic, top = block_verilog(Design("pe_array", config))
    ecp5, ecp5_top = block_verilog(Design("pe_array", config), "ecp5")
    assert top == ecp5_top == "tf_pe_array"
    assert "MULT18X18D" not in generic
    assert ecp5.count("MULT18X18D ") == 4  # one instance per PE
    with pytest.raises(ValueError, match="no ecp5 build"):
        block_verilog(Design("scratchpad", config), "ecp5")
