"""Count every memory access of a run: one-bit counters beside each memory port of the RTL.

Macro access energy is charged per access, so a run must say how often each memory was read
and written, exactly. Amaranth writes every clocked memory port as an ``if (enable)`` in an
``always @(posedge clk)`` block (writes: ``mem[addr][lane] <= data``, one ``if`` per lane;
reads: ``data <= mem[addr]``). `instrument` finds those ports in the accelerator's Verilog
and adds, per port, a register that flips on each clock edge the port is used: its toggle
count (which the activity model's toggle coverage records for every register) is then the
number of accesses. A write port whose lanes have separate enables counts one access when
any lane is written, as a macro is accessed once per line whatever its byte mask. Only the
simulation copy is instrumented; synthesis sees the Verilog unchanged.

Asynchronous reads (``assign data = mem[addr]``) are not counted: a macro cannot do them, so
those memories are flip-flops, and their power is in the logic's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Prefix of the counter registers (never an Amaranth name: Amaranth escapes or prefixes none
#: of its names this way).
COUNTER_PREFIX = "tf_access__"

_MODULE = re.compile(r"^module\s+(\\?\S+)\s*\(", re.MULTILINE)
_ARRAY = re.compile(r"^\s*reg\s+(?:\[\d+:\d+\]\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\[\d+:\d+\];",
                    re.MULTILINE)
_BLOCK = re.compile(r"^  always @\(posedge (\w+)\) begin\n(.*?)^  end\n", re.MULTILINE | re.DOTALL)
_IF = re.compile(r"^\s*if \((.*)\)(?: begin)?\s*$")


@dataclass(frozen=True)
class MemoryPort:
    """One clocked port of a memory: ``memory`` is its Yosys name (instance path + array)."""

    memory: str
    kind: str  # "read" or "write"
    index: int
    counter: str  # the counter register's name in the module

    @property
    def scope(self) -> str:
        """The instance path of the module that holds the memory ('' for the top)."""
        return self.memory.rpartition(".")[0]


def instance_path(module: str, top: str) -> str:
    """Amaranth's module name (``\\top.a.b``) as an instance path below the top (``a.b``)."""
    name = module.lstrip("\\")
    return "" if name == top else name.removeprefix(f"{top}.")


def _ports_of_block(body: str, arrays: set[str]) -> list[tuple[str, str, list[str]]]:
    """``(array, kind, conditions)`` of each port in one clocked block."""
    ports: dict[tuple[str, str], list[str]] = {}
    condition = None
    for line in body.splitlines():
        found = _IF.match(line)
        if found:
            condition = found[1]
            continue
        if "<=" not in line:
            continue
        target, source = line.split("<=", 1)
        for array in arrays:
            reference = re.compile(rf"(?<![\w$\\]){array}\[")
            kind = ("write" if reference.search(target) else
                    "read" if reference.search(source) else None)
            if kind is None:
                continue
            key = (array, kind if kind == "write" else f"read:{target.strip()}")
            ports.setdefault(key, []).append(condition or "1'b1")
        condition = None
    return [(array, kind.split(":")[0], conditions) for (array, kind), conditions in ports.items()]


def instrument(verilog: str, top: str) -> tuple[str, tuple[MemoryPort, ...]]:
    """``verilog`` with an access counter beside each clocked memory port, and the ports."""
    starts = [match for match in _MODULE.finditer(verilog)]
    pieces, ports, position = [], [], 0
    for number, match in enumerate(starts):
        end = verilog.find("\nendmodule", match.end())
        limit = starts[number + 1].start() if number + 1 < len(starts) else len(verilog)
        if end < 0 or end > limit:
            continue
        body = verilog[match.end():end]
        arrays = set(_ARRAY.findall(body))
        if not arrays:
            continue
        scope = instance_path(match[1], top)
        counters, numbers = [], {}
        for block in _BLOCK.finditer(body):
            clock = block[1]
            for array, kind, conditions in _ports_of_block(block[2], arrays):
                index = numbers.get((array, kind), 0)
                numbers[(array, kind)] = index + 1
                counter = f"{COUNTER_PREFIX}{array}__{kind}{index}"
                enable = " | ".join(f"({condition})" for condition in conditions)
                counters.append(f"  reg {counter} = 1'b0;\n  always @(posedge {clock})\n"
                                f"    if ({enable}) {counter} <= ~{counter};\n")
                memory = f"{scope}.{array}" if scope else array
                ports.append(MemoryPort(memory, kind, index, counter))
        pieces += [verilog[position:end], "\n", *counters]
        position = end
    pieces.append(verilog[position:])
    return "".join(pieces), tuple(ports)
