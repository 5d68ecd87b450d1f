"""Per-endpoint slack of a kept ECP5 run, grouped by hierarchy (`fpga.ecp5_timing`).

The report, SDF and log here are written by hand in nextpnr's formats, with slacks worked out
by hand from nextpnr's formula: slack = period - (arrival - (capture clock delay - setup)).
"""

from __future__ import annotations

import json

import pytest

from tensorforge.errors import ConfigError
from tensorforge.fpga.ecp5_timing import (
    TOP_LEVEL,
    UNNAMED,
    block_of,
    endpoint_slacks,
    format_table,
    group_by_block,
    histogram_lines,
    log_histogram_lines,
    read_run,
    read_sdf,
    signal_of,
)
from tensorforge.fpga.ecp5_timing import main as failing_paths_main


def _net(driver_event: str, *sinks: tuple[str, str, float, str]) -> dict:
    return {"net": "n", "driver": "d", "port": "Q", "event": driver_event, "sources": [],
            "endpoints": [{"cell": cell, "port": port, "event": event,
                           "delay": [arrival / 2, arrival]}
                          for cell, port, arrival, event in sinks]}


POS = "posedge clk"
REPORT = {
    "fmax": {"clk": {"achieved": 70.0, "constraint": 125.0}},  # an 8 ns period
    "critical_paths": [],
    "detailed_net_timings": [
        _net(POS, ("compute.acc_TRELLIS_FF_Q", "DI", 9.0, POS),         # 8 - 9 = -1
               ("compute.acc_TRELLIS_FF_Q_1", "LSR", 7.8, POS)),      # 8 - 7.8 - 0.424
        _net(POS, ("compute.array.pe_0_1.sum_TRELLIS_FF_Q", "M", 12.5, POS)),  # -4.5
        _net(POS, ("load.mem.0.0$RAMW_BLOCK0", "WRE", 7.5, POS)),     # 8 - 7.5 - 0.392
        _net(POS, ("scratchpad.bank0.q_TRELLIS_FF_Q", "DI", 8.3, POS)),  # +0.2 clock delay
        _net("negedge clk", ("flag_TRELLIS_FF_Q", "DI", 3.0, POS)),  # half period: 4 - 3
        _net(POS, ("$auto$ff.cc:266:slice$7_TRELLIS_FF_Q", "CE", 8.25, POS)),  # -0.25
        _net("posedge other", ("compute.x_TRELLIS_FF_Q", "DI", 50.0, POS)),  # cross-clock
        _net("<async>", ("compute.y_TRELLIS_FF_Q", "DI", 50.0, POS)),  # asynchronous
    ],
}

SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT a/Q compute.acc_TRELLIS_FF_Q/DI (10:20:30) (10:20:30))
        (INTERCONNECT clkbuf/Z scratchpad.bank0.q_TRELLIS_FF_Q/CLK (500:600:700) (500:600:700))
        (INTERCONNECT clkbuf/Z load.mem.0.0\$RAMW_BLOCK0/WCK (0:0:0) (0:0:0))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE compute.acc_TRELLIS_FF_Q_1)
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) (0:0:0) (267:285:303))
      (SETUPHOLD (posedge LSR) (posedge CLK) (271:347:424) (0:0:0))
      (SETUPHOLD (negedge LSR) (posedge CLK) (271:347:424) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE load.mem.0.0\$RAMW_BLOCK0)
    (TIMINGCHECK
      (SETUPHOLD (posedge WRE) (posedge WCK) (254:323:392) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE scratchpad.bank0.q_TRELLIS_FF_Q)
    (TIMINGCHECK
      (SETUPHOLD (posedge DI) (posedge CLK) (0:0:0) (267:285:303))
    )
  )
)
"""

EXPECTED_SLACK = {
    ("compute.acc_TRELLIS_FF_Q", "DI"): -1.0,
    ("compute.acc_TRELLIS_FF_Q_1", "LSR"): 8 - 7.8 - 0.424,
    ("compute.array.pe_0_1.sum_TRELLIS_FF_Q", "M"): -4.5,
    ("load.mem.0.0$RAMW_BLOCK0", "WRE"): 8 - 7.5 - 0.392,
    ("scratchpad.bank0.q_TRELLIS_FF_Q", "DI"): 8 - 8.3 + 0.5,
    ("flag_TRELLIS_FF_Q", "DI"): 1.0,
    ("$auto$ff.cc:266:slice$7_TRELLIS_FF_Q", "CE"): -0.25,
}


def test_sdf_gives_setup_max_and_clock_pin_delay_min_with_names_unescaped():
    sdf = read_sdf(SDF)
    assert sdf.setup_ns[("compute.acc_TRELLIS_FF_Q_1", "LSR")] == pytest.approx(0.424)
    assert sdf.setup_ns[("compute.acc_TRELLIS_FF_Q_1", "DI")] == 0.0
    assert sdf.setup_ns[("load.mem.0.0$RAMW_BLOCK0", "WRE")] == pytest.approx(0.392)
    assert sdf.clock_port[("load.mem.0.0$RAMW_BLOCK0", "WRE")] == "WCK"
    assert sdf.clock_delay_ns == {("scratchpad.bank0.q_TRELLIS_FF_Q", "CLK"): 0.5,
                                  ("load.mem.0.0$RAMW_BLOCK0", "WCK"): 0.0}


def test_slack_of_every_same_clock_endpoint():
    endpoints = endpoint_slacks(REPORT, read_sdf(SDF))
    got = {(ep.cell, ep.port): ep.slack_ns for ep in endpoints}
    assert got.keys() == EXPECTED_SLACK.keys()  # cross-clock and asynchronous ones left out
    for key, slack in EXPECTED_SLACK.items():
        assert got[key] == pytest.approx(slack), key


def test_without_sdf_setup_and_clock_delay_are_zero():
    got = {(ep.cell, ep.port): ep.slack_ns for ep in endpoint_slacks(REPORT, None)}
    assert got[("compute.acc_TRELLIS_FF_Q_1", "LSR")] == pytest.approx(0.2)
    assert got[("scratchpad.bank0.q_TRELLIS_FF_Q", "DI")] == pytest.approx(-0.3)


def test_report_without_detailed_timings_is_a_clear_error():
    with pytest.raises(ConfigError, match="--detailed-timing-report"):
        endpoint_slacks({"fmax": {}, "critical_paths": []}, None)


@pytest.mark.parametrize(("cell", "depth", "block"), [
    ("compute.target_TRELLIS_FF_Q_3", 1, "compute"),
    ("compute.array.pe_0_1.sum_TRELLIS_FF_Q", 1, "compute"),
    ("compute.array.pe_0_1.sum_TRELLIS_FF_Q", 2, "compute.array"),
    ("compute.target_TRELLIS_FF_Q_3", 2, "compute"),
    ("scratchpad.bank0.mem.0.0$RAMW_BLOCK0", 2, "scratchpad.bank0"),
    ("acc_read__resp__valid$269_TRELLIS_FF_Q", 1, TOP_LEVEL),
    ("$auto$ff.cc:266:slice$7_TRELLIS_FF_Q", 1, UNNAMED),
])
def test_block_is_the_dotted_prefix_without_the_signal(cell, depth, block):
    assert block_of(cell, depth) == block


def test_signal_drops_the_cell_suffixes():
    assert signal_of("compute.target_TRELLIS_FF_Q_3") == "compute.target"
    assert signal_of("load.mem.0.0$RAMW_BLOCK0") == "load.mem.0.0"
    assert signal_of("acc_read__resp__valid$269_TRELLIS_FF_Q") == "acc_read__resp__valid"


def test_grouping_counts_failing_endpoints_worst_slack_and_bins_per_block():
    blocks = {b.block: b for b in group_by_block(endpoint_slacks(REPORT, read_sdf(SDF)),
                                                 depth=1, bins_ns=(-4.0, -1.0, 0.0))}
    assert set(blocks) == {"compute", "load", "scratchpad", TOP_LEVEL, UNNAMED}
    compute = blocks["compute"]
    # -1.0 (in [-1, 0)), -0.224, -4.5 (below -4)
    assert (compute.endpoints, compute.failing) == (3, 3)
    assert compute.worst_slack_ns == pytest.approx(-4.5)
    assert compute.total_negative_slack_ns == pytest.approx(-1.0 - 0.224 - 4.5)
    assert compute.bins == [1, 0, 2]
    assert [ep.cell for ep in compute.worst] == ["compute.array.pe_0_1.sum_TRELLIS_FF_Q",
                                                 "compute.acc_TRELLIS_FF_Q",
                                                 "compute.acc_TRELLIS_FF_Q_1"]
    assert (blocks["load"].failing, blocks["scratchpad"].failing) == (0, 0)
    assert blocks["scratchpad"].worst_slack_ns == pytest.approx(0.2)
    assert blocks[UNNAMED].bins == [0, 0, 1]
    # worst block (most failing endpoints) first
    assert next(iter(group_by_block(endpoint_slacks(REPORT, None)))).block == "compute"


def test_bins_must_end_at_zero():
    with pytest.raises(ConfigError, match="end at 0"):
        group_by_block([], bins_ns=(-2.0, -1.0))


def test_histogram_rows_are_nextpnrs():
    # slacks -1, 0.5 and 2 ns: bins of ceil(3001 / 20) = 151 ps from -1000 ps; 2000 ps falls
    # in bin 19, 500 ps in bin 9; one endpoint per bin is one star (max 1 < 60 columns)
    rows = histogram_lines([-1.0, 0.5, 2.0])
    assert len(rows) == 20
    assert rows[0] == "[ -1000,   -849) |* "
    assert rows[1] == "[  -849,   -698) | "
    assert rows[9] == "[   359,    510) |* "
    assert rows[19] == "[  1869,   2020) |* "


def test_histogram_bars_scale_to_sixty_columns_with_a_plus_for_remainders():
    rows = histogram_lines([0.0] * 120 + [1.9] * 61)
    assert rows[0] == "[     0,     96) |" + "*" * 60 + " "
    assert rows[19] == "[  1824,   1920) |" + "*" * 30 + "+"  # 61 * 60 / 120 = 30.5


def _log_with(rows: list[str]) -> str:
    body = "\n".join(f"Info: {row}" for row in rows)
    return ("Info: Slack histogram:\nInfo:  legend: * represents 9 endpoint(s)\n"
            "Info: [ -1, 0) |*\n\nInfo: Routing..\n"  # the one before routing
            "Info: Slack histogram:\nInfo:  legend: * represents 1 endpoint(s)\n"
            "Info:          + represents [1,1) endpoint(s)\n"
            f"{body}\n1 warning, 0 errors\n")


def test_log_histogram_is_the_last_one():
    rows = ["[ -1000,   -849) |* ", "[  -849,   -698) | ", "[  1869,   2020) |*+"]
    assert log_histogram_lines(_log_with(rows)) == [row.rstrip() for row in rows]


def _write_run(path, report, sdf, slacks_for_log):
    path.mkdir()
    (path / "report.json").write_text(json.dumps(report))
    if sdf is not None:
        (path / "timing.sdf").write_text(sdf)
    (path / "nextpnr.log").write_text(_log_with(histogram_lines(slacks_for_log)))


def test_a_run_checks_itself_against_nextpnrs_histogram(tmp_path):
    _write_run(tmp_path / "good", REPORT, SDF, EXPECTED_SLACK.values())
    run = read_run(tmp_path / "good")
    assert run.histogram_matches is True and run.has_sdf
    assert run.clocks == {"clk": 70.0}
    # the same log without the SDF's setup times and clock delay: the check fails
    _write_run(tmp_path / "nosdf", REPORT, None, EXPECTED_SLACK.values())
    assert read_run(tmp_path / "nosdf").histogram_matches is False


def test_script_prints_the_table_and_fails_on_a_mismatch(tmp_path, capsys):
    _write_run(tmp_path / "good", REPORT, SDF, EXPECTED_SLACK.values())
    assert failing_paths_main([str(tmp_path / "good"), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "matches nextpnr's histogram: yes" in out
    # bins <-4, -4..-3, -3..-2, -2..-1, -1..-0.5, -0.5..0: -4.5, -1.0 and -0.224 in compute
    assert "| compute | 3 | 3 | -4.50 | -5.7 | 1 | 0 | 0 | 0 | 1 | 1 |" in out
    assert "| total | 7 | 4 | -4.50 | -6.0 | 1 | 0 | 0 | 0 | 1 | 2 |" in out
    assert "    2  worst  -1.00 ns  compute.acc" in out
    _write_run(tmp_path / "nosdf", REPORT, None, EXPECTED_SLACK.values())
    assert failing_paths_main([str(tmp_path / "nosdf")]) == 1


def test_script_on_a_run_without_detailed_timings_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "report.json").write_text(json.dumps({"fmax": {}, "critical_paths": []}))
    assert failing_paths_main([str(tmp_path)]) == 2
    assert "--detailed-timing-report" in capsys.readouterr().err


def test_markdown_and_text_tables_have_the_same_rows():
    blocks = group_by_block(endpoint_slacks(REPORT, read_sdf(SDF)))
    text = format_table(blocks).splitlines()
    markdown = format_table(blocks, markdown=True).splitlines()
    assert len(markdown) == len(text) + 1  # the separator row
    assert text[-1].split() == markdown[-1].strip("| ").replace(" | ", " ").split()


def test_an_endpoint_listed_per_launch_domain_counts_once():
    # nextpnr names only the first entry's launch (the net's event): here the input port's
    # <async> path, left out; the second entry's launch is taken to be the capture clock
    report = {"fmax": REPORT["fmax"], "detailed_net_timings": [
        _net("<async>", ("acc_TRELLIS_FF_Q", "DI", 14.0, POS),
             ("acc_TRELLIS_FF_Q", "DI", 4.9, POS)),
        _net(POS, ("b_TRELLIS_FF_Q", "DI", 9.5, POS), ("b_TRELLIS_FF_Q", "DI", 8.5, POS)),
    ]}
    endpoints = endpoint_slacks(report, None)
    assert [(ep.cell, ep.slack_ns, ep.launch_known) for ep in endpoints] == [
        ("acc_TRELLIS_FF_Q", pytest.approx(3.1), False),
        ("b_TRELLIS_FF_Q", pytest.approx(-1.5), True),
        ("b_TRELLIS_FF_Q", pytest.approx(-0.5), False),
    ]
    (top,) = group_by_block(endpoints)
    assert (top.endpoints, top.failing, top.bins[-3:]) == (2, 1, [1, 0, 0])
    assert top.worst_slack_ns == pytest.approx(-1.5)
