"""`tensorforge build`: the ULX3S board top's pins, the progress it reports, and (slow) a real
bitstream of the smallest accelerator.
"""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from tensorforge.cli import main
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.fpga import progress as progress_module
from tensorforge.fpga.progress import StageProgress, log_phase
from tensorforge.fpga.ulx3s import Ulx3sTop, check_clock, platform_for
from tensorforge.hw.board.soc import SocOptions

CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 2, "cols": 2, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": 1024, "banks": 2, "accumulator": 1024},
})
HARDWARE_FLAGS = ["--pe", "2x2", "--spad", "1", "--acc", "1", "--banks", "2"]


def _constraints(lpf: str) -> dict[str, str]:
    """Port name -> site of each LOCATE line of an .lpf."""
    return dict(re.findall(r'LOCATE COMP "(\S+)" SITE "(\S+)";', lpf))


def test_ulx3s_top_uses_the_boards_clock_and_ftdi_uart_pins():
    plan = platform_for("ulx3s").prepare(Ulx3sTop(CONFIG, SocOptions(memory_bytes=4096)),
                                         name="top")
    lpf = plan.files["top.lpf"]
    sites = _constraints(lpf)
    # the ULX3S schematic: 25 MHz oscillator on G2, FTDI TXD -> FPGA M1, FPGA L4 -> FTDI RXD
    assert sites["clk25_0__io"] == "G2"
    assert sites["uart_0__rx__io"] == "M1"
    assert sites["uart_0__tx__io"] == "L4"
    assert 'FREQUENCY PORT "clk25_0__io" 25000000.0 HZ;' in lpf


def test_the_board_clock_is_25_mhz_and_boards_are_named():
    with pytest.raises(ConfigError, match="25 MHz"):
        check_clock(SocOptions(clock_hz=50e6))
    with pytest.raises(ConfigError, match="unknown board"):
        platform_for("icebreaker")


def test_log_phase_follows_nextpnr_through_pack_place_route():
    log = ["Info: Packing IOs..", "Info: Running main analytical placer", "Info: HeAP Placer",
           "Info: Max frequency for clock 'clk': 47.14 MHz", "Info: Routing globals...",
           "Info: Routing..", "Info: Max frequency for clock 'clk': 45.0 MHz"]
    seen = [log_phase("\n".join(log[: end + 1])) for end in range(len(log))]
    assert seen == ["pack", "place", "place", "timing", "route", "route", "timing"]
    assert log_phase("Info: reading the netlist") is None


def test_stage_progress_reports_each_stage_with_elapsed_time(tmp_path):
    stream = io.StringIO()
    progress = StageProgress("build", stream)
    log = tmp_path / "tool.log"

    def tool():
        log.write_text("Info: Packing IOs..\n")
        return 42

    with progress.stage("elaborate"):
        pass
    assert progress.run_tool("nextpnr", tool, log) == 42
    with pytest.raises(RuntimeError), progress.stage("ecppack"):
        raise RuntimeError("broken")
    lines = stream.getvalue().splitlines()
    assert re.fullmatch(r"\[build +\d+\.\d s\] elaborate \.\.\.", lines[0])
    assert re.fullmatch(r"\[build +\d+\.\d s\] elaborate done in \d+\.\d s", lines[1])
    assert any(line.endswith("nextpnr: pack") for line in lines)
    assert lines[-1].split("] ")[1].startswith("ecppack failed after")
    assert set(progress.seconds) == {"elaborate", "nextpnr"}


def test_a_long_phase_reports_the_logs_latest_line(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "POLL_S", 0.01)
    monkeypatch.setattr(progress_module, "HEARTBEAT_S", 0.05)
    stream = io.StringIO()
    log = tmp_path / "tool.log"

    def tool():
        log.write_text("Info: Running main analytical placer\n")
        for iteration in range(1, 4):
            time.sleep(0.1)
            with log.open("a") as handle:
                handle.write(f"Info:   at iteration #{iteration}: wirelen = {1000 - iteration}\n")

    StageProgress("build", stream).run_tool("nextpnr", tool, log)
    lines = stream.getvalue().splitlines()
    beats = [line for line in lines if "nextpnr: place, " in line]
    assert beats and all(re.search(r"place, \d+ s; Info:", line) for line in beats)
    assert "at iteration #" in beats[-1]


@pytest.mark.synth
@pytest.mark.slow
def test_build_writes_a_bitstream_that_meets_the_board_clock(tmp_path, capsys):
    """The smallest accelerator, 4 KiB of memory: Yosys, nextpnr and ecppack for real."""
    out = tmp_path / "board"
    status = main(["build", "--board", "ulx3s", *HARDWARE_FLAGS, "--memory-kib", "4",
                   "--out", str(out), "--json"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert status == 0, captured.err
    bitstream = (out / "accelerator.bit").read_bytes()
    # an ECP5 bitstream opens with a comment block (0xFF 0x00 ... 0x00 0xFF) and the preamble
    assert bitstream[:2] == b"\xff\x00" and b"\xff\xff\xbd\xb3" in bitstream[:1024]
    assert summary["timing_met"] and summary["fmax_mhz"] >= 25.0
    assert summary["brams"] >= 2 and summary["dsps"] >= 1
    for stage in ("elaborate", "yosys", "nextpnr", "ecppack"):
        assert f"] {stage} done in" in captured.err
    assert json.loads((out / "build.json").read_text()) == summary
