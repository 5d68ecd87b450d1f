"""Which mapping each layer of a chain gets, and how each layer reads its predecessor.

`chain` weighs every direct tensorize choice of every layer (`mappers.choice_mappings`, each
also with row-major regions where its regions are tile-major) by their DRAM layouts alone
(`program_layout.region_layouts`: no program is generated to compare them), picks the mappings of
least total estimated cycles with as few breaks as possible (dynamic programming along the
chain), and only then generates the chosen programs, each producer with its consumer's
input region as its output layout. A link is:

* a `DramLayout`: the producer STOREs into the consumer's input region (the same innermost
  dimension, and the consumer's line blocks or none: `program_layout.check_output_layout`), which
  may be padded (torch's padding) or hold the tensor zero-padded (the zoo's pre-padded
  inputs, `input_offsets`);
* ``"alias"``: the two regions are alike byte for byte (a flatten);
* None: a host re-layout, which ends the device segment.

A residual add (`compiler.residual`) reads its predecessor's output as the second half of
its channel-stacked input (a `DramLayout` link like any other, placed past the skip's
channels), and its skip as the first half, which is either byte for byte the input region
of the layer after the skip's producer (`shares_input`), or, where nobody else reads the
skip, a region the producer STOREs into. A layer re-reading an earlier output (a
projection shortcut, marked ``"reread"``) reads it where that tensor's first reader does.
Those constraints join layers that are not neighbours (`_Tie`), so across each cluster of
overlapping ties (a ResNet block) the chain is solved once per combination of the tied
layers' mappings, with their partners' options narrowed (`_on_device`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.mappers import choice_mappings, default_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_room import generate_with_room
from tensorforge.compiler.output_stage import OutputStage, first_reserve, reserve_accumulator
from tensorforge.compiler.program import Program
from tensorforge.compiler.program_layout import region_layouts
from tensorforge.compiler.quantize import QuantLayer
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.memory import MemorySystem

BREAK_COST = 1e15  # a host re-layout outweighs any cycles a better mapping saves

Link = DramLayout | str | None


@dataclass(frozen=True)
class _Candidate:
    cost: float
    mapping: Mapping
    tile_major: bool
    input: DramLayout  # the layer's A region
    output: DramLayout  # its C region, unpadded

    @property
    def fused(self) -> bool:
        return bool(self.mapping.groups)


def stage(layer: QuantLayer) -> OutputStage | None:
    """The layer's output stage; None for one that stores its ``acc_bits`` accumulator (a
    multi-stage workload's last stage: `compiler.stage_chain`)."""
    return None if layer.params is None else OutputStage(layer.params, layer.channel)


def _reserve(layer: QuantLayer, config: AcceleratorConfig) -> int:
    """Accumulator lines to leave the parameter blocks (`output_stage.first_reserve`)."""
    output = stage(layer)
    return 0 if output is None else first_reserve(output.channels(layer.workload), config)


def _candidates(layer: QuantLayer, config: AcceleratorConfig, memory: MemorySystem
                ) -> list[_Candidate]:
    """The layer's best mapping per direct tensorize choice, with its regions tile-major
    and (if that differs) row-major, a hair dearer on a tie; im2col only if none runs."""
    workload = layer.workload
    room = reserve_accumulator(config, _reserve(layer, config))
    narrow = layer.params is not None
    found = []
    for cost, mapping in choice_mappings(workload, room, (), memory):
        for tile_major in (True, False):
            regions = region_layouts(workload, mapping, config, tile_major=tile_major,
                                     narrow_output=narrow)
            found.append(_Candidate(cost * (1 if tile_major else 1 + 1e-9), mapping, tile_major,
                                    regions["A"], regions["C"]))
            if all(x.line_block == 1 for x in regions.values()):
                break  # row-major already
    if not found:  # no direct choice: the host lowers the input (im2col), a re-layout
        mapping = default_mapping(workload, room, memory)
        regions = region_layouts(workload, mapping, config, narrow_output=narrow)
        found.append(_Candidate(0.0, mapping, True, regions["A"], regions["C"]))
    return found


def _generate(layer: QuantLayer, candidate: _Candidate, config: AcceleratorConfig,
              memory: MemorySystem, output_layout: DramLayout | None) -> Program:
    """The candidate's program; where its parameter blocks turn out not to fit, the same
    tensorize choice mapped again with the room they need (its layouts do not change)."""
    if layer.params is None:
        return generate(layer.workload, candidate.mapping, config,
                        tile_major=candidate.tile_major, output_layout=output_layout)

    def remap(room: AcceleratorConfig) -> Mapping:
        again = [m for _, m in choice_mappings(layer.workload, room, candidate.mapping.groups,
                                               memory) if m.choice == candidate.mapping.choice]
        if not again:
            raise MappingError(f"{layer.name}: the output stage's parameters do not fit "
                               "beside its tiles; use a larger accumulator")
        return again[0]

    return generate_with_room(layer.workload, candidate.mapping, config, stage(layer), remap,
                              tile_major=candidate.tile_major, output_layout=output_layout)


def input_offsets(produced: tuple[int, ...], read: tuple[int, ...]) -> tuple[int, ...] | None:
    """Where a tensor of shape ``produced`` lies in an input of shape ``read`` that holds it
    zero-padded (the zoo's pre-padded inputs; equal shapes for torch's, whose padding is the
    workload's): the padding before it per dimension, half the difference rounded up (as
    torch pads, a stride-2 window leaving the last row out); None if ``read`` is smaller or
    of another rank."""
    if len(produced) != len(read) or any(r < p for p, r in zip(produced, read, strict=True)):
        return None
    return tuple((r - p + 1) // 2 for p, r in zip(produced, read, strict=True))


def _writes_into(out: DramLayout, into: DramLayout, before: tuple[int, ...] | None
                 ) -> DramLayout | None:
    """``into`` as the region a producer whose STOREs write ``out`` fills, its tensor placed
    ``before`` (per dimension) inside; None where the STOREs cannot write it
    (`program_layout.check_output_layout`'s rule)."""
    if before is not None and (
            out.kind == into.kind == "dense" and out.order[-1:] == into.order[-1:]
            and into.line_block in (1, out.line_block) and out.elem_bytes == into.elem_bytes):
        return replace(into, low=tuple(low - b for low, b in zip(into.low, before,
                                                                  strict=True)))
    return None


def _half(produced: tuple[int, ...], stacked: tuple[int, ...], half: int
          ) -> tuple[int, ...] | None:
    """Where an add's operand of shape ``produced`` lies in its ``stacked`` input: past the
    skip's channels for the residual (``half`` 1), the spatial padding around both."""
    spatial = input_offsets(produced[1:], stacked[1:])
    return None if spatial is None else (half * (stacked[0] - produced[0]), *spatial)


def _link(producer: tuple[QuantLayer, _Candidate], consumer: tuple[QuantLayer, _Candidate],
          flatten: bool) -> Link:
    """How the consumer reads the producer's output (module docstring)."""
    (made, mine), (used, theirs) = producer, consumer
    if mine.fused or theirs.fused:
        return None
    if used.inputs and used.kind != "add":  # it reads an earlier output (`_reread`)
        return "reread"
    produced, read = made.workload.shapes["C"], used.workload.shapes["A"]
    out, into = mine.output, theirs.input
    before = _half(produced, read, 1) if used.kind == "add" else input_offsets(produced, read)
    written = None if flatten else _writes_into(out, into, before)
    if written is not None:
        return written
    if out.nbytes != into.nbytes or math.prod(produced) != math.prod(read):
        return None
    same = _byte_map(made.workload, out, "C") == _byte_map(used.workload, into, "A")
    return "alias" if same else None


def _byte_map(workload: Workload, layout: DramLayout, tensor: str) -> bytes:
    """Which element (row-major number + 1, 0: padding) lies at each place of ``layout``."""
    shape = workload.shapes[tensor]
    numbers = np.arange(1, math.prod(shape) + 1).reshape(shape)
    access = next(a for a in (*workload.inputs, workload.output) if a.tensor == tensor)
    return replace(layout, base=0, elem_bytes=8).pack(numbers, access, workload.sizes)


def _named(layer: QuantLayer, function, *args):
    """``function(*args)``, a `MappingError` naming the layer it was about."""
    try:
        return function(*args)
    except MappingError as error:
        if str(error).startswith(layer.name):
            raise
        raise MappingError(f"{layer.name}: {error}") from error


def _joined(run: list[tuple[QuantLayer, bool]], position: int, before: _Candidate,
            candidate: _Candidate, cut: frozenset[int]) -> Link:
    """How layer ``position`` reads its predecessor (None where ``cut``: a host stack)."""
    if position in cut:
        return None
    return _link((run[position - 1][0], before), (run[position][0], candidate), run[position][1])


def _cheapest(run: list[tuple[QuantLayer, bool]], options: list[list[_Candidate]],
              cut: frozenset[int] = frozenset()) -> tuple[float, list[_Candidate]]:
    """The options of least total cost along ``run``, a broken link costing `BREAK_COST`."""
    # best[i][c]: (total cost, previous option) of the chain ending in option c of layer i
    best = [[(c.cost, -1) for c in options[0]]]
    for position in range(1, len(run)):
        row = []
        for candidate in options[position]:
            total, previous = min(
                (best[-1][p][0] + (0 if _joined(run, position, before, candidate, cut)
                                   else BREAK_COST), p)
                for p, before in enumerate(options[position - 1]))
            row.append((total + candidate.cost, previous))
        best.append(row)
    picks = [min(range(len(best[-1])), key=lambda c: best[-1][c][0])]
    for position in range(len(run) - 1, 0, -1):
        picks.append(best[position][picks[-1]][1])
    return best[-1][picks[0]][0], [options[i][c] for i, c in enumerate(reversed(picks))]


def _links(run: list[tuple[QuantLayer, bool]], chosen: list[_Candidate],
           cut: frozenset[int] = frozenset()) -> list[Link]:
    return [None] + [_joined(run, i, chosen[i - 1], chosen[i], cut) for i in range(1, len(run))]


def _placed_map(layer: QuantLayer, candidate: _Candidate, tensor: tuple[int, ...],
                before: tuple[int, ...]) -> bytes:
    """Which element of a ``tensor``-shaped input (row-major number + 1; 0: anything else)
    lies at each place of the layer's ``A`` region, the tensor placed ``before`` in its A."""
    numbers = np.zeros(layer.workload.shapes["A"], dtype=np.int64)
    numbers[tuple(slice(b, b + n) for b, n in zip(before, tensor, strict=True))] = (
        np.arange(1, math.prod(tensor) + 1).reshape(tensor))
    access = next(a for a in layer.workload.inputs if a.tensor == "A")
    return bytes(replace(candidate.input, base=0, elem_bytes=8).pack(numbers, access,
                                                                     layer.workload.sizes))


def shares_input(reader: tuple[QuantLayer, _Candidate], other: tuple[QuantLayer, _Candidate]
                 ) -> bool:
    """Whether ``other`` (a residual add, or a layer re-reading a tensor: a projection
    shortcut) finds the tensor that ``reader`` reads in place at the same bytes: for an add,
    its stacked region begins with the reader's region; else the two regions are alike."""
    (used, theirs), (layer, mine) = reader, other
    if theirs.fused or mine.fused:
        return False
    tensor = used.workload.shapes["A"]
    inner = _placed_map(used, theirs, tensor, (0,) * len(tensor))
    read = layer.workload.shapes["A"]
    before = _half(tensor, read, 0) if layer.kind == "add" else input_offsets(tensor, read)
    if before is None:
        return False
    outer = _placed_map(layer, mine, tensor, before)
    if layer.kind == "add":
        return outer[:len(inner)] == inner  # inner holds every element
    return outer == inner


def _into_skip(producer: tuple[QuantLayer, _Candidate], add: tuple[QuantLayer, _Candidate]
               ) -> DramLayout | None:
    """The add's stacked region as the skip's producer STOREs it (its first half), where the
    skip has no other reader; None where its STOREs cannot write it."""
    (made, mine), (layer, theirs) = producer, add
    if mine.fused or theirs.fused:
        return None
    before = _half(made.workload.shapes["C"], layer.workload.shapes["A"], 0)
    return _writes_into(mine.output, theirs.input, before)


@dataclass(frozen=True)
class _Tie:
    """A layer whose input another layer also reads (`pinned`, an add or a re-reader) ties
    the options of ``partner``: the tensor's first reader (``store`` False) or, for a skip
    nobody else reads, its producer, which then STOREs into the add's region."""

    pinned: int
    partner: int
    store: bool
    span: tuple[int, int]  # the links from the tensor's producer to ``pinned``: all in place

    def fits(self, layers: list[QuantLayer], partner: _Candidate, pinned: _Candidate) -> bool:
        pair = ((layers[self.partner], partner), (layers[self.pinned], pinned))
        return _into_skip(*pair) is not None if self.store else shares_input(*pair)


def _ties(layers: list[QuantLayer]) -> list[_Tie] | None:
    """Each add's and re-reader's tie (`_Tie`); None where a tensor comes from outside the
    run (the host then stacks or repacks it)."""
    names = [x.name for x in layers]
    ties = []
    for position, layer in enumerate(layers):
        if not layer.inputs:
            continue
        source = layer.inputs[0]
        if source not in names[:position - 1 if layer.kind == "add" else position]:
            return None
        producer = names.index(source)
        reader = producer + 1
        rereads = reader < position and (layers[reader].inputs or layers[reader].kind == "add")
        if layer.kind != "add" and (rereads or reader >= position):
            return None
        store = layer.kind == "add" and rereads
        ties.append(_Tie(position, producer if store else reader, store, (producer + 1,
                                                                          position)))
    return ties


def _clusters(ties: list[_Tie]) -> list[tuple[int, int, list[_Tie]]]:
    """The ties grouped where the positions they constrain overlap: ``(first, last, ties)``,
    ``first`` the earliest partner or span start, ``last`` the latest pinned layer, in chain
    order. Clusters constrain disjoint stretches of the chain (in a ResNet, one block each)."""
    clusters: list[tuple[int, int, list[_Tie]]] = []
    for tie in sorted(ties, key=lambda t: min(t.partner, t.span[0])):
        first = min(tie.partner, tie.span[0])
        if clusters and first <= clusters[-1][1]:
            start, end, members = clusters[-1]
            clusters[-1] = (start, max(end, tie.pinned), [*members, tie])
        else:
            clusters.append((first, tie.pinned, [tie]))
    return clusters


#: a row of the dynamic programme: per option of one layer, the least total cost of the chain
#: up to it and the options taken (None: unreachable)
_Row = list[tuple[float, tuple[_Candidate, ...] | None]]


def _extend(run: list[tuple[QuantLayer, bool]], row: _Row | None, position: int,
            candidates: list[_Candidate], held: frozenset[int], joined) -> _Row:
    """The row of ``position`` from the row before it: each candidate after its cheapest
    predecessor (the first on a tie), a broken link costing `BREAK_COST`, and none allowed
    where ``held`` (a link a tie needs in place)."""
    if row is None:
        return [(c.cost, (c,)) for c in candidates]
    extended = []
    for candidate in candidates:
        total, path = math.inf, None
        for cost, before in row:
            if before is None:
                continue
            link = joined(position, before[-1], candidate)
            if link is None and position in held:
                continue
            if (cost + (0 if link else BREAK_COST)) < total:
                total, path = cost + (0 if link else BREAK_COST), before
        extended.append((total + candidate.cost, None if path is None else (*path, candidate)))
    return extended


def _on_device(run: list[tuple[QuantLayer, bool]], options: list[list[_Candidate]]
               ) -> tuple[list[_Candidate], list[Link], dict[int, DramLayout]] | None:
    """The cheapest options with every residual add and re-reader on the device, reading
    its tensors where they lie (`_Tie`). A dynamic programme along the chain; across each
    cluster of overlapping ties (`_clusters`) it runs once per combination of the cluster's
    pinned layers' options, their partners' options narrowed to those that fit, and keeps
    per option of the cluster's last layer the cheapest. So the work grows with the
    combinations of one cluster (a ResNet block: at most an add and a re-reader), not of the
    whole network. None where no combination chains; else also the output regions of skip
    producers that STORE into an add's region."""
    layers = [layer for layer, _ in run]
    ties = _ties(layers)
    if ties is None:
        return None
    held = frozenset(p for tie in ties for p in range(tie.span[0], tie.span[1] + 1))
    links: dict[tuple[int, int, int], Link] = {}

    def joined(position: int, before: _Candidate, candidate: _Candidate) -> Link:
        key = (position, id(before), id(candidate))
        if key not in links:
            links[key] = _joined(run, position, before, candidate, frozenset())
        return links[key]

    starts = {first: (last, members) for first, last, members in _clusters(ties)}
    row: _Row | None = None
    position = 0
    while position < len(run):
        if position not in starts:
            row = _extend(run, row, position, options[position], held, joined)
            position += 1
            continue
        last, members = starts[position]
        ends: _Row = [(math.inf, None)] * len(options[last])
        for picks in itertools.product(*(options[tie.pinned] for tie in members)):
            narrowed = {}
            for tie, pick in zip(members, picks, strict=True):
                narrowed[tie.pinned] = [pick]
                narrowed[tie.partner] = [c for c in narrowed.get(tie.partner,
                                                                 options[tie.partner])
                                         if tie.fits(layers, c, pick)]
            inner = row
            for step in range(position, last + 1):
                inner = _extend(run, inner, step, narrowed.get(step, options[step]), held,
                                joined)
            for cost, path in inner:
                index = next(i for i, c in enumerate(options[last]) if c is path[-1]) if (
                    path is not None) else None
                if index is not None and cost < ends[index][0]:
                    ends[index] = (cost, path)
        row, position = ends, last + 1
    total, chosen = min(row, key=lambda entry: entry[0])
    if chosen is None or total == math.inf:
        return None
    chosen = list(chosen)
    stores = {tie.partner: _into_skip((layers[tie.partner], chosen[tie.partner]),
                                      (layers[tie.pinned], chosen[tie.pinned]))
              for tie in ties if tie.store}
    return chosen, [None] + [joined(i, chosen[i - 1], chosen[i])
                             for i in range(1, len(run))], stores


def chain(run: list[tuple[QuantLayer, bool]], config: AcceleratorConfig,
          memory: MemorySystem) -> list[list[tuple[QuantLayer, Program, Link]]]:
    """``run``'s layers (each with whether a flatten precedes it) compiled, cut where a link
    breaks; each entry ``(layer, program, how it reads its predecessor)``. Residual adds
    and re-readers run on the device reading their tensors where they lie (`_on_device`)
    where every one can; else each starts a program whose input the host packs from the
    int8 tensors (``stack``, ``reread``: exact)."""
    if not run:
        return []
    layers = [layer for layer, _ in run]
    options = [_named(layer, _candidates, layer, config, memory) for layer in layers]
    placed = _on_device(run, options)
    if placed is not None:
        chosen, links, stores = placed
    else:
        cut = frozenset(p for p, x in enumerate(layers) if x.inputs)
        chosen, stores = _cheapest(run, options, cut)[1], {}
        links = _links(run, chosen, cut)
    groups: list[list] = []
    for position, layer in enumerate(layers):
        after = stores.get(position, links[position + 1] if position + 1 < len(run) else None)
        program = _named(layer, _generate, layer, chosen[position], config, memory,
                         after if isinstance(after, DramLayout) else None)
        if links[position] is None:
            groups.append([])
        groups[-1].append((layer, program, links[position]))
    return groups
