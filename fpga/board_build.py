"""A board bitstream: the SoC through Yosys, nextpnr-ecp5 and ecppack (the YoWASP builds).

The board's platform (amaranth-boards) turns the board top into RTLIL and a pin constraint
file (``.lpf``, with the clock's frequency); the flow then runs the same Yosys steps as the
ECP5 synthesis flow (`tensorforge.fpga.ecp5`: the DSP budget, ``synth_ecp5``), nextpnr with the
constraints, and ecppack. Everything lands in the output folder: the bitstream
``accelerator.bit``, the tool logs, and ``build.json`` (utilization, Fmax against the board
clock, the SoC's parameters). Each stage reports on stderr (`StageProgress`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.fpga.ecp5 import (
    DEFAULT_TIMEOUT_S,
    _read_nextpnr_report,
    dsp_budget,
    map_within_dsp_budget,
    nextpnr_device_flag,
)
from tensorforge.fpga.ecp5_fit import FitCheck
from tensorforge.fpga.progress import YOSYS_PHASES, StageProgress
from tensorforge.fpga.tools import ECPPACK, NEXTPNR_ECP5, run_tool
from tensorforge.fpga.ulx3s import PACKAGE, PARTS, Ulx3sTop, check_clock, platform_for
from tensorforge.hw.board.host_protocol import config_digest
from tensorforge.hw.board.soc import SocOptions

logger = logging.getLogger(__name__)

TOP = "top"  # the name amaranth's platform gives the board top
BITSTREAM = "accelerator.bit"
SUMMARY = "build.json"


@dataclass(frozen=True)
class BoardBuild:
    """What a board build made and measured."""

    board: str
    part: str
    bitstream: str
    clock_mhz: float
    fmax_mhz: float | None
    timing_met: bool
    luts: int
    ffs: int
    dsps: int
    brams: int
    lut_multipliers: int
    memory_bytes: int
    baud: int
    config: str
    config_digest: str
    stage_seconds: dict[str, float] = field(default_factory=dict)
    utilization: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return asdict(self)


def build_board(config: AcceleratorConfig, options: SocOptions, out: Path, *,
                board: str = "ulx3s", seed: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S,
                progress: StageProgress | None = None) -> BoardBuild:
    """Build ``out / BITSTREAM`` for ``config`` on ``board``; returns the measurements.

    Timing failure is reported (``timing_met`` False), not raised: the bitstream is still
    written, and the caller decides.
    """
    progress = progress or StageProgress("build")
    check_clock(options)
    platform = platform_for(board)
    part = PARTS[board]
    out.mkdir(parents=True, exist_ok=True)
    work = out / "build"
    work.mkdir(exist_ok=True)

    with progress.stage("elaborate"):
        plan = platform.prepare(Ulx3sTop(config, options), name=TOP)
        for name in (f"{TOP}.il", f"{TOP}.lpf"):
            (work / name).write_text(plan.files[name])

    def synthesize():
        mapped = map_within_dsp_budget(None, [f"read_rtlil {TOP}.il"], TOP,
                                       dsp_budget(part, None), work, timeout_s)
        return len(mapped.on_luts)

    # the flatten step logs to flatten.log and the synthesis to yosys.log: follow the second
    on_luts = progress.run_tool("yosys", synthesize, work / "yosys.log", YOSYS_PHASES)
    nextpnr_args = [
        nextpnr_device_flag(part), "--package", PACKAGE, "--speed", platform.speed,
        "--json", "netlist.json", "--lpf", f"{TOP}.lpf", "--textcfg", f"{TOP}.config",
        "--report", "report.json", "--seed", str(seed), "--timing-allow-fail",
    ]
    nextpnr = progress.run_tool(
        "nextpnr", lambda: run_tool(NEXTPNR_ECP5, nextpnr_args, cwd=work,
                                    log_name="nextpnr.log", timeout_s=timeout_s,
                                    watch=FitCheck(part, lut_multipliers=on_luts)),
        work / "nextpnr.log")
    with progress.stage("ecppack"):
        # YoWASP tools see only their working directory: pack there, then move the file
        run_tool(ECPPACK, ["--compress", "--input", f"{TOP}.config", "--bit", BITSTREAM],
                 cwd=work, log_name="ecppack.log", timeout_s=timeout_s)
        (work / BITSTREAM).replace(out / BITSTREAM)

    fmax_by_clock, _, utilization = _read_nextpnr_report(work / "report.json", nextpnr.log())
    fmax = min(fmax_by_clock.values()) if fmax_by_clock else None
    clock_mhz = options.clock_hz / 1e6
    result = BoardBuild(
        board=board, part=part, bitstream=str(out / BITSTREAM), clock_mhz=clock_mhz,
        fmax_mhz=fmax, timing_met=fmax is not None and fmax >= clock_mhz,
        luts=utilization.get("TRELLIS_COMB", 0), ffs=utilization.get("TRELLIS_FF", 0),
        dsps=utilization.get("MULT18X18D", 0), brams=utilization.get("DP16KD", 0),
        lut_multipliers=on_luts, memory_bytes=options.memory_bytes, baud=options.baud,
        config=config.describe(), config_digest=f"{config_digest(config):08x}",
        stage_seconds=dict(progress.seconds), utilization=utilization,
    )
    (out / SUMMARY).write_text(json.dumps(result.summary(), indent=2) + "\n")
    return result

