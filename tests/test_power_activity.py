"""Workload-driven power: register activity from the RTL run, annotated on the netlist's
flip-flops, and the power split it gives (`tensorforge.sim.power`).

Pure-Python tests check the pieces against hand-made inputs: the memory access counters
added to Verilog, the coverage file reader, the netlist cut that carries a flip-flop's rate
to OpenSTA. The RTL + synthesis tests share one 4x4 GEMM accelerator (the configuration of
tests/test_rtl_run.py), one activity model build, one synthesis and one run per data kind.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tensorforge.compiler.workload import parse_workload
from tensorforge.fpga.netlist_power import (
    CUT_PORT_PREFIX,
    FlopCell,
    MappedNetlist,
    annotated_script,
    cut_flop_inputs,
    port_activity,
)
from tensorforge.sim.memory_ports import instrument
from tensorforge.sim.power import annotate_flops
from tensorforge.sim.register_activity import RegisterActivity, read_toggles
from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS

CONFIG = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=12,j=10,k=9", name="gemm")

# ------------------------------------------------------------------ pure Python

MEMORY_VERILOG = """\
module \\top.buf (clk, we, re, waddr, raddr, wdata, rdata);
  reg [15:0] store [3:0];
  always @(posedge clk) begin
    if (we[0])
      store[waddr][7:0] <= wdata[7:0];
    if (we[1])
      store[waddr][15:8] <= wdata[15:8];
  end
  reg [15:0] _0_;
  always @(posedge clk) begin
    if (re) begin
      _0_ <= store[raddr];
    end
  end
  assign rdata = _0_;
endmodule
"""


def test_memory_ports_get_one_counter_per_port_enabled_by_any_lane():
    text, ports = instrument(MEMORY_VERILOG, "top")
    assert [(p.memory, p.kind, p.index) for p in ports] == [
        ("buf.store", "write", 0), ("buf.store", "read", 0)]
    write, read = ports
    assert (f"if ((we[0]) | (we[1])) {write.counter} <= ~{write.counter};" in text)
    assert f"if ((re)) {read.counter} <= ~{read.counter};" in text
    assert text.index(read.counter) < text.index("endmodule")


def _point(scope: str, comment: str, count: int, kind: str = "toggle") -> str:
    fields = {"t": kind, "page": f"v_{kind}/x", "o": comment, "h": scope}
    return "C '" + "".join(f"\x01{k}\x02{v}" for k, v in fields.items()) + f"' {count}\n"


def test_coverage_toggles_are_summed_per_bit_and_named_as_yosys_names_flops():
    text = "# SystemC::Coverage-3\n" + "".join([
        _point("tensorforge_sim.accel.compute.array", "acc[3]:0->1", 5),
        _point("tensorforge_sim.accel.compute.array", "acc[3]:1->0", 4),
        _point("tensorforge_sim.accel", "load___05Fbusy:0->1", 2),  # Verilator's "__"
        _point("tensorforge_sim.accel", "cycles[0]:1->0", 7, kind="line"),  # not a toggle
        _point("tensorforge_sim.dram", "rdata[0]:0->1", 9),  # outside the accelerator
    ])
    toggles, scopes = read_toggles(text)
    assert toggles == {"compute.array.acc[3]": 9, "load__busy": 2}
    assert scopes == {"compute.array", ""}
    activity = RegisterActivity(10, {**toggles, "compute.array.pe.cmd.op[0]": 1}, {},
                                scopes | {"compute.array.pe"})
    assert activity.by_scope(depth=1) == {"(top)": 2, "compute": 10}
    assert activity.by_scope(depth=3) == {"(top)": 2, "compute.array": 9,
                                          "compute.array.pe": 1}


def test_a_flops_rate_reaches_its_d_port_in_the_sta_script():
    """Two flip-flops of a 2-bit counter: bit 0 toggles every cycle (rate 1), bit 1 every
    other cycle (0.5); one flop Yosys made itself gets the matched ones' mean (0.75)."""
    netlist = """\
module counter(clk, q);
  input clk;
  output [1:0] q;
  sg13g2_dfrbpq_1 _10_ (
    .CLK(clk),
    .D(_1_),
    .Q(\\count[0] ),
    .RESET_B(1'b1)
  );
  sg13g2_dfrbpq_1 _11_ (
    .CLK(clk),
    .D(_2_),
    .Q(\\count[1] ),
    .RESET_B(1'b1)
  );
  sg13g2_dfrbpq_1 _12_ (
    .CLK(clk),
    .D(_3_),
    .Q(_4_),
    .RESET_B(1'b1)
  );
  sg13g2_inv_1 _13_ (
    .A(\\count[0] ),
    .Y(_1_)
  );
endmodule
"""
    cells = {"sg13g2_dfrbpq_1": FlopCell("sg13g2_dfrbpq_1", "D", "Q")}
    cut, flops = cut_flop_inputs(netlist, cells)
    assert [f.output_net for f in flops] == ["count[0]", "count[1]", "_4_"]
    assert f".D({CUT_PORT_PREFIX}0)" in cut and ".D(_1_)" not in cut
    assert f"input {CUT_PORT_PREFIX}2;" in cut and f", {CUT_PORT_PREFIX}2);" in cut
    assert ".A(\\count[0] )" in cut  # the logic the flop drives is untouched

    cycles = 64
    activity = RegisterActivity(cycles, {"count[0]": 64, "count[1]": 32}, {})
    rates, matched, mean = annotate_flops(flops, activity)
    assert len(matched) == 2 and mean == pytest.approx(0.75)
    design = MappedNetlist(key="k", directory=None, top="counter", tech="ihp-sg13g2",
                           clock_ns=10.0, clock_port="clk", liberties=("cells.lib",),
                           flops=tuple(flops), macros=(), logic_area_um2=0.0,
                           macro_area_um2=0.0, cells=4)
    script = annotated_script(design, port_activity(design, rates, {}))
    assert f"[get_ports {{{CUT_PORT_PREFIX}0}}] -activity 1.0" in script
    assert f"[get_ports {{{CUT_PORT_PREFIX}1}}] -activity 0.5" in script
    assert f"[get_ports {{{CUT_PORT_PREFIX}2}}] -activity 0.75" in script


def test_flop_cells_of_the_ihp_library_sample_d_and_drive_q():
    from tensorforge.fpga.ihp_sg13g2 import stdcell_liberty
    from tensorforge.fpga.netlist_power import flop_cells

    cells = flop_cells(stdcell_liberty().read_text())
    assert cells["sg13g2_dfrbpq_1"] == FlopCell("sg13g2_dfrbpq_1", "D", "Q")
    assert "sg13g2_inv_1" not in cells and "sg13g2_dlhq_1" not in cells  # a latch


# ------------------------------------------------------------------ RTL + synthesis


@pytest.fixture(scope="module")
def measured():
    """The same program on the same design with random and with all-zero operands, and the
    design idle; one activity model, one synthesis (both cached on disk)."""
    from tensorforge.sim.power import measure_idle_power, measure_power, measure_runs, operands
    from tensorforge.sim.rtl_run import RtlCase

    zeros = RtlCase(GEMM, inputs=operands(GEMM, "zeros", seed=5), seed=5)
    return {
        "random": measure_power(GEMM, CONFIG, seed=5, data="random"),
        "zeros": measure_runs(CONFIG, [zeros])[0],
        "idle": measure_idle_power(CONFIG, 400),
    }


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_random_operands_draw_more_than_zeros_on_the_same_program(measured):
    random, zeros = measured["random"], measured["zeros"]
    assert random.match and zeros.match
    assert random.cycles == zeros.cycles  # the same program, timed alike
    # Zero operands leave the array's registers nearly still; random ones move them.
    assert zeros.component_toggles()["compute.array"] < random.component_toggles()[
        "compute.array"] / 10
    assert random.logic_mw > zeros.logic_mw + 0.01 * random.logic_mw
    assert random.total_mw > zeros.total_mw
    # Accesses depend on the program, not the data.
    assert random.activity.accesses == zeros.activity.accesses


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_an_idle_design_draws_leakage_plus_clock(measured):
    idle = measured["idle"]
    assert idle.cycles == pytest.approx(400, abs=1)
    assert all(sum(a.reads) + sum(a.writes) == 0 for a in idle.activity.accesses.values())
    # clock_mw is the same netlist with every flop and input quiet: the idle run's measured
    # activity must price within 2% of it (plus leakage).
    assert idle.total_mw == pytest.approx(idle.leakage_mw + idle.clock_mw, rel=0.02)
    assert idle.clock_mw < measured["random"].logic_mw


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_the_split_adds_up_and_memory_energy_follows_the_counted_accesses(measured):
    run = measured["random"]
    assert run.total_mw == pytest.approx(run.logic_mw + run.memory_mw + run.leakage_mw)
    energy = run.energy_uj()
    assert energy["total"] == pytest.approx(energy["logic"] + energy["memory"]
                                            + energy["leakage"])
    assert energy["total"] == pytest.approx(run.total_mw * run.cycles * run.clock_ns * 1e-6)
    assert 0 < run.clock_mw < run.logic_mw and 0 < run.memory_leakage_mw < run.leakage_mw
    # The flip-flops' own power (report_power -instances) holds their clock power and is part
    # of the logic's; grouped by component it sums to the same.
    flops = sum(run.flop_power_mw.values())
    assert run.clock_mw * 0.99 < flops < run.logic_mw + run.leakage_mw
    assert sum(run.component_flop_power_mw(depth=1).values()) == pytest.approx(flops)
    assert len(run.component_toggles(depth=3)) > 16  # the array splits into its 16 PEs
    # Hand count for one scratchpad bank: one 256x32 macro, so each access is one macro's.
    from tensorforge.fpga.ihp_sg13g2 import catalogue

    macro = next(m.macro for m in catalogue() if m.macro.cell == "RM_IHPSG13_2P_256x32_c2_bm_bist")
    bank = run.activity.accesses["scratchpad.bank0"]
    assert sum(bank.reads) > 0 and sum(bank.writes) > 0
    assert run.memory_energy_pj["scratchpad.bank0"] == pytest.approx(
        sum(bank.reads) * macro.read_pj + sum(bank.writes) * macro.write_pj)


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_a_counter_register_annotates_its_flops_with_the_counted_rate(measured):
    """The ``cycles`` performance counter increments once per cycle the program runs: bit k
    of a counter that went from v0 to v0 + n toggles floor((v0 + n) / 2^k) - floor(v0 / 2^k)
    times; n is bit 0's toggles, v0 + n the value read back over AXI-Lite."""
    run = measured["random"]
    toggles = run.flop_toggles
    increments = toggles["cycles[0]"]
    end = run.counters["cycles"]
    start = end - increments
    assert increments == pytest.approx(run.activity.cycles, abs=4)
    for bit in range(1, 10):
        expected = math.floor(end / 2**bit) - math.floor(start / 2**bit)
        assert toggles[f"cycles[{bit}]"] == expected, bit
    assert run.flops_annotated > 0.9 * run.flops_total


def test_zero_operands_are_zeros():
    from tensorforge.sim.power import operands

    zeros = operands(GEMM, "zeros", seed=3)
    assert set(zeros) == set(GEMM.input_names)
    assert all(not np.any(value) and value.shape == GEMM.shapes[name]
               for name, value in zeros.items())
    with pytest.raises(ValueError, match="data must be one of random, zeros"):
        operands(GEMM, "ones", seed=3)


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_simulate_power_emits_the_split(measured, capsys):
    """The CLI prices a run as `measure_power` does (same design: one synthesis)."""
    import json

    from tensorforge.cli import main

    hardware = ["--pe", "4x4", "--link", "systolic", "--dataflow", "ws", "--spad", "2",
                "--banks", "4", "--acc", "1", "--bus", "64", "--burst", "16"]
    workload = ["--workload", "C[i,j] += A[i,k] * B[k,j]", "--sizes", "i=12,j=10,k=9"]
    assert main(["simulate", *workload, *hardware, "--seed", "5", "--power", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    power = summary["power"]
    run = measured["random"]
    # the default model's figure for the same program beside it, and their ratio
    model = summary["model_power"]["power_mw"]["total_mw"]
    assert summary["model_power_error"] == pytest.approx(model / power["total_mw"] - 1)
    assert power["technology"] == "ihp-sg13g2"
    assert power["total_mw"] == pytest.approx(
        power["logic_mw"] + power["memory_mw"] + power["leakage_mw"])
    assert power["energy_uj"]["total"] == pytest.approx(
        power["total_mw"] * power["cycles"] * power["clock_ns"] * 1e-6)
    assert (power["flops_annotated"], power["flops_total"]) == (run.flops_annotated,
                                                                 run.flops_total)


COUNTER_VERILOG = """\
module counter(clk, rst, q);
  input clk;
  input rst;
  output [3:0] q;
  reg [3:0] count = 4'd0;
  always @(posedge clk)
    if (rst) count <= 4'd0;
    else count <= count + 4'd1;
  assign q = count;
endmodule
"""


@pytest.mark.synth
def test_flop_rates_propagate_through_the_logic_they_drive(tmp_path):
    """A 4-bit counter mapped onto IHP cells: its incrementer switches only when the flops
    that feed it toggle, so OpenSTA must carry the flops' annotated rates into the logic."""
    from tensorforge.fpga.netlist_power import annotated_power, mapped_netlist
    from tensorforge.store import ResultStore

    netlist = mapped_netlist(COUNTER_VERILOG, "counter")
    assert len(netlist.flops) == 4
    store = ResultStore(tmp_path / "results.sqlite")
    quiet = annotated_power(netlist, {}, {}, store=store)
    counting = annotated_power(  # bit k of a counter toggles every 2^k cycles
        netlist, {flop.instance: 1 / 2 ** int(flop.output_net[-2]) for flop in netlist.flops},
        {}, store=store)
    assert quiet.groups["Combinational"].switching == 0
    assert counting.groups["Combinational"].switching > 0
    assert counting.groups["Sequential"].total > quiet.groups["Sequential"].total
    assert set(counting.flops) == {flop.instance for flop in netlist.flops}


RAM_VERILOG = """\
module ram(clk, we, addr, wdata, rdata);
  input clk;
  input we;
  input [7:0] addr;
  input [31:0] wdata;
  output [31:0] rdata;
  reg [31:0] words [255:0];
  reg [31:0] out;
  always @(posedge clk) begin
    if (we) words[addr] <= wdata;
    out <= words[addr];
  end
  assign rdata = out;
endmodule
"""


@pytest.mark.synth
@pytest.mark.parametrize("tech", ["ihp-sg13g2", "osu018"])
def test_synth_leaves_the_netlist_the_power_flow_would_map(tmp_path, monkeypatch, tech):
    """`synth --flow asic` keeps its mapped netlist for `simulate --power` of the same Verilog
    and clock (a large design is then mapped once, not twice): what it keeps equals what the
    power flow maps on its own, cut netlist, flip-flops and macros alike."""
    from tensorforge.fpga.asic import synthesize_asic
    from tensorforge.fpga.netlist_power import CUT_NETLIST, cached_netlist, mapped_netlist

    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "from-synth"))
    assert cached_netlist(RAM_VERILOG, "ram", tech=tech, clock_ns=8.0) is None
    report = synthesize_asic(RAM_VERILOG, "ram", tech=tech, clock_ns=8.0, activity=0.2)
    kept = cached_netlist(RAM_VERILOG, "ram", tech=tech, clock_ns=8.0)
    assert kept is not None and report.macros  # the RAM is a macro, so its entry is kept
    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "own"))
    own = mapped_netlist(RAM_VERILOG, "ram", tech=tech, clock_ns=8.0)
    assert (kept.directory / CUT_NETLIST).read_text() == (own.directory / CUT_NETLIST).read_text()
    assert all(Path(path).is_file() for path in kept.liberties)
    assert (kept.flops, kept.macros, kept.clock_port) == (own.flops, own.macros, own.clock_port)
    assert (kept.logic_area_um2, kept.macro_area_um2) == (own.logic_area_um2, own.macro_area_um2)
    assert report.area_um2 == pytest.approx(own.area_um2)
