"""Fold runs of LOADs (STOREs) into one repeated instruction (``controller.repeat``).

The code generator moves a tile as one LOAD or STORE per run of lines it can address at one
DRAM stride: a convolution's input window (several image rows, each with its halo) or a C
tile of several output rows is one instruction per row. On an accelerator built with
``controller.repeat`` the ISA's ``repeat`` field says "and as many more, each ``run_lines``
lines and ``repeat_stride`` rows further on" (`tensorforge.isa`), so those instructions fold
into one, and the program fetches fewer bytes.

A *group* is a stretch of one unit's queue (LOADs or STOREs) with tokens only at its ends:
its first may pop, its last may push, none in between, as the code generator emits one tile
transfer. Within a group order does not matter (the instructions write distinct lines, or
distinct DRAM bytes), so they are taken by line (a LOAD of zero lines only joins the LOAD
before it as its ``pad_after``), and two that follow each other fold when
they are the same but for their line and DRAM address, which move on by one run. The folded
group takes the place of its first instruction in the program, the group's pops on its first
instruction and its pushes on its last; `isa.expand` of it writes the same lines from the
same DRAM bytes (or zeros) as the group did.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from tensorforge.compiler.field_limits import LIMITS, MAX_PAD
from tensorforge.config import AcceleratorConfig
from tensorforge.isa import Buffer, Instruction, Load, Opcode, Store, field_offsets

_MOVED = {"line", "dram_addr", "repeat", "repeat_stride", "pop_prev", "pop_next", "push_prev",
          "push_next"}


def fold_repeats(instructions: list[Instruction], config: AcceleratorConfig
                 ) -> list[Instruction]:
    """``instructions`` with foldable runs of LOADs and STOREs folded (none without
    ``controller.repeat``)."""
    if not config.controller.repeat:
        return list(instructions)
    groups: list[list[Instruction]] = []
    open_group: dict[type, list[Instruction]] = {}  # unit -> its group still growing
    for ins in instructions:
        kind = type(ins)
        group = open_group.get(kind)
        if (isinstance(ins, Load | Store) and group is not None and not _pushes(group[-1])
                and not ins.pop_prev and not ins.pop_next):
            group.append(ins)
            continue
        open_group[kind] = [ins]
        groups.append(open_group[kind])
    return [folded for group in groups for folded in _fold_group(group, config)]


def _fold_group(group: list[Instruction], config: AcceleratorConfig) -> list[Instruction]:
    """One unit's instructions with tokens only at the ends (the first may pop, the last may
    push), folded. They touch distinct lines and their order is free, so they are taken by
    line: a tile's runs, wherever its loops put them, then lie one after the other."""
    if len(group) == 1:
        return group
    first, last = group[0], group[-1]
    tokens = {"pop_prev": first.pop_prev, "pop_next": first.pop_next,
              "push_prev": last.push_prev, "push_next": last.push_next}
    quiet = [replace(ins, pop_prev=False, pop_next=False, push_prev=False, push_next=False)
             for ins in group]
    if _disjoint(quiet, config):  # by line within each buffer, the buffers in their order
        buffers = {}
        for ins in quiet:
            buffers.setdefault(_buffer(ins), len(buffers))
        quiet = _absorb_padding(sorted(quiet, key=lambda i: (buffers[_buffer(i)], i.line)))
    folded: list[Instruction] = []
    for ins in quiet:
        merged = _fold(folded[-1], ins, config) if folded else None
        if merged is None:
            folded.append(ins)
        else:
            folded[-1] = merged
    folded[0] = replace(folded[0], pop_prev=tokens["pop_prev"], pop_next=tokens["pop_next"])
    folded[-1] = replace(folded[-1], push_prev=tokens["push_prev"],
                         push_next=tokens["push_next"])
    return folded


def _absorb_padding(group: list[Instruction]) -> list[Instruction]:
    """A LOAD of zero lines only (no rows) right after another LOAD's lines becomes that
    LOAD's ``pad_after``: the same lines, zero, in one instruction, and two such pairs can
    then fold (a padded window row is data then zeros)."""
    merged: list[Instruction] = []
    for ins in group:
        last = merged[-1] if merged else None
        if (isinstance(ins, Load) and isinstance(last, Load) and not ins.rows
                and not last.repeat and ins.buffer is last.buffer
                and ins.line == last.line + last.run_lines()
                and last.pad_after + ins.pad_before + ins.pad_after <= MAX_PAD):
            merged[-1] = replace(last, pad_after=last.pad_after + ins.pad_before
                                 + ins.pad_after)
        else:
            merged.append(ins)
    return merged


def _disjoint(group: list[Instruction], config: AcceleratorConfig) -> bool:
    """Whether the group's lines, and a STORE group's DRAM bytes, do not overlap, so that its
    order is free."""
    lines = sorted((_buffer(ins), ins.line, ins.line + ins.run_lines()) for ins in group)
    writes = sorted(
        (ins.dram_addr,
         ins.dram_addr + ((ins.rows - 1) * ins.stride + ins.row_len) * _element_bytes(ins, config))
        for ins in group if isinstance(ins, Store) and ins.rows)
    return (all(a[0] != b[0] or a[2] <= b[1] for a, b in itertools.pairwise(lines))
            and all(end <= start for (_, end), (start, _) in itertools.pairwise(writes)))


def _buffer(ins: Instruction) -> Buffer:
    """The memory whose lines the instruction names (a STORE reads the accumulator)."""
    return ins.buffer if isinstance(ins, Load) else Buffer.ACC


def _pushes(ins: Instruction) -> bool:
    return ins.push_prev or ins.push_next


def _fold(earlier: Load | Store, later: Load | Store, config: AcceleratorConfig
           ) -> Load | Store | None:
    """``earlier`` with ``later`` as one more run, or None where they do not fold."""
    if later.repeat or _fixed(earlier) != _fixed(later) or not later.stride:
        return None
    row_bytes = later.stride * _element_bytes(later, config)
    runs = earlier.repeat + 1
    if later.line != earlier.line + runs * earlier.run_lines():
        return None
    distance = later.dram_addr - earlier.dram_addr
    if earlier.repeat:
        if distance != runs * earlier.repeat_stride * row_bytes:
            return None
        stride_rows = earlier.repeat_stride
    else:
        if distance <= 0 or distance % row_bytes:
            return None
        stride_rows = distance // row_bytes
    most_runs, most_stride = repeat_capacity(later.opcode)
    if runs > most_runs or stride_rows > most_stride:
        return None
    return replace(earlier, repeat=runs, repeat_stride=stride_rows)


def repeat_capacity(opcode: Opcode) -> tuple[int, int]:
    """The largest ``repeat`` and ``repeat_stride`` an ``opcode`` instruction holds (its
    field widths), which bound what folds: here and in the batch model's
    `TransferCounter.folds`."""
    return LIMITS[(opcode, "repeat")], LIMITS[(opcode, "repeat_stride")]


def _fixed(ins: Load | Store) -> tuple:
    """The fields every run of a repeated instruction shares."""
    return tuple((name, getattr(ins, name)) for name in field_offsets(ins.opcode)
                 if name not in _MOVED and name != "opcode")


def _element_bytes(ins: Load | Store, config: AcceleratorConfig) -> int:
    from tensorforge.sim.axi_traffic import line_geometry  # the DMA's own reading of a row

    return line_geometry(config, ins)[1]
