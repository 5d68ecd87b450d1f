"""Running a Yosys script over one Verilog text and reading its cell statistics.

Both flows start the same way: write the design into the run directory, run a script that ends
in ``stat -json``, read the cell counts (and, with a liberty, the area) back. Yosys reports a
syntax error or an unknown top module as ``ERROR:`` and a non-zero exit, which `run_tool` turns
into a `ToolError` carrying those lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ToolError
from tensorforge.fpga.tools import YOSYS, ToolRun, run_tool

DESIGN_FILE = "design.v"
STAT_FILE = "stat.json"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class YosysStat:
    """What ``stat -json`` says about the synthesized top module (hierarchy included)."""

    cells: int
    cells_by_type: dict[str, int]
    area: float | None


def check_top_name(top: str) -> None:
    """Reject a top name that would not survive being spliced into a tool script."""
    if not _IDENTIFIER.fullmatch(top):
        raise ToolError(
            "yosys",
            f"the top module name {top!r} is not a plain Verilog identifier; pass the module "
            f"name as written after `module` in the source",
        )


def run_yosys(
    verilog: str | None,
    commands: list[str],
    *,
    run_dir: Path,
    timeout_s: float,
    log_name: str = "yosys",
) -> ToolRun:
    """Read ``verilog`` (as SystemVerilog, a superset) and run ``commands`` in ``run_dir``.

    With ``verilog=None`` nothing is read first: ``commands`` load the design themselves (a
    later step of a flow that continues from a saved design). ``log_name`` names the script
    and log files, so that several runs can share a directory.
    """
    script = list(commands)
    if verilog is not None:
        (run_dir / DESIGN_FILE).write_text(verilog)
        script.insert(0, f"read_verilog -sv {DESIGN_FILE}")
    script_name = f"{log_name}.ys"
    (run_dir / script_name).write_text("\n".join(script) + "\n")
    # Yosys writes its own log (-l): its console output stops after the first ABC run.
    return run_tool(YOSYS, ["-l", f"{log_name}.log", "-s", script_name], cwd=run_dir,
                    log_name=f"{log_name}.console", timeout_s=timeout_s,
                    own_log=f"{log_name}.log")


def stat_command(liberty: Path | None = None) -> str:
    """The script line that writes `read_stat`'s input."""
    liberty_option = f" -liberty {liberty}" if liberty else ""
    return f"tee -q -o {STAT_FILE} stat -json{liberty_option}"


def read_stat(run_dir: Path, top: str) -> YosysStat:
    """Parse the ``stat -json`` output in ``run_dir``."""
    path = run_dir / STAT_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ToolError("yosys", f"did not write readable statistics ({path}): {error}") from None
    section = data.get("design") or data.get("modules", {}).get(f"\\{top}")
    if section is None:
        raise ToolError("yosys", f"statistics in {path} have no entry for the design {top!r}")
    area = section.get("area")
    return YosysStat(
        cells=int(section.get("num_cells", 0)),
        cells_by_type={str(k): int(v) for k, v in section.get("num_cells_by_type", {}).items()},
        area=float(area) if area is not None else None,
    )
