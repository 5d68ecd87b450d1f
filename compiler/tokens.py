"""Instruction emission with VTA dependency tokens, for `tensorforge.compiler.codegen`.

Instructions are kept as field dicts, grouped into unit *tasks* (a run of consecutive
instructions of one unit), until `Emitter.build`: a task waits (pop) for the other unit's task
that last touched a buffer region it is about to use, and that task sends (push) exactly one
token for it. A region is a buffer half ``(role, slot)`` or a chunk of one, ``(role, slot,
((index, first block, blocks), ...))``, of a tile cut along one index or two: tasks on
disjoint chunks need not wait for each other, but a task on the whole half waits for every
chunk of it. Because
every unit runs its queue in order, waiting for the newest such task suffices, and the k-th
pop of a queue always matches its k-th push.
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
    parts: dict[tuple, set[tuple]] = field(default_factory=dict)  # buffer half -> its parts
    open_group: int | None = None

    def begin(self, unit: int) -> int:
        self.groups.append(Group(unit, len(self.fields), len(self.fields) - 1))
        self.open_group = len(self.groups) - 1
        return self.open_group

    def add(self, unit: int, kind: type[Instruction], **values) -> None:
        self.kinds.append(kind)
        self.fields.append(values)

    def end(self, reads: list[tuple] = (), writes: list[tuple] = (),
            after: list[int | None] = ()) -> int | None:
        """Close the open task: wait for the tasks it conflicts with (and the tasks ``after``
        names, of a neighbouring unit), then record its regions. Returns the task's number
        (None if it is empty)."""
        gid = self.open_group
        self.open_group = None
        group = self.groups[gid]
        group.last = len(self.fields) - 1
        if group.last < group.first:
            return None
        producers = [self.writer[r] for region in reads for r in self._related(region)
                     if r in self.writer]
        producers += [table[r] for region in writes for r in self._related(region)
                      for table in (self.reader, self.writer) if r in table]
        producers += [task for task in after if task is not None]
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
        for region in (*reads, *writes):
            if len(region) > 2:
                self.parts.setdefault(region[:2], set()).add(region)
        return gid

    def _related(self, region: tuple) -> list[tuple]:
        """The regions that overlap ``region``: itself, its whole buffer half if it is a part
        (``(role, slot, cuts)``) and the parts of that half it may share lines with, every
        part of it recorded so far if it is a whole half."""
        if len(region) > 2:
            return [region, region[:2], *(p for p in self.parts.get(region[:2], ())
                                          if _overlap(p[2], region[2]))]
        return [region, *self.parts.get(region, ())]

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


def _overlap(part: tuple, other: tuple) -> bool:
    """Whether two chunks may share lines: on every index both are cut along, their blocks
    overlap (chunks cut along different indices always may)."""
    other_cuts = {index: (first, blocks) for index, first, blocks in other}
    for index, first, blocks in part:
        if index in other_cuts:
            other_first, other_blocks = other_cuts[index]
            if not (first < other_first + other_blocks and other_first < first + blocks):
                return False
    return True
