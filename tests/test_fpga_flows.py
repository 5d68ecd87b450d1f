"""Both synthesis flows on the real tools, with the MAC and a two-MAC wrapper as designs.

Each distinct synthesis runs once per module (module-scoped fixtures on one temporary store);
the tests then read the reports. Area and leakage are checked against sums computed here
straight from the liberty file, which pins the unit conversions.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from amaranth.back import verilog as amaranth_verilog

from tensorforge.fpga import tools
from tensorforge.fpga.asic import synthesize_asic
from tensorforge.fpga.ecp5 import synthesize_ecp5
from tensorforge.hw.mac import MultiplyAccumulate
from tensorforge.store import ResultStore

pytestmark = pytest.mark.synth

# These tests pin the OSU 0.18 um target: its cells and analytical macros (test_fpga_ihp.py
# has the IHP SG13G2 ones).
OSU = "osu018"

PAIR = """
module pair(input clk, input rst, input valid, input clear,
            input [7:0] a0, input [7:0] b0, input [7:0] a1, input [7:0] b1,
            output [31:0] acc0, output [31:0] acc1);
  mac first (.clk(clk), .rst(rst), .valid(valid), .clear(clear), .a(a0), .b(b0), .acc(acc0));
  mac second(.clk(clk), .rst(rst), .valid(valid), .clear(clear), .a(a1), .b(b1), .acc(acc1));
endmodule
"""


@pytest.fixture(scope="module")
def workspace(module_workspace):
    """A result store beside this module's private cache, for its synthesis runs."""
    return ResultStore(module_workspace / "results.sqlite")


@pytest.fixture(scope="module")
def mac_verilog() -> str:
    return amaranth_verilog.convert(MultiplyAccumulate(), name="mac")


@pytest.fixture(scope="module")
def pair_verilog(mac_verilog) -> str:
    return mac_verilog + PAIR


@pytest.fixture(scope="module")
def mac_ecp5(mac_verilog, workspace):
    return synthesize_ecp5(mac_verilog, "mac", store=workspace)


@pytest.fixture(scope="module")
def mac_asic(mac_verilog, workspace):
    return synthesize_asic(mac_verilog, "mac", tech=OSU, activity=0.1, store=workspace)


@pytest.fixture(scope="module")
def mac_asic_busy(mac_verilog, workspace):
    return synthesize_asic(mac_verilog, "mac", tech=OSU, activity=0.4, store=workspace)


@pytest.fixture(scope="module")
def pair_asic(pair_verilog, workspace):
    return synthesize_asic(pair_verilog, "pair", tech=OSU, activity=0.1, store=workspace)


def liberty_cells() -> dict[str, tuple[float, float]]:
    """Area (um^2) and leakage (in the library's unit, nW) of each cell, read independently."""
    text = tools.find_osu018_liberty().read_text()
    assert 'leakage_power_unit : "1nW"' in text
    cells = {}
    for section in re.split(r"\n\s*cell \(", text)[1:]:
        name = section.split(")", 1)[0].strip()
        area = re.search(r"\barea : ([\d.]+);", section)
        leakage = re.search(r"cell_leakage_power : ([\d.eE+-]+);", section)
        cells[name] = (float(area[1]), float(leakage[1]))
    return cells


def test_ecp5_mac_uses_a_dsp_and_meets_a_clock(mac_ecp5):
    assert mac_ecp5.dsps >= 1
    assert mac_ecp5.ffs >= 32  # the 32-bit accumulator
    assert mac_ecp5.luts > 0
    assert mac_ecp5.brams == 0
    assert mac_ecp5.fmax_mhz is not None and mac_ecp5.fmax_mhz > 0
    assert mac_ecp5.critical_path_ns == pytest.approx(1000 / mac_ecp5.fmax_mhz, rel=1e-3)
    assert mac_ecp5.yosys_cells.get("MULT18X18D", 0) == mac_ecp5.dsps
    assert not mac_ecp5.cached


def test_ecp5_two_macs_use_two_dsps(pair_verilog, mac_ecp5, workspace):
    pair = synthesize_ecp5(pair_verilog, "pair", store=workspace)
    assert pair.dsps == 2 * mac_ecp5.dsps
    assert pair.ffs == 2 * mac_ecp5.ffs


def test_ecp5_multipliers_beyond_the_dsp_budget_are_built_from_luts(pair_verilog, mac_ecp5,
                                                                     workspace):
    pair = synthesize_ecp5(pair_verilog, "pair", max_dsps=1, store=workspace)
    assert (pair.dsps, pair.lut_multipliers, pair.dsp_budget) == (1, 1, 1)
    assert pair.yosys_cells.get("MULT18X18D", 0) == 1
    # The LUT-built 8x8 multiplier costs LUTs (and carry chains) the DSP one does not.
    assert pair.luts > 2 * mac_ecp5.luts + 20
    assert pair.ffs == 2 * mac_ecp5.ffs


def test_ecp5_design_without_clock_has_no_fmax_but_a_path(workspace):
    source = "module comb(input [7:0] a, b, output [15:0] y);\n  assign y = a * b + a;\nendmodule\n"
    report = synthesize_ecp5(source, "comb", store=workspace)
    assert report.fmax_mhz is None
    assert report.critical_path_ns is not None and report.critical_path_ns > 0
    assert report.ffs == 0


def test_asic_mac_area_matches_the_liberty(mac_asic):
    cells = liberty_cells()
    expected_area = sum(cells[name][0] * count for name, count in mac_asic.cells_by_type.items())
    assert mac_asic.area_um2 > 0
    assert mac_asic.area_um2 == pytest.approx(expected_area, rel=1e-6)
    assert mac_asic.cells == sum(mac_asic.cells_by_type.values())
    assert mac_asic.cells_by_type.get("DFFPOSX1", 0) + mac_asic.cells_by_type.get("DFFSR", 0) >= 32


def test_asic_mac_timing(mac_asic):
    assert mac_asic.clock_port == "clk"
    assert 0 < mac_asic.critical_path_ns < 50
    # Slack is measured against the 10 ns period less the flip-flop's setup time.
    assert mac_asic.slack_ns < mac_asic.clock_ns - mac_asic.critical_path_ns
    assert mac_asic.slack_ns > mac_asic.clock_ns - mac_asic.critical_path_ns - 1.0


def test_asic_power_is_in_milliwatts(mac_asic):
    cells = liberty_cells()
    leakage_nw = sum(cells[name][1] * count for name, count in mac_asic.cells_by_type.items())
    power = mac_asic.power_mw
    assert power.leakage == pytest.approx(leakage_nw * 1e-6, rel=1e-3)
    assert power.total == pytest.approx(power.internal + power.switching + power.leakage,
                                        rel=1e-4)
    assert 0.01 < power.total < 100  # a MAC at 100 MHz in 0.18um is a few mW


def test_asic_power_rises_with_activity(mac_asic, mac_asic_busy):
    assert mac_asic_busy.area_um2 == mac_asic.area_um2
    assert mac_asic_busy.power_mw.switching > mac_asic.power_mw.switching
    assert mac_asic_busy.power_mw.total > mac_asic.power_mw.total
    assert mac_asic_busy.power_mw.leakage == pytest.approx(mac_asic.power_mw.leakage)


def test_asic_quiet_port_lowers_power(mac_verilog, mac_asic, workspace):
    quiet = synthesize_asic(mac_verilog, "mac", tech=OSU, activity=0.1,
                            port_activity={"a": 0.0}, store=workspace)
    assert quiet.power_mw.total < mac_asic.power_mw.total


def test_asic_two_macs_have_twice_the_area(mac_asic, pair_asic):
    assert pair_asic.area_um2 > mac_asic.area_um2
    assert pair_asic.area_um2 == pytest.approx(2 * mac_asic.area_um2, rel=0.1)
    assert pair_asic.power_mw.total > mac_asic.power_mw.total


def test_asic_combinational_design_uses_a_virtual_clock(workspace):
    source = "module comb(input [7:0] a, b, output [15:0] y);\n  assign y = a * b;\nendmodule\n"
    report = synthesize_asic(source, "comb", tech=OSU, store=workspace)
    assert report.clock_port is None
    assert report.critical_path_ns > 0
    assert report.slack_ns == pytest.approx(report.clock_ns - report.critical_path_ns, abs=1e-3)


def _forbid_tools(monkeypatch):
    def no_tools(spec):
        raise AssertionError(f"{spec.name} was started although the result is stored")

    monkeypatch.setattr(tools, "find_tool", no_tools)


def test_second_synthesis_comes_from_the_store(mac_verilog, mac_ecp5, mac_asic, workspace,
                                               monkeypatch):
    _forbid_tools(monkeypatch)
    ecp5_again = synthesize_ecp5(mac_verilog, "mac", store=workspace)
    asic_again = synthesize_asic(mac_verilog, "mac", tech=OSU, activity=0.1, store=workspace)
    assert ecp5_again.cached and asic_again.cached
    assert ecp5_again.key == mac_ecp5.key and asic_again.key == mac_asic.key
    assert ecp5_again == dataclasses.replace(mac_ecp5, cached=True)
    assert asic_again.power_mw == mac_asic.power_mw
    assert asic_again.area_um2 == mac_asic.area_um2


def test_no_cache_runs_the_tools_again(mac_verilog, mac_ecp5, workspace, monkeypatch):
    _forbid_tools(monkeypatch)
    with pytest.raises(AssertionError, match="was started"):
        synthesize_ecp5(mac_verilog, "mac", store=workspace, use_cache=False)


def test_other_options_are_another_result(mac_verilog, mac_ecp5, workspace):
    slower = synthesize_ecp5(mac_verilog, "mac", clock_ns=20.0, store=workspace)
    assert not slower.cached
    assert slower.key != mac_ecp5.key
    assert sorted(workspace.keys("synth_ecp5")).count(mac_ecp5.key) == 1
    assert slower.key in workspace.keys("synth_ecp5")


def test_asic_shortest_period_is_the_clock_less_the_slack(mac_asic):
    """The period a clocked design meets counts the capturing flip-flop's setup on top of the
    data's arrival, so it is at least the arrival and the clock less the slack exactly."""
    summary = mac_asic.summary()
    assert summary["min_period_ns"] == pytest.approx(mac_asic.clock_ns - mac_asic.slack_ns)
    assert summary["min_period_ns"] >= mac_asic.critical_path_ns
    assert summary["fmax_mhz"] == pytest.approx(1e3 / summary["min_period_ns"], rel=1e-6)


def _many_block_rams(count: int) -> str:
    """``count`` independent 1024x18 memories (a DP16KD each) with registered reads."""
    return "\n".join([
        f"module many_rams(input clk, input we, input [9:0] addr, input [17:0] din, "
        f"output [{18 * count - 1}:0] dout);",
        "  genvar i;",
        f"  generate for (i = 0; i < {count}; i = i + 1) begin : bank",
        "    reg [17:0] mem [0:1023]; reg [17:0] q;",
        "    always @(posedge clk) begin if (we) mem[addr] <= din ^ i; q <= mem[addr ^ i]; end",
        "    assign dout[18*i +: 18] = q;",
        "  end endgenerate",
        "endmodule",
    ])


def test_ecp5_design_over_the_part_is_a_stored_does_not_fit(workspace, monkeypatch):
    """57 block RAMs on the LFE5U-25F (56 DP16KD): nextpnr's utilisation after packing says
    so, the flow stops there with what is over and by how much, and asking again answers
    from the store without a tool."""
    from tensorforge.fpga.ecp5_fit import DesignDoesNotFit

    verilog = _many_block_rams(57)
    with pytest.raises(DesignDoesNotFit) as first:
        synthesize_ecp5(verilog, "many_rams", part="LFE5U-25F", out_of_context=True,
                        store=workspace)
    assert first.value.over == {"DP16KD": (57, 56)}
    assert "DP16KD 57 of 56 (102%)" in str(first.value) and "--pe" in str(first.value)
    assert not first.value.stored
    _forbid_tools(monkeypatch)
    with pytest.raises(DesignDoesNotFit) as again:
        synthesize_ecp5(verilog, "many_rams", part="LFE5U-25F", out_of_context=True,
                        store=workspace)
    assert again.value.stored and again.value.over == first.value.over
    assert "--no-cache" in str(again.value)
    assert len(workspace.keys("synth_ecp5_failure")) == 1
