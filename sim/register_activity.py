"""Switching activity of every register of the accelerator over one program's run.

Power follows what the flip-flops do, and the input ports alone say little about that (a
systolic array forwards operands and accumulates partial sums that no port shows). So the
accelerator is simulated with Verilator's toggle coverage (``--coverage-toggle``), in a model
of its own (`activity_model`, cached by content like every model, beside the plain one:
coverage slows a run down, so only runs that ask pay for it).

Toggle coverage counts the transitions of every bit of every signal exactly, in C++, with no
Python per cycle. Memory accesses are counted the same way: the simulated copy of the
accelerator has a one-bit register beside each clocked memory port that flips on every access
(`tensorforge.sim.memory_ports`), so its toggles are the port's accesses. (Verilator's line
coverage would count the ``if (enable)`` of each port too, but it puts no points on the
memory blocks of Amaranth's Verilog.)

The counts must cover the program's run only, not the reset, the image load or the register
reads around it. The run is exactly the time the simulation top runs on its own clock
(``free_run`` high, see `tensorforge.sim.accelerator_driver.AcceleratorDriver.free_running`),
so the activity model's top zeroes the counts when ``free_run`` rises and writes them to
`WINDOW_FILE` when it falls (Verilator's ``$c``, calling its coverage API), and counts the
clock cycles in between (``activity_cycles``). The simulation top's own parts (the Verilog
DRAM, the clock switch) are left out of coverage, so the file holds the accelerator alone.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tensorforge.config import AcceleratorConfig
from tensorforge.sim.memory_ports import MemoryPort, instrument
from tensorforge.sim.sim_top import (
    ACCELERATOR_INSTANCE,
    PUBLIC_SIGNALS,
    SIM_TOP,
    dram_verilog,
    wrapper_verilog,
)
from tensorforge.sim.sim_top import BUILD_OPTIONS as SIM_BUILD_OPTIONS

#: Where the activity model writes the counts of a run (in the simulator's directory).
WINDOW_FILE = "activity.dat"
#: The top's counter of clock cycles while ``free_run`` is high.
CYCLE_COUNTER = "activity_cycles"
#: Verilator skips toggle coverage of signals wider than ``--coverage-max-width`` (256 by
#: default; the accelerator's instruction words, buffer lines and a 16x16 array's partial sums,
#: 8192 bits, are wider) and of signals whose names start with ``_`` (Amaranth's ``_0_``, a
#: memory's read register): both are wanted, so the width is raised and
#: ``--coverage-underscore`` given. A flip-flop left uncovered still gets the mean rate.
COVERAGE_BUILD_OPTIONS = (*SIM_BUILD_OPTIONS, "--coverage-toggle", "--coverage-underscore",
                          "--coverage-max-width", "65536")

_CONTEXT = "vlSymsp->_vm_contextp__->coveragep()"
_WINDOW = f"""\
    // Activity window (tensorforge.sim.register_activity): coverage counts restart when the
    // top starts running on its own clock and are written when it stops.
    reg [63:0] {CYCLE_COUNTER} = 64'd0;
    always @(posedge clk) if (free_run) {CYCLE_COUNTER} <= {CYCLE_COUNTER} + 64'd1;
    always @(posedge free_run) $c("{_CONTEXT}->zero();");
    always @(negedge free_run)
        $c("{_CONTEXT}->forcePerInstance(true); {_CONTEXT}->write(\\"{WINDOW_FILE}\\");");
"""


def activity_top_verilog(config: AcceleratorConfig, accelerator_text: str) -> str:
    """The simulation top with the activity window, its own parts out of coverage, and the
    accelerator with its memory access counters (`tensorforge.sim.memory_ports`)."""
    from tensorforge.hw.accelerator import TOP_NAME

    wrapper = wrapper_verilog(config, accelerator_text)
    body, tail = wrapper.rsplit("endmodule", 1)
    counted, _ = instrument(accelerator_text, TOP_NAME)
    return "\n".join([
        "// verilator coverage_off",
        body + _WINDOW + "endmodule" + tail,
        dram_verilog(),
        "// verilator coverage_on",
        counted,
    ])


@functools.cache
def activity_model(config: AcceleratorConfig):
    """The Verilator model of the simulation top with coverage (built once, then cached)."""
    from tensorforge.sim.rtl_harness import build_model
    from tensorforge.sim.rtl_run import accelerator_verilog

    return build_model(activity_top_verilog(config, accelerator_verilog(config)), top=SIM_TOP,
                       build_options=COVERAGE_BUILD_OPTIONS, public=PUBLIC_SIGNALS)



_POINT = re.compile(r"^C '(.*)' (\d+)$")
# A toggle point as Verilator 5 writes it (fields f, l, n, t, page, o, h in this order); one
# regular expression over the whole file reads it several times faster than line by line.
_TOGGLE = re.compile(r"\x01t\x02toggle\x01page\x02[^\x01]*\x01o\x02([^\x01]*)"
                     r"\x01h\x02([^']*)' (\d+)$", re.MULTILINE)
_MANGLED = re.compile(r"__0([0-9A-Fa-f]{2})")
_SCOPE_PREFIX = f"{SIM_TOP}.{ACCELERATOR_INSTANCE}"


def _demangle(name: str) -> str:
    """Verilator's C++-safe name (``__024`` for ``$``, ``___05F`` for ``__``) as in the RTL."""
    return _MANGLED.sub(lambda match: chr(int(match[1], 16)), name)


def read_toggles(text: str) -> tuple[dict[str, int], frozenset[str]]:
    """Bit transitions (both directions) per signal bit of a coverage file of the accelerator,
    and the instance paths below the accelerator that hold them.

    Keys are the bit's name as Yosys names the flip-flop that holds it after flattening:
    the instance path below the accelerator, the signal, the bit (``compute.array.pe_0_0.acc
    [3]`` without the space; ``controller.busy`` for one bit; ``storage[2][5]`` for a bit of a
    memory word).
    """
    points = [(match[1], match[2], match[3]) for match in _TOGGLE.finditer(text)]
    if len(points) != text.count("\x01t\x02toggle\x01"):  # fields in another order
        points = list(_toggle_points(text))
    toggles: dict[str, int] = defaultdict(int)
    scopes = set()
    for comment, scope, count in points:
        if not (scope == _SCOPE_PREFIX or scope.startswith(_SCOPE_PREFIX + ".")):
            continue
        scope = scope[len(_SCOPE_PREFIX) + 1:]
        scopes.add(scope)
        signal = _demangle(comment.rsplit(":", 1)[0])
        toggles[f"{scope}.{signal}" if scope else signal] += int(count)
    return dict(toggles), frozenset(scopes)


#: The group of the accelerator's own (top-level) registers in `group_by_scope`.
TOP_SCOPE = "(top)"


def group_by_scope(values, scopes: frozenset[str], depth: int = 2) -> dict[str, float]:
    """``values`` (per signal bit) summed per instance path cut to ``depth`` levels: with
    depth 2, ``compute.array.pe_0_0.acc[3]`` counts under ``compute.array``, ``scratchpad.
    a_bank_q[0]`` under ``scratchpad``, a register of the accelerator itself under
    `TOP_SCOPE`. A bit's instance is the longest of ``scopes`` its name starts with, so the
    dots inside Amaranth's names of struct fields (``cmd__payload.opcode``) are not mistaken
    for instances."""
    totals: dict[str, float] = defaultdict(float)
    for bit, value in values.items():
        parts = bit.split("[", 1)[0].split(".")
        scope = next((".".join(parts[:k]) for k in range(len(parts) - 1, 0, -1)
                      if ".".join(parts[:k]) in scopes), "")
        key = ".".join(scope.split(".")[:depth]) if scope else TOP_SCOPE
        totals[key] += value
    return dict(sorted(totals.items()))


def _toggle_points(text: str):
    """``(comment, scope, count)`` of each toggle point, whatever the order of its fields."""
    for line in text.splitlines():
        point = _POINT.match(line)
        if point is None:
            continue
        fields = dict(item.split("\x02", 1) for item in point[1].split("\x01")[1:])
        if fields.get("t") == "toggle":
            yield fields["o"], fields.get("h", ""), point[2]


@dataclass(frozen=True)
class MemoryAccesses:
    """Accesses of one memory in a run, per port (``reads[i]``: read port i)."""

    reads: tuple[int, ...]
    writes: tuple[int, ...]

    def to_dict(self) -> dict[str, list[int]]:
        return {"reads": list(self.reads), "writes": list(self.writes)}


@dataclass(frozen=True)
class RegisterActivity:
    """What every register and memory of the accelerator did over ``cycles`` cycles of a run.

    ``toggles`` maps each signal bit (`read_toggles` names) to its transitions; it holds every
    signal Verilator kept, registers and wires alike: the power flow picks the flip-flops'
    (`tensorforge.sim.power`). ``accesses`` maps each memory (its Yosys name, as the ASIC
    flow's ``memory_map`` reports it) to its counted accesses.
    """

    cycles: int
    toggles: dict[str, int] = field(repr=False)
    accesses: dict[str, MemoryAccesses]
    scopes: frozenset[str] = field(default=frozenset(), repr=False)

    def rate(self, bit: str) -> float:
        """Transitions per clock cycle of one bit (OpenSTA's ``-activity``); 0 if unknown."""
        return self.toggles.get(bit, 0) / max(1, self.cycles)

    def by_scope(self, bits=None, depth: int = 2) -> dict[str, int]:
        """Transitions of ``bits`` (default: every signal bit) per instance path cut to
        ``depth`` levels (`group_by_scope`)."""
        chosen = self.toggles if bits is None else {b: self.toggles.get(b, 0) for b in bits}
        return {k: int(v) for k, v in group_by_scope(chosen, self.scopes, depth).items()}


def read_activity(path: Path, cycles: int, ports: tuple[MemoryPort, ...]) -> RegisterActivity:
    """The `RegisterActivity` of one coverage file (the window of one run of ``cycles``)."""
    toggles, scopes = read_toggles(path.read_text())
    accesses: dict[str, dict[str, list[int]]] = {}
    for port in ports:
        bit = f"{port.scope}.{port.counter}" if port.scope else port.counter
        counts = accesses.setdefault(port.memory, {"read": [], "write": []})[port.kind]
        counts.append(toggles.pop(bit, 0))
    return RegisterActivity(
        cycles=cycles,
        toggles=toggles,
        accesses={name: MemoryAccesses(tuple(counts["read"]), tuple(counts["write"]))
                  for name, counts in sorted(accesses.items())},
        scopes=scopes,
    )


def accelerator_ports(config: AcceleratorConfig) -> tuple[MemoryPort, ...]:
    """The memory ports of ``Accelerator(config)`` the activity model counts."""
    from tensorforge.hw.accelerator import TOP_NAME
    from tensorforge.sim.rtl_run import accelerator_verilog

    return instrument(accelerator_verilog(config), TOP_NAME)[1]
