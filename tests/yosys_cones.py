"""Yosys checks on the logic in front of a unit's outputs, for tests of the ``ecp5`` target's
registered handshakes: `cone` selects the cells an output's value comes through in its cycle,
up to flip-flops; `failed_checks` runs ``select -assert-*`` lines on a flattened design."""

from __future__ import annotations

from pathlib import Path

from tensorforge.errors import ToolError
from tensorforge.fpga.tools import YOSYS, run_tool


def cone(port: str) -> str:
    """The cells output ``port``'s value comes through in its cycle, up to flip-flops."""
    return f"o:{port} %ci*:-[D,EN,CLK,SRST,ARST,CE,AD,ALOAD,SET,CLR]"


def failed_checks(tmp_path: Path, name: str, verilog: str, top: str, checks: list[str]) -> str:
    """Runs ``checks`` on ``verilog`` (top module ``top``, small memories mapped to flip-flops);
    '' when all hold, else the end of Yosys's log, which names the failed assertion."""
    (tmp_path / f"{name}.v").write_text(verilog)
    (tmp_path / f"{name}.ys").write_text("\n".join([
        f"read_verilog {name}.v", f"hierarchy -top {top}", "proc", "flatten", "memory",
        "opt -fast", "opt_clean -purge", *checks]))
    try:
        run_tool(YOSYS, ["-q", "-s", f"{name}.ys"], cwd=tmp_path, log_name=f"{name}.log",
                 timeout_s=300)
    except ToolError:
        return (tmp_path / f"{name}.log").read_text()[-2000:]
    return ""
