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
channels), and its skip as the first half, which must be byte for byte the input region of
the layer after the skip's producer (`shares_skip`): that constraint joins two layers that
are not neighbours, so the chain is solved once per choice of the adds' mappings, with the
skip readers' options narrowed to those that fit.
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


def _link(producer: tuple[QuantLayer, _Candidate], consumer: tuple[QuantLayer, _Candidate],
          flatten: bool) -> Link:
    """How the consumer reads the producer's output (module docstring)."""
    (made, mine), (used, theirs) = producer, consumer
    if mine.fused or theirs.fused:
        return None
    produced, read = made.workload.shapes["C"], used.workload.shapes["A"]
    out, into = mine.output, theirs.input
    before = input_offsets(produced, read)
    if used.kind == "add":  # the residual: the stacked tensor's second half of channels
        spatial = input_offsets(produced[1:], read[1:])
        before = None if spatial is None else (read[0] - produced[0], *spatial)
    if not flatten and before is not None and (
            out.kind == into.kind == "dense" and out.order[-1:] == into.order[-1:]
            and into.line_block in (1, out.line_block)
            and out.elem_bytes == into.elem_bytes):  # `program_layout.check_output_layout`'s rule
        return replace(into, low=tuple(low - b for low, b in zip(into.low, before,
                                                                  strict=True)))
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


def _on_device(run: list[tuple[QuantLayer, bool]], options: list[list[_Candidate]]
               ) -> tuple[list[_Candidate], list[Link]] | None:
    """The cheapest options with every residual add on the device, sharing its skip's
    region (`shares_skip`): each combination of the adds' options is tried with the skip
    readers' options that fit it. None where no combination chains from skip to add."""
    layers = [layer for layer, _ in run]
    try:
        adds = [(skip_reader(layers, p), p) for p, x in enumerate(layers) if x.kind == "add"]
    except MappingError:
        return None
    found = []
    for picks in itertools.product(*(options[p] for _, p in adds)):
        narrowed = list(options)
        for (reader, position), pick in zip(adds, picks, strict=True):
            narrowed[position] = [pick]
            narrowed[reader] = [c for c in narrowed[reader] if shares_skip(
                (layers[reader], c), (layers[position], pick))]
        if all(narrowed):
            found.append(_cheapest(run, narrowed))
    if not found:
        return None
    chosen = min(found, key=lambda pair: pair[0])[1]
    links = _links(run, chosen)
    if not all(all(links[reader:position + 1]) for reader, position in adds):
        return None
    return chosen, links


def skip_reader(layers: list[QuantLayer], add: int) -> int:
    """The position of the layer that reads the add's skip in place (the one right after the
    skip's producer, whose input region the stacked tensor's first half must be); a
    `MappingError` where the skip is not produced earlier in the same device run."""
    layer = layers[add]
    names = [x.name for x in layers]
    skip = layer.inputs[0]
    if skip not in names[:add - 1]:
        raise MappingError(
            f"{layer.name}: its skip ({skip or 'the network input'}) is not an earlier "
            "layer's output in the same device program; a residual addition runs on the device "
            "when the skip's producer, the residual branch and the add are one program")
    return names.index(skip) + 1


def shares_skip(reader: tuple[QuantLayer, _Candidate], add: tuple[QuantLayer, _Candidate]
                ) -> bool:
    """Whether the add's stacked input region begins with the skip reader's input region,
    byte for byte (each skip element at the same place; `compiler.residual`)."""
    (used, theirs), (layer, mine) = reader, add
    if theirs.fused or mine.fused:
        return False
    inner = _byte_map(used.workload, theirs.input, "A")
    skip = used.workload.shapes["A"]
    stacked = np.zeros(layer.workload.shapes["A"], dtype=np.int64)
    before = input_offsets(skip[1:], stacked.shape[1:])
    if before is None or skip[0] * 2 != stacked.shape[0]:
        return False
    stacked[(slice(0, skip[0]), *(slice(b, b + n) for b, n in zip(before, skip[1:],
                                                                   strict=True)))] = (
        np.arange(1, math.prod(skip) + 1).reshape(skip))
    access = next(a for a in layer.workload.inputs if a.tensor == "A")
    outer = replace(mine.input, base=0, elem_bytes=8).pack(stacked, access,
                                                           layer.workload.sizes)
    return bytes(outer[:len(inner)]) == bytes(inner)  # inner holds every skip element


def chain(run: list[tuple[QuantLayer, bool]], config: AcceleratorConfig,
          memory: MemorySystem) -> list[list[tuple[QuantLayer, Program, Link]]]:
    """``run``'s layers (each with whether a flatten precedes it) compiled, cut where a link
    breaks; each entry ``(layer, program, how it reads its predecessor)``. Residual adds run
    on the device sharing their skips' regions (`_on_device`) where every one can; else
    each add starts a program whose stacked input the host packs from the two int8 tensors
    (``stack``, exact)."""
    if not run:
        return []
    layers = [layer for layer, _ in run]
    options = [_named(layer, _candidates, layer, config, memory) for layer in layers]
    placed = _on_device(run, options)
    if placed is not None:
        chosen, links = placed
    else:
        cut = frozenset(p for p, x in enumerate(layers) if x.kind == "add")
        chosen = _cheapest(run, options, cut)[1]
        links = _links(run, chosen, cut)
    groups: list[list] = []
    for position, layer in enumerate(layers):
        after = links[position + 1] if position + 1 < len(run) else None
        program = _named(layer, _generate, layer, chosen[position], config, memory,
                         after if isinstance(after, DramLayout) else None)
        if links[position] is None:
            groups.append([])
        groups[-1].append((layer, program, links[position]))
    return groups
