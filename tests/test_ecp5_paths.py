"""Whole-design static timing from nextpnr's SDF (`fpga.ecp5_paths`).

The SDF below is written by hand in nextpnr's format (one construct a line, ``\\$`` escapes,
``(min:typ:max)`` in ps, rise and fall) for a small design whose arrivals were summed by hand:

    mem.bank$dp (DP16KD)  CLKA -> DOA0   5600
      net 300 -> u.x_LUT4_Z/B ; LUT B -> F 236                          u.x/F  = 6136
    u.a_TRELLIS_FF_Q      CLK -> Q        500
      net 900 -> u.x_LUT4_Z/A  (1400 + 236 < 6136)
      net 800 -> w.d_TRELLIS_FF_Q/DI                                    d/DI   = 1300
    u.b_TRELLIS_FF_Q      CLK -> Q        525
      net max(600, 640) -> v.sum$CCU2_COMB0/B ; B -> FCO 447   (1612, beaten by A)
      net 8000 -> u.g_TRELLIS_FF_Q/DI                                   g/DI   = 8525
    u.x/F  net 1000 -> v.sum$CCU2_COMB0/A ; A -> FCO 447                COMB0/FCO = 7583
      carry net 0 -> v.sum$CCU2_COMB1/FCI ; FCI -> F 443                COMB1/F   = 8026
      net 700 -> w.c_TRELLIS_FF_Q/DI (setup 200)                        c/DI   = 8726
    u.x/F  net 2000 -> w.f_TRELLIS_FF_Q/DI                              f/DI   = 8136
    x.m (MULT18X18D)  (posedge CLK0) -> P0  735 ; net 265 -> w.e_TRELLIS_FF_Q/DI  = 1000

At 125 MHz (8 ns) the failing endpoints are c (8 - 8.726 - 0.2 = -0.926), g (-0.525) and f
(-0.136); c's worst path has 3 routed nets (the carry net costs nothing) and 2 logic levels
(the LUT and the adder's sum; the adder's ``-> FCO`` arc is the same adder).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import verilog as amaranth_verilog

from tensorforge.cli import main as cli_main
from tensorforge.errors import ConfigError
from tensorforge.fpga.ecp5_paths import (
    analyse_run,
    check_against_report,
    distinct_worst,
    fold_carry_ripples,
    format_groups,
    group_by_boundary,
    propagate,
    read_sdf_graph,
    split_pin,
    unescape,
    worst_failing,
    worst_path,
)
from tensorforge.fpga.ecp5_paths import main as paths_main
from tensorforge.hw.mac import MultiplyAccumulate

SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (DIVIDER /)
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT mem.bank\$dp/DOA0 u.x_LUT4_Z/B (100:200:300) (100:200:300))
        (INTERCONNECT u.a_TRELLIS_FF_Q/Q u.x_LUT4_Z/A (700:800:900) (700:800:900))
        (INTERCONNECT u.a_TRELLIS_FF_Q/Q w.d_TRELLIS_FF_Q/DI (600:700:800) (600:700:800))
        (INTERCONNECT u.b_TRELLIS_FF_Q/Q v.sum\$CCU2_COMB0/B (500:550:600) (520:580:640))
        (INTERCONNECT u.b_TRELLIS_FF_Q/Q u.g_TRELLIS_FF_Q/DI (7000:7500:8000) (7000:7500:8000))
        (INTERCONNECT u.x_LUT4_Z/F v.sum\$CCU2_COMB0/A (800:900:1000) (800:900:1000))
        (INTERCONNECT v.sum\$CCU2_COMB0/FCO v.sum\$CCU2_COMB1/FCI (0:0:0) (0:0:0))
        (INTERCONNECT v.sum\$CCU2_COMB1/F w.c_TRELLIS_FF_Q/DI (500:600:700) (500:600:700))
        (INTERCONNECT u.x_LUT4_Z/F w.f_TRELLIS_FF_Q/DI (1500:1800:2000) (1500:1800:2000))
        (INTERCONNECT x.m/P0 w.e_TRELLIS_FF_Q/DI (200:230:265) (200:230:265))
      )
    )
  )
  (CELL
    (CELLTYPE "DP16KD")
    (INSTANCE mem.bank\$dp)
    (DELAY
      (ABSOLUTE
        (IOPATH CLKA DOA0 (5500:5550:5600) (5500:5550:5600))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge ADA0) (posedge CLKA) (50:60:70) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "MULT18X18D")
    (INSTANCE x.m)
    (DELAY
      (ABSOLUTE
        (IOPATH (posedge CLK0) P0 (578:656:735) (578:656:735))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE u.x_LUT4_Z)
    (DELAY
      (ABSOLUTE
        (IOPATH B F (200:218:236) (200:218:236))
        (IOPATH A F (200:218:236) (200:218:236))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE v.sum\$CCU2_COMB0)
    (DELAY
      (ABSOLUTE
        (IOPATH B FCO (175:311:447) (175:311:447))
        (IOPATH A FCO (175:311:447) (175:311:447))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE v.sum\$CCU2_COMB1)
    (DELAY
      (ABSOLUTE
        (IOPATH FCI FCO (0:0:0) (0:0:0))
        (IOPATH FCI F (295:349:443) (295:349:443))
      )
    )
  )
""" + "".join(f"""  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE {name}_TRELLIS_FF_Q)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK Q (430:477:{clk_to_q}) (430:477:{clk_to_q}))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) ({setup}:{setup}:{setup}) (0:0:0))
    )
  )
""" for name, clk_to_q, setup in [("u.a", 500, 0), ("u.b", 525, 0), ("w.c", 525, 200),
                                  ("w.d", 525, 0), ("w.e", 525, 0), ("w.f", 525, 0),
                                  ("u.g", 525, 0)]) + ")\n"

ARRIVALS_NS = {"w.c_TRELLIS_FF_Q/DI": 8.726, "w.d_TRELLIS_FF_Q/DI": 1.3,
               "w.e_TRELLIS_FF_Q/DI": 1.0, "w.f_TRELLIS_FF_Q/DI": 8.136,
               "u.g_TRELLIS_FF_Q/DI": 8.525}
SLACKS_NS = {"w.c_TRELLIS_FF_Q": -0.926, "u.g_TRELLIS_FF_Q": -0.525,
             "w.f_TRELLIS_FF_Q": -0.136}


def _analysed():
    graph = read_sdf_graph(SDF.splitlines())
    return graph, propagate(graph)


def _report(arrivals: dict[str, float] = ARRIVALS_NS) -> dict:
    endpoints = [{"cell": split_pin(pin)[0], "port": split_pin(pin)[1], "event": "posedge clk",
                  "delay": [arrival / 2, arrival]} for pin, arrival in arrivals.items()]
    return {"fmax": {"clk": {"achieved": 100.0, "constraint": 125.0}}, "critical_paths": [],
            "detailed_net_timings": [{"net": "n", "driver": "d", "port": "Q",
                                      "event": "posedge clk", "sources": [],
                                      "endpoints": endpoints}]}


def _run_dir(tmp_path: Path, arrivals: dict[str, float] = ARRIVALS_NS) -> Path:
    (tmp_path / "report.json").write_text(json.dumps(_report(arrivals)))
    (tmp_path / "timing.sdf").write_text(SDF)
    return tmp_path


def test_names_lose_their_escapes_and_split_at_the_last_divider():
    assert unescape(r"mem.bank\$dp") == "mem.bank$dp"
    assert unescape(r"a\/b\ c") == "a/b c"
    assert split_pin("a/b c/DOA0") == ("a/b c", "DOA0")
    graph = read_sdf_graph([r"(INSTANCE \$auto\$ff.cc:1\$7\/x)",
                            "(IOPATH CLK Q (1:2:3) (1:2:3))"])
    assert graph.pins == ["$auto$ff.cc:1$7/x/CLK", "$auto$ff.cc:1$7/x/Q"]


def test_parser_takes_the_max_of_both_transitions_and_sorts_launch_arcs():
    graph, _ = _analysed()
    pins = graph.pin_ids
    net = {(graph.pins[a], graph.pins[b]): ps
           for a, b, ps, is_net in zip(graph.arc_from, graph.arc_to, graph.arc_ps,
                                       graph.arc_is_net, strict=True) if is_net}
    assert net[("u.b_TRELLIS_FF_Q/Q", "v.sum$CCU2_COMB0/B")] == 640
    launches = {graph.pins[c]: (graph.pins[o], ps) for c, o, ps in
                zip(graph.launch_clock, graph.launch_to, graph.launch_ps, strict=True)}
    assert launches["mem.bank$dp/CLKA"] == ("mem.bank$dp/DOA0", 5600)
    assert launches["x.m/CLK0"] == ("x.m/P0", 735)  # written with (posedge CLK0)
    assert len(launches) == 2 + 7  # DP16KD, multiplier, seven flip-flops
    assert graph.setup_ps[pins["w.c_TRELLIS_FF_Q/DI"]] == 200
    assert graph.setup_ps[pins["mem.bank$dp/ADA0"]] == 70
    assert graph.clock_pin[pins["mem.bank$dp/ADA0"]] == pins["mem.bank$dp/CLKA"]


def test_arrivals_are_the_hand_sums():
    graph, arrivals = _analysed()
    for pin, arrival in ARRIVALS_NS.items():
        assert arrivals.arrival_ps[graph.pin_ids[pin]] == pytest.approx(arrival * 1000)
    assert arrivals.arrival_ps[graph.pin_ids["v.sum$CCU2_COMB0/FCO"]] == 7583
    assert arrivals.arrival_ps[graph.pin_ids["mem.bank$dp/ADA0"]] == -math.inf  # not driven
    assert arrivals.looped == 0


def test_worst_path_runs_from_the_block_ram_through_the_lut_and_the_adder():
    graph, arrivals = _analysed()
    path = worst_path(graph, arrivals, "w.c_TRELLIS_FF_Q/DI")
    assert path.launch_cell == "mem.bank$dp"
    assert path.arrival_ns == pytest.approx(8.726)
    assert [(s.kind, s.sink, round(s.delay_ns, 3)) for s in path.steps] == [
        ("clock-to-out", "mem.bank$dp/DOA0", 5.6),
        ("net", "u.x_LUT4_Z/B", 0.3),
        ("logic", "u.x_LUT4_Z/F", 0.236),
        ("net", "v.sum$CCU2_COMB0/A", 1.0),
        ("logic", "v.sum$CCU2_COMB0/FCO", 0.447),
        ("net", "v.sum$CCU2_COMB1/FCI", 0.0),
        ("logic", "v.sum$CCU2_COMB1/F", 0.443),
        ("net", "w.c_TRELLIS_FF_Q/DI", 0.7)]
    assert path.routed_nets == 3
    assert path.routing_ns == pytest.approx(2.0)
    assert path.logic_levels == 2
    assert path.blocks() == ["mem", "u", "v", "w"]
    assert worst_path(graph, arrivals, "w.d_TRELLIS_FF_Q/DI").routed_nets == 1
    assert worst_path(graph, arrivals, "w.e_TRELLIS_FF_Q/DI").launch_cell == "x.m"
    assert worst_path(graph, arrivals, "mem.bank$dp/ADA0") is None
    assert worst_path(graph, arrivals, "no/such") is None


def test_a_carry_ripple_folds_into_one_step():
    graph, arrivals = _analysed()
    steps = fold_carry_ripples(worst_path(graph, arrivals, "w.c_TRELLIS_FF_Q/DI").steps)
    assert [s.kind for s in steps] == ["clock-to-out", "net", "logic", "net", "logic", "carry",
                                       "logic", "net"]
    assert (steps[5].source, steps[5].sink) == ("v.sum$CCU2_COMB0/FCO", "v.sum$CCU2_COMB1/FCI")


def test_a_combinational_loop_is_counted_not_propagated():
    graph = read_sdf_graph([
        "(INSTANCE f)", "(IOPATH CLK Q (1:1:1))", "(INSTANCE l)", "(IOPATH A F (2:2:2))",
        "(IOPATH B F (2:2:2))", "(INSTANCE )",
        "(INTERCONNECT f/Q l/A (3:3:3))", "(INTERCONNECT l/F l/B (3:3:3))"])
    assert propagate(graph).looped == 2  # l/B and l/F wait on each other


def test_the_clock_pins_routed_delay_adds_to_the_launch():
    graph = read_sdf_graph(["(INSTANCE f)", "(IOPATH CLK Q (1:1:100))", "(INSTANCE )",
                            "(INTERCONNECT clkbuf/O f/CLK (10:20:30))",
                            "(INTERCONNECT f/Q g/DI (5:5:5))"])
    assert propagate(graph).arrival_ps[graph.pin_ids["g/DI"]] == 30 + 100 + 5


def test_an_sdf_without_clocked_arcs_is_a_clear_error():
    with pytest.raises(ConfigError, match="no clocked arcs"):
        read_sdf_graph(["(INSTANCE l)", "(IOPATH A F (2:2:2))"])


def test_arrivals_are_checked_against_the_report(tmp_path):
    run = analyse_run(_run_dir(tmp_path))
    assert (run.check.compared, run.check.matching, run.check.missing) == (5, 5, 0)
    graph, arrivals = _analysed()
    off = check_against_report(graph, arrivals, run.timing.endpoints[:1], tolerance_ns=0.0)
    assert off.matching == 1  # to the float: ns = ps / 1000 as nextpnr writes them
    wrong = dict(ARRIVALS_NS, **{"w.c_TRELLIS_FF_Q/DI": 8.8})
    with pytest.raises(ConfigError, match="only 4 of 5 endpoints"):
        analyse_run(_run_dir(tmp_path, wrong))
    assert analyse_run(_run_dir(tmp_path, wrong), min_share=0.8).check.worst == (
        ("w.c_TRELLIS_FF_Q/DI", pytest.approx(8.726), 8.8),)


def test_a_run_without_sdf_is_a_clear_error(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps(_report()))
    with pytest.raises(ConfigError, match="no timing.sdf"):
        analyse_run(tmp_path)


def test_failing_endpoints_group_by_launch_and_capture_block(tmp_path):
    run = analyse_run(_run_dir(tmp_path))
    failing = worst_failing(run.timing.endpoints)
    assert [(ep.cell, round(ep.slack_ns, 3)) for ep in failing] == list(SLACKS_NS.items())
    groups = group_by_boundary(failing, run.path_of)
    assert [(g.launch, g.capture, g.failing, round(g.worst_slack_ns, 3),
             round(g.total_negative_slack_ns, 3), dict(g.routed_nets), g.through_other)
            for g in groups] == [("mem", "w", 2, -0.926, -1.062, {3: 1, 2: 1}, 2),
                                 ("u", "u", 1, -0.525, -0.525, {1: 1}, 0)]
    deeper = group_by_boundary(failing, run.path_of, depth=2)
    assert {(g.launch, g.capture) for g in deeper} == {("mem", "w"), ("u", "u")}
    table = format_groups(groups).splitlines()
    assert table[0].split() == ["launch", "capture", "failing", "worst", "ns", "TNS", "ns",
                                "<=5", "nets", "6", "nets", "7", "nets", "8", "nets", "9",
                                "nets", ">=10", "nets", "via", "other"]
    assert table[1].split() == ["mem", "w", "2", "-0.93", "-1.1", "2", "0", "0", "0", "0", "0",
                                "2"]  # both through u
    assert table[-1].split() == ["total", "3", "-0.93", "-1.6", "3", "0", "0", "0", "0", "0",
                                 "2"]
    short = format_groups(groups, limit=1, markdown=True).splitlines()
    assert short[3].startswith("| (1 more groups) |  | 1 | -0.53 |")
    assert [ep.cell for ep in distinct_worst(failing, run.path_of, 2)] == [
        "w.c_TRELLIS_FF_Q", "u.g_TRELLIS_FF_Q"]


def test_script_prints_the_check_the_groups_and_the_worst_paths(tmp_path, capsys):
    run_dir = _run_dir(tmp_path)
    assert paths_main([str(run_dir), "--paths", "--worst", "1"]) == 0
    out = capsys.readouterr().out
    assert "match nextpnr's report at 5 of 5 endpoints" in out
    assert "w.c_TRELLIS_FF_Q/DI: slack -0.926 ns, arrival 8.726 ns, from mem.bank$dp; " \
           "3 routed nets (2.000 ns), 2 logic levels; through mem > u > v > w" in out
    assert "   0.700   8.726  net -> w.c_TRELLIS_FF_Q/DI" in out
    assert "u.g_TRELLIS_FF_Q/DI: slack" not in out  # --worst 1
    assert paths_main([str(run_dir), "--path", "u.g_TRELLIS_FF_Q"]) == 0
    assert "from u.b_TRELLIS_FF_Q; 1 routed nets (8.000 ns)" in capsys.readouterr().out
    assert paths_main([str(run_dir), "--path", "u.nothing"]) == 2
    assert "no timing endpoint in cell 'u.nothing'" in capsys.readouterr().err


def test_script_refuses_a_run_whose_arrivals_it_cannot_reproduce(tmp_path, capsys):
    wrong = {pin: arrival + 0.5 for pin, arrival in ARRIVALS_NS.items()}
    assert paths_main([str(_run_dir(tmp_path, wrong))]) == 2
    assert "reproduces nextpnr's arrival at only 0 of 5" in capsys.readouterr().err


def _keep_ecp5_run(verilog: Path, top: str, workspace: Path) -> Path:
    kept = workspace / "run"
    assert cli_main(["synth", str(verilog), "--top", top, "--flow", "ecp5", "--out-of-context",
                     "--clock-ns", "8", "--store", str(workspace / "s.sqlite"),
                     "--keep-run", str(kept)]) == 0
    return kept


@pytest.mark.synth
def test_a_kept_multiply_accumulate_run_reproduces_nextpnrs_arrivals(module_workspace):
    """The MAC (a MULT18X18D and flip-flops) through Yosys and nextpnr: every endpoint's
    arrival from the SDF equals the one in nextpnr's report."""
    source = module_workspace / "mac.v"
    source.write_text(amaranth_verilog.convert(MultiplyAccumulate(), name="mac"))
    run = analyse_run(_keep_ecp5_run(source, "mac", module_workspace), min_share=1.0)
    assert run.check.compared > 10 and run.check.matching == run.check.compared
    assert run.arrivals.looped == 0


@pytest.mark.synth
@pytest.mark.slow
def test_a_kept_2x2_accelerator_run_reproduces_nextpnrs_arrivals(tmp_path):
    """A 2x2 accelerator (block RAMs, LUT-RAM queues, carry chains, DSPs; about 4 minutes):
    all 14,000-odd arrivals match."""
    assert cli_main(["generate", "--pe", "2x2", "--target", "ecp5", "--spad-kib", "8",
                     "--acc-kib", "2", "--out", str(tmp_path / "gen")]) == 0
    run = analyse_run(_keep_ecp5_run(tmp_path / "gen" / "accelerator.v", "accelerator",
                                     tmp_path), min_share=1.0)
    assert run.check.compared > 10_000 and run.check.matching == run.check.compared
    assert run.arrivals.looped == 0


def test_the_benchmark_script_switches_to_this_report_with_paths(tmp_path):
    script = Path(__file__).parent.parent / "benchmarks" / "ecp5_failing_paths.py"
    run_dir = str(_run_dir(tmp_path))
    paths = subprocess.run([sys.executable, str(script), run_dir, "--paths", "--worst", "0"],
                           capture_output=True, text=True, check=True).stdout
    assert "match nextpnr's report at 5 of 5 endpoints" in paths
    blocks = subprocess.run([sys.executable, str(script), run_dir, "--signals", "0"],
                            capture_output=True, text=True).stdout
    assert "capture" not in blocks and "block" in blocks  # the per-block table without --paths
