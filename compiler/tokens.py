"""Instruction emission with VTA dependency tokens, for `tensorforge.compiler.codegen`.

Instructions are kept as field dicts, grouped into unit *tasks* (a run of consecutive
instructions of one unit), until `Emitter.build`: a task waits (pop) for the other unit's task
that last touched a buffer region it is about to use, and that task sends (push) exactly one
token for it. Because every unit runs its queue in order, waiting for the newest such task
suffices, and the k-th pop of a queue always matches its k-th push.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tensorforge.isa import Instruction

LOAD, COMPUTE, STORE = 0, 1, 2  # the units, in queue order


@dataclass
class Group:
    unit: int
    first: int  # instruction positions
    last: int


@dataclass
class Emitter:
    """Instructions as field dicts, grouped into unit tasks, with the token bookkeeping."""

    kinds: list[type[Instruction]] = field(default_factory=list)
    fields: list[dict] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    waited: dict[tuple[int, int], int] = field(default_factory=dict)
    writer: dict[tuple, int] = field(default_factory=dict)
    reader: dict[tuple, int] = field(default_factory=dict)
    open_group: int | None = None

    def begin(self, unit: int) -> int:
        self.groups.append(Group(unit, len(self.fields), len(self.fields) - 1))
        self.open_group = len(self.groups) - 1
        return self.open_group

    def add(self, unit: int, kind: type[Instruction], **values) -> None:
        self.kinds.append(kind)
        self.fields.append(values)

    def end(self, reads: list[tuple] = (), writes: list[tuple] = ()) -> None:
        """Close the open task: wait for the tasks it conflicts with, then record its regions."""
        gid = self.open_group
        self.open_group = None
        group = self.groups[gid]
        group.last = len(self.fields) - 1
        if group.last < group.first:
            return
        producers = [self.writer[r] for r in reads if r in self.writer]
        producers += [table[r] for r in writes for table in (self.reader, self.writer)
                      if r in table]
        newest: dict[int, int] = {}  # one wait per unit: its newest conflicting task
        for producer in producers:
            unit = self.groups[producer].unit
            newest[unit] = max(newest.get(unit, -1), producer)
        for producer in newest.values():
            self._wait(gid, producer)
        for region in reads:
            self.reader[region] = gid
        for region in writes:
            self.writer[region] = gid

    def _wait(self, consumer: int, producer: int) -> None:
        cunit, punit = self.groups[consumer].unit, self.groups[producer].unit
        if cunit == punit or producer <= self.waited.get((cunit, punit), -1):
            return
        self.waited[(cunit, punit)] = producer
        pop = "pop_prev" if punit == cunit - 1 else "pop_next"
        push = "push_next" if cunit == punit + 1 else "push_prev"
        self.fields[self.groups[consumer].first][pop] = True
        self.fields[self.groups[producer].last][push] = True

    def build(self) -> list[Instruction]:
        """The instructions; equal ones share one (immutable) object, built and checked once."""
        made: dict[tuple, Instruction] = {}
        program = []
        for kind, values in zip(self.kinds, self.fields, strict=True):
            key = (kind, *values.items())
            instruction = made.get(key)
            if instruction is None:
                instruction = made[key] = kind(**values)
            program.append(instruction)
        return program
