"""The ASIC flow on IHP SG13G2, the default target, on the real tools.

A MAC maps onto sg13g2 cells, with area and leakage summed here straight from the vendored
Liberty file; memories become IHP SRAM macros with the foundry's area and energies (copied by
hand from the macros' Liberty files); a tiny memory stays in flip-flops; a design with
``signed`` ports passes OpenSTA's reader on both technologies. Each distinct synthesis runs
once per module (module-scoped fixtures on a private store).
"""

from __future__ import annotations

import json
import re

import pytest
from amaranth.back import verilog as amaranth_verilog
from test_fpga_hardware_flows import MemoryBlock

from tensorforge.cli import main
from tensorforge.errors import ConfigError
from tensorforge.fpga import ihp_sg13g2
from tensorforge.fpga.asic import synthesize_asic
from tensorforge.hw.mac import MultiplyAccumulate
from tensorforge.store import ResultStore

pytestmark = pytest.mark.synth

FIR = """
module fir(input clk, input signed [7:0] x, output reg signed [17:0] y);
  reg signed [7:0] t0, t1, t2, t3;
  always @(posedge clk) begin
    t0 <= x; t1 <= t0; t2 <= t1; t3 <= t2;
    y <= 3 * t0 - 5 * t1 + 7 * t2 + 2 * t3;
  end
endmodule
"""

# From RM_IHPSG13_2P_256x16_c2_bm_bist_typ_1p20V_25C.lib: area, leakage (nW), and the clock
# pin's energy (pJ) for a read (A_MEN & !A_WEN & A_REN) and a write (A_MEN & A_WEN & !A_REN).
MACRO_256X16 = {"area": 57520.5515, "leakage_nw": 79.7252, "read_pj": 14.192,
                "write_pj": 18.4562}
AREA_1024X32_2P = 264167.2813


@pytest.fixture(scope="module")
def workspace(module_workspace):
    """A result store beside this module's private cache, for its synthesis runs."""
    return ResultStore(module_workspace / "results.sqlite")


@pytest.fixture(scope="module")
def mac(workspace):
    verilog = amaranth_verilog.convert(MultiplyAccumulate(), name="mac")
    return synthesize_asic(verilog, "mac", store=workspace)


@pytest.fixture(scope="module")
def scratchpad(workspace):
    from tensorforge.dse.calibrate import Design, _config, block_verilog

    text, top = block_verilog(Design("scratchpad", _config(2, 2, capacity=1024, banks=2)))
    return synthesize_asic(text, top, store=workspace)


def stdcells() -> dict[str, tuple[float, float]]:
    """Area (um^2) and leakage (pW, the library's unit) of each standard cell."""
    text = ihp_sg13g2.stdcell_liberty().read_text()
    assert 'leakage_power_unit : "1pW"' in text
    cells = {}
    for section in re.split(r"\n\s*cell \(", text)[1:]:
        name = section.split(")", 1)[0].strip().strip('"')
        area = re.search(r"\barea : ([\d.]+);", section)
        leakage = re.search(r"cell_leakage_power : ([\d.eE+-]+);", section)
        cells[name] = (float(area[1]), float(leakage[1]))
    return cells


def test_mac_maps_onto_sg13g2_cells(mac):
    cells = stdcells()
    assert mac.tech == "ihp-sg13g2"
    assert set(mac.cells_by_type) <= set(cells)
    assert not set(mac.cells_by_type) & set(ihp_sg13g2.DONT_USE)
    flops = sum(n for name, n in mac.cells_by_type.items() if name.startswith("sg13g2_dfrbp"))
    assert flops >= 32  # the accumulator
    assert mac.area_um2 == pytest.approx(
        sum(cells[name][0] * n for name, n in mac.cells_by_type.items()), rel=1e-6)


def test_opensta_times_the_mac_and_reports_its_power(mac):
    assert mac.clock_port == "clk"
    assert 0 < mac.critical_path_ns < mac.clock_ns
    assert mac.slack_ns < mac.clock_ns - mac.critical_path_ns  # the flip-flop's setup time
    power = mac.power_mw
    leakage_pw = sum(stdcells()[name][1] * n for name, n in mac.cells_by_type.items())
    assert power.leakage == pytest.approx(leakage_pw * 1e-9, rel=1e-3)
    assert power.total == pytest.approx(power.internal + power.switching + power.leakage,
                                        rel=1e-4)
    assert 0.05 < power.total < 10  # a 32-bit MAC at 100 MHz in 130 nm: a fraction of a mW


def test_scratchpad_banks_become_ihp_macros(scratchpad):
    assert [m["cell"] for m in scratchpad.macros] == ["RM_IHPSG13_2P_256x16_c2_bm_bist"] * 2
    assert scratchpad.cells_by_type["RM_IHPSG13_2P_256x16_c2_bm_bist"] == 2
    assert {m["choice"] for m in scratchpad.memory_map} == {"macros"}
    assert scratchpad.macro_area_um2 == pytest.approx(2 * MACRO_256X16["area"], rel=1e-6)
    assert scratchpad.area_um2 == pytest.approx(
        scratchpad.logic_area_um2 + scratchpad.macro_area_um2, abs=1e-3)
    # two 512-byte banks and their read slots: a tenth of a mm^2, mostly the macros
    assert 0.1e6 < scratchpad.area_um2 < 0.2e6
    assert scratchpad.logic_area_um2 < 0.2 * scratchpad.area_um2


def test_scratchpad_macro_timing_leakage_and_access_power(scratchpad):
    assert scratchpad.macro_access_ns > 2.5  # the 256x16 macro's clock-to-output time
    assert scratchpad.macro_access_ns < scratchpad.critical_path_ns < scratchpad.clock_ns
    assert "RM_IHPSG13_2P_256x16" in scratchpad.logs["sta"]  # the worst path starts there
    assert scratchpad.power_mw.leakage >= 2 * MACRO_256X16["leakage_nw"] * 1e-6
    # each bank read and written in 10% of the 10 ns cycles
    expected = 2 * 0.1 * (MACRO_256X16["read_pj"] + MACRO_256X16["write_pj"]) / 10.0
    assert scratchpad.macro_power_mw == pytest.approx(expected, rel=1e-4)
    assert scratchpad.power_mw.internal > scratchpad.macro_power_mw


def test_deep_memory_stacks_two_macros(workspace):
    text = amaranth_verilog.convert(MemoryBlock(2048), name="memblock")
    report = synthesize_asic(text, "memblock", store=workspace)
    [macro] = report.macros
    # 2048 x 32: two 1024x32 two-port macros (528k um^2) beat four 512x32 (603k)
    assert macro["cell"] == "RM_IHPSG13_2P_1024x32_c2_bm_bist"
    assert (macro["rows"], macro["cols"], macro["count"]) == (2, 1, 2)
    assert report.macro_area_um2 == pytest.approx(2 * AREA_1024X32_2P, rel=1e-6)
    # the registered row select and the 2:1 read multiplexer are logic in front of the adder
    assert report.critical_path_ns > macro["access_ns"]


def test_tiny_memory_stays_in_flip_flops(workspace):
    text = amaranth_verilog.convert(MemoryBlock(4), name="memblock")
    report = synthesize_asic(text, "memblock", store=workspace)
    [memory] = report.memory_map
    assert memory["choice"] == "flops" and "smaller" in memory["reason"]
    assert report.macros == [] and report.macro_area_um2 == 0
    flops = sum(n for name, n in report.cells_by_type.items() if name.startswith("sg13g2_dfrbp"))
    assert flops >= 4 * 32 + 32


@pytest.mark.parametrize("tech", ["ihp-sg13g2", "osu018"])
def test_signed_ports_pass_opensta(workspace, tech):
    report = synthesize_asic(FIR, "fir", tech=tech, store=workspace)
    assert report.tech == tech
    assert report.clock_port == "clk"
    assert 0 < report.critical_path_ns < report.clock_ns
    assert report.power_mw.total > 0


def test_unknown_technology_names_the_choices():
    with pytest.raises(ConfigError, match="ihp-sg13g2, osu018"):
        synthesize_asic(FIR, "fir", tech="sky130")


def test_cli_tech_flag(workspace, tmp_path, capsys):
    source = tmp_path / "fir.v"
    source.write_text(FIR)
    keys = {}
    for args, tech in (([], "ihp-sg13g2"), (["--tech", "osu018"], "osu018")):
        code = main(["synth", str(source), "--top", "fir", "--flow", "asic", "--json",
                     "--store", str(workspace.path), *args])
        assert code == 0
        result = json.loads(capsys.readouterr().out)
        assert result["tech"] == tech
        keys[tech] = result["key"]
    assert keys["ihp-sg13g2"] != keys["osu018"]  # the technology is part of the cache key


def test_reports_stored_before_technologies_read_as_osu():
    from tensorforge.fpga.asic import AsicReport

    stored = {"top": "m", "clock_ns": 10.0, "activity": 0.1, "area_um2": 1.0, "cells": 1,
              "critical_path_ns": 1.0, "slack_ns": 9.0,
              "power_mw": {"internal": 1.0, "switching": 1.0, "leakage": 0.0, "total": 2.0}}
    assert AsicReport.from_payload(stored).tech == "osu018"
    assert AsicReport.from_payload({**stored, "tech": "ihp-sg13g2"}).tech == "ihp-sg13g2"
