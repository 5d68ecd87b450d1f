"""A small reader for Liberty files: groups, attributes and lookup tables.

The IHP SRAM macros come with foundry Liberty files, and the ASIC flow needs a few figures out
of them before any tool runs: the area and leakage a macro adds, its pins (for the black-box
module Yosys keeps), its clock-to-output delay and setup, and the energy of a read or a write.
OpenSTA reads the same files for timing and power; this reader only has to agree with it on the
handful of attributes above.

The files are read as a tree of groups (``name (args) { ... }``), simple attributes
(``name : value ;``) and complex attributes (``name (args) ;``). The SRAM files leave out some
semicolons after ``when`` and ``sdf_cond``, as many generated Liberty files do; a simple
attribute also ends at the end of its line, which is what other readers accept too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tensorforge.errors import ConfigError

_TOKEN = re.compile(
    r'[ \t\r\f]*(?:(?P<comment>/\*.*?\*/|//[^\n]*)|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<continuation>\\\s*\n)|(?P<newline>\n)|(?P<punct>[(){}:;,])"
    r"|(?P<word>[^\s(){}:;,\"]+))",
    re.DOTALL,
)


@dataclass
class Group:
    """One Liberty group: ``kind (args) { attributes; subgroups }``."""

    kind: str
    args: list[str]
    attributes: dict[str, str] = field(default_factory=dict)
    complex_attributes: dict[str, list[str]] = field(default_factory=dict)
    groups: list[Group] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.args[0] if self.args else ""

    def children(self, kind: str) -> Iterator[Group]:
        return (group for group in self.groups if group.kind == kind)

    def child(self, kind: str, name: str | None = None) -> Group | None:
        return next((g for g in self.children(kind) if name is None or g.name == name), None)

    def number(self, attribute: str, default: float | None = None) -> float:
        value = self.attributes.get(attribute)
        if value is None:
            if default is None:
                raise ConfigError(f"Liberty {self.kind} {self.name!r} has no {attribute}")
            return default
        return float(value)


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            if text[position:].strip():
                where = text[position:position + 40]
                raise ConfigError(f"Liberty text not understood at {where!r}")
            return
        position = match.end()
        kind = match.lastgroup
        if kind in ("comment", "continuation"):
            continue
        value = match[kind]
        if kind == "string":
            value = value[1:-1]
        yield kind, value


def parse(text: str) -> Group:
    """The top group (the ``library``) of a Liberty text."""
    tokens = list(_tokens(text))
    position = 0

    def skip_newlines() -> None:
        nonlocal position
        while position < len(tokens) and tokens[position][0] == "newline":
            position += 1

    def parse_group_body(group: Group) -> None:
        nonlocal position
        while True:
            skip_newlines()
            if position >= len(tokens):
                raise ConfigError(f"Liberty group {group.kind} {group.name!r} is not closed")
            kind, value = tokens[position]
            if (kind, value) == ("punct", "}"):
                position += 1
                return
            if (kind, value) == ("punct", ";"):
                position += 1
                continue
            name = value
            position += 1
            skip_newlines()
            kind, value = tokens[position]
            if value == ":":
                position += 1
                parts = []
                while position < len(tokens) and tokens[position][1] not in (";", "}") \
                        and tokens[position][0] != "newline":
                    parts.append(tokens[position][1])
                    position += 1
                group.attributes[name] = " ".join(parts)
            elif value == "(":
                position += 1
                args, current = [], ""
                while tokens[position][1] != ")":
                    kind, value = tokens[position]
                    if (kind, value) == ("punct", ","):
                        args.append(current)
                        current = ""
                    elif kind != "newline":
                        current += value
                    position += 1
                if current:
                    args.append(current)
                position += 1
                skip_newlines()
                if position < len(tokens) and tokens[position][1] == "{":
                    position += 1
                    child = Group(name, args)
                    parse_group_body(child)
                    group.groups.append(child)
                else:
                    group.complex_attributes[name] = args
            else:
                raise ConfigError(f"Liberty: unexpected {value!r} after {name!r}")

    root = Group("", [])
    tokens.append(("punct", "}"))  # the top level is read as the body of an unnamed group
    parse_group_body(root)
    library = root.child("library")
    if library is None:
        raise ConfigError("Liberty text has no library group")
    return library


@dataclass(frozen=True)
class Table:
    """A lookup table of one or two indices (``values[i][j]`` at ``index_1[i]``, ``index_2[j]``)."""

    index_1: tuple[float, ...]
    index_2: tuple[float, ...]
    values: tuple[tuple[float, ...], ...]

    def at(self, x: float, y: float = 0.0) -> float:
        """Bilinear interpolation, clamped to the table's range."""
        def locate(index: tuple[float, ...], v: float) -> tuple[int, int, float]:
            if len(index) < 2:
                return 0, 0, 0.0
            v = min(max(v, index[0]), index[-1])
            high = min(max(bisect.bisect_left(index, v), 1), len(index) - 1)
            low = high - 1
            return low, high, (v - index[low]) / (index[high] - index[low])

        i0, i1, fx = locate(self.index_1, x)
        if len(self.values) == 1 and len(self.index_1) != 1:  # one row: indexed by index_1
            row = self.values[0]
            return row[i0] + (row[i1] - row[i0]) * fx
        j0, j1, fy = locate(self.index_2, y)
        v00, v01 = self.values[i0][j0], self.values[i0][j1]
        v10, v11 = self.values[i1][j0], self.values[i1][j1]
        top = v00 + (v01 - v00) * fy
        bottom = v10 + (v11 - v10) * fy
        return top + (bottom - top) * fx


def table(group: Group) -> Table:
    """The numbers of a lookup-table group (``cell_rise``, ``rise_power``, ...)."""
    def numbers(args: list[str] | None) -> tuple[float, ...]:
        return tuple(float(v) for arg in args or [] for v in arg.split(",") if v.strip())

    rows = tuple(
        tuple(float(v) for v in row.split(",") if v.strip())
        for row in group.complex_attributes.get("values", [])
    )
    return Table(numbers(group.complex_attributes.get("index_1")),
                 numbers(group.complex_attributes.get("index_2")), rows)
