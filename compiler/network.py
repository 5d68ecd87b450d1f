"""Whole-network programs: layer programs chained through DRAM into one program per segment.

`compile_network` lowers each layer of a `QuantizedNetwork` directly (no host im2col: the
workload as written, `mappers.choice_mappings`) with its output stage (bias,
requantization, activation at STORE, int8 out), and strings the layers together:

* **layouts.** The mapping of each layer is picked over the whole chain
  (`tensorforge.compiler.network_chain`): a layer whose input region its producer's STOREs
  can write reads that output in place. The producer then STOREs straight into the
  consumer's padded input region (`codegen.generate`'s ``output_layout``), whose halo stays
  zero, so nobody pads; a flatten whose two sides lie byte for byte alike is free. Anything
  else is a host re-layout (``relayout``).
* **one instruction stream.** Each layer's program is generated on its own and relocated
  into the segment's DRAM map (activations first, the segment's outputs one writable span,
  then weights and output-stage parameters, then the instructions). Between two layers a
  barrier of VTA tokens replaces the FINISH: the last STORE signals COMPUTE, a ZERO of
  accumulator block 0 (harmless: nothing is left to store) waits for it and signals LOAD,
  and the next layer's first LOAD waits for that. So the next layer reads DRAM only after
  the previous one has written it, and reuses the buffers only after they drained.
* **residual additions** (`compiler.residual`): the add reads its skip and its residual
  stacked along the channels in one region, which is the skip's own (grown to hold both),
  where the layer after the skip's producer reads it in place; the residual branch's last
  layer STOREs into its second half. DRAM regions are never reused, so a tensor lives until
  its last reader; layers run in program order behind the barriers, so nothing else is needed.
* **activations on chip.** On an accelerator with an activation window
  (``scratchpad.activations``) the segment's intermediate regions, written by one layer and
  read by later ones, move into the window as far as they fit, reusing the bytes of regions
  whose last reader has run (`compiler.activation_memory`); the DRAM map keeps its layout,
  those spans unused, and `Segment.on_chip` lists what moved. Without a window the
  instructions are exactly those above.
* **segments.** An op the device lacks (a re-layout, pooling on the host) ends a device
  segment; the host runs it on the integers and packs the next segment's input. Each
  segment is one program with one FINISH; `NetworkProgram.host_ops` lists what ran on the
  host.
* **a last layer without an output stage** (a multi-stage workload's final product,
  `tensorforge.compiler.stage_chain`) stores its ``acc_bits`` accumulator. Such a
  workload's operands are the layers' weights, given when the program runs
  (`Segment.pack`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from tensorforge.compiler.activation_memory import (
    OnChip,
    Placement,
    clearing,
    place,
    unwritten_reads,
)
from tensorforge.compiler.layout import DramLayout, aligned
from tensorforge.compiler.network_chain import Link, chain, input_offsets
from tensorforge.compiler.program import Program
from tensorforge.compiler.quantize import HostStep, QuantizedNetwork, QuantLayer, global_avg_pool
from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.isa import Compute, ComputeMode, Finish, Instruction, Load, Store
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem


@dataclass(frozen=True)
class HostOp:
    """An op between device segments: ``global_avg_pool``, ``flatten``, ``relayout`` (the
    next layer reads the previous output in another layout), ``stack`` (the next layer, a
    residual add, reads its skip and the previous output stacked along the channels, where
    the device could not place them: `compiler.network_chain.chain`), ``reread`` (the next
    layer reads an earlier output, likewise), or ``host_input`` (it
    reads a tensor that is not the previous output: a zoo model's branch)."""

    name: str
    op: str

    def __str__(self) -> str:
        return f"{self.op} ({self.name})"


@dataclass(frozen=True)
class Segment:
    """Device layers run as one program: relocated, chained instructions and the DRAM map."""

    layers: tuple[QuantLayer, ...]
    programs: tuple[Program, ...]  # each layer's own program (its own addresses)
    instructions: tuple[Instruction, ...]
    regions: tuple[dict[str, int], ...]  # per layer: tensor ("A", "B", "C", "P") -> base
    data_bytes: int  # the DRAM image before the instructions
    writable: tuple[int, int]  # the layers' outputs, one span
    # regions in the activation window (`compiler.activation_memory`): never in DRAM
    on_chip: tuple[OnChip, ...] = ()

    def holds_on_chip(self, position: int) -> bool:
        """Whether layer ``position``'s output lies in the activation window."""
        return self.regions[position]["C"] >= ACTIVATION_BASE

    @property
    def activation_bytes(self) -> tuple[int, int]:
        """Bytes of the layers' output regions ``(on chip, in DRAM)`` (a residual add's
        stacked region once); the DRAM map keeps its layout, an on-chip region's DRAM span
        left unused."""
        regions: dict[int, int] = {}
        for position in range(len(self.layers)):
            base = self.regions[position]["C"]
            regions[base] = max(regions.get(base, 0), self.layout(position, "C").nbytes)
        on_chip = sum(region.nbytes for region in self.on_chip)
        return on_chip, sum(n for base, n in regions.items() if base < ACTIVATION_BASE)

    def layout(self, position: int, tensor: str) -> DramLayout:
        """Layer ``position``'s region of ``tensor`` at its place in the segment's DRAM."""
        program = self.programs[position]
        local = next(x for x in (*program.operands, program.output) if x.tensor == tensor)
        return replace(local, base=self.regions[position][tensor])

    def pack(self, q: np.ndarray, weights: Mapping[str, np.ndarray] | None = None
             ) -> bytearray:
        """The DRAM image (without instructions) with the int8 input ``q``; ``weights`` (by
        layer name) replace the layers' own (a workload's operands, given at run time)."""
        image = bytearray(self.data_bytes)
        weights = weights or {}
        for position, (layer, program) in enumerate(zip(self.layers, self.programs,
                                                        strict=True)):
            tensors = {"B": weights.get(layer.name, layer.weight)}
            if position == 0:
                tensors["A"] = np.asarray(q).reshape(layer.workload.shapes["A"])
            prepared = program.lowering.prepare({**tensors, "A": tensors.get(
                "A", np.zeros(layer.workload.shapes["A"], dtype=np.int64))})
            device = program.lowering.device
            for name in tensors:
                layout = self.layout(position, name)
                access = next(a for a in device.inputs if a.tensor == name)
                image[layout.base:layout.end] = layout.pack(prepared[name], access, device.sizes)
            if program.params is not None:
                base = self.regions[position]["P"]
                image[base:base + len(program.params.data)] = program.params.data
        return image

    def unpack(self, dram: bytes | bytearray, position: int = -1) -> np.ndarray:
        """Layer ``position``'s int8 output (its workload's output shape; the last layer's
        by default) from the DRAM after; one kept on chip is an error."""
        position %= len(self.programs)
        if self.holds_on_chip(position):
            raise MappingError(f"{self.layers[position].name}'s output stays in the activation "
                               "window, not DRAM; unpack a layer the host reads")
        region = self.layout(position, "C")
        values = region.unpack(dram)  # a region STOREd into a consumer's holds padding
        shape = self.layers[position].workload.shapes["C"]
        if values.shape != shape and region.kind == "dense" and len(region.low) == len(shape):
            values = values[tuple(slice(-low, -low + n) for low, n in zip(
                region.low, shape, strict=True))]
        return self.programs[position].lowering.finish(values, {})


Item = Segment | HostOp


@dataclass(frozen=True)
class NetworkProgram:
    """A network compiled for ``config``: device segments and host ops, in order."""

    config: AcceleratorConfig
    network: QuantizedNetwork
    items: tuple[Item, ...]

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(i for i in self.items if isinstance(i, Segment))

    @property
    def host_ops(self) -> tuple[HostOp, ...]:
        return tuple(i for i in self.items if isinstance(i, HostOp))

    def run(self, q: np.ndarray, device: Callable[[Segment, bytearray], tuple[bytes, int | None]],
            weights: Mapping[str, np.ndarray] | None = None
            ) -> tuple[np.ndarray, list[int | None]]:
        """The int8 output for the int8 input ``q``, each segment run by ``device`` (image in,
        ``(DRAM after, cycles)`` out); and each segment's cycles. ``weights`` as in
        `Segment.pack`."""
        cycles = []
        skips = {x.inputs[0] for x in self.network.layers if x.inputs}
        kept = {"": q}  # the outputs a host ``stack`` or ``reread`` may read, by layer name
        for item in self.items:
            if isinstance(item, Segment):
                after, count = device(item, item.pack(q, weights))
                q = item.unpack(after)
                kept.update((layer.name, item.unpack(after, position)) for position, layer
                            in enumerate(item.layers)
                            if layer.name in skips and not item.holds_on_chip(position))
                cycles.append(count)
            elif item.op == "reread":  # a projection shortcut's input, an earlier output
                layer = self.items[self.items.index(item) + 1].layers[0]
                q = pad_into(kept[layer.inputs[0]], layer.workload.shapes["A"])
            elif item.op == "stack":  # a residual add's skip and residual, stacked
                add = self.items[self.items.index(item) + 1].layers[0]
                q = pad_into(np.concatenate([kept[add.inputs[0]], np.asarray(q)]),
                             add.workload.shapes["A"])
            elif item.op == "global_avg_pool":
                q = global_avg_pool(q)
            elif item.op == "flatten":
                q = np.asarray(q).reshape(-1)
            elif item.op == "relayout":  # the next segment's pack lays q out
                after = self.items[self.items.index(item) + 1]
                q = pad_into(q, after.layers[0].workload.shapes["A"])
        return q, cycles


def pad_into(q: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``q`` zero-padded into ``shape`` where `input_offsets` places it (unchanged if it
    already has that shape); a flatten's reshape otherwise."""
    q = np.asarray(q)
    before = input_offsets(q.shape, shape)
    if before is None:
        return q.reshape(shape)
    padded = np.zeros(shape, dtype=np.int64)
    padded[tuple(slice(b, b + n) for b, n in zip(before, q.shape, strict=True))] = q
    return padded


def compile_network(network: QuantizedNetwork, config: AcceleratorConfig,
                    memory: MemorySystem = DEFAULT_MEMORY) -> NetworkProgram:
    """Lower every layer of ``network`` onto ``config`` and chain them (module docstring)."""
    if not config.output_pipeline:
        raise MappingError("a quantized network needs the output pipeline: "
                           "AcceleratorConfig(output_pipeline=True)")
    precision = config.precision
    if (precision.in_bits, precision.acc_bits) != (8, 32):
        raise MappingError(f"quantized networks are int8 with int32 accumulators; this "
                           f"accelerator has in_bits {precision.in_bits}, acc_bits "
                           f"{precision.acc_bits}")
    if any(layer.params is None for layer in network.layers[:-1]):
        raise MappingError("only a network's last layer may lack an output stage (it stores "
                           "its acc_bits accumulator, which no later layer can read)")
    runs = [(chain(run, config, memory), host) for run, host in _device_runs(network.steps)]
    # outputs a host ``stack`` or ``reread`` reads: they stay in DRAM
    host_reads = frozenset(group[0][0].inputs[0] for groups, _ in runs for group in groups
                           if group[0][0].inputs)
    items: list[Item] = []
    for groups, host in runs:
        for group in groups:
            if items and isinstance(items[-1], Segment):
                produced = items[-1].layers[-1].workload.shapes["C"]
                held = input_offsets(produced, group[0][0].workload.shapes["A"]) is not None
                first = group[0][0]
                op = "relayout" if held else "host_input"
                if first.inputs:
                    op = "stack" if first.kind == "add" else "reread"
                items.append(HostOp(first.name, op))
            items.append(_segment(group, config, host_reads))
        items.extend(HostOp(step.name, step.op) for step in host)
    return NetworkProgram(config, network, tuple(items))


def _device_runs(steps) -> list[tuple[list[tuple[QuantLayer, bool]], list[HostStep]]]:
    """Runs of layers (each with whether a flatten precedes it) and the host steps after."""
    runs: list = []
    layers: list = []
    host: list = []
    flatten = False
    for step in steps:
        if isinstance(step, QuantLayer):
            if host:
                runs.append((layers, host))
                layers, host = [], []
            layers.append((step, flatten))
            flatten = False
        elif step.op == "flatten" and layers and not host:
            flatten = True  # free if the layouts agree, else a re-layout (`chain`)
        else:
            host.append(step)
    runs.append((layers, host))
    return runs


def _segment(group: list[tuple[QuantLayer, Program, Link]], config: AcceleratorConfig,
             host_reads: frozenset[str] = frozenset()) -> Segment:
    """Place the group's regions, relocate and join its programs (module docstring);
    ``host_reads``: layers whose outputs a later segment's host op reads (kept in DRAM)."""
    regions, sizes, writable, data_bytes = _dram_map(group)
    placement = Placement({}, {}, ())
    if config.activation_window:
        kept = [position == len(group) - 1 or layer.name in host_reads
                for position, (layer, _, _) in enumerate(group)]
        unwritten = unwritten_reads([_relocate(program, regions[position]) for position, (
            _, program, _) in enumerate(group)], config, data_bytes)
        placement = place(regions, sizes, kept, unwritten, config, [g[0].name for g in group])
        regions = [{tensor: placement.moved.get(base, base) if tensor in "AC" else base
                    for tensor, base in region.items()} for region in regions]
    instructions: list[Instruction] = []
    first = clearing(config, placement.clears.get(0, []))
    if first:  # the first layer's regions cleared before it: a barrier with no layer before
        instructions += [*first, Compute(mode=ComputeMode.ZERO, acc_base=0, pop_next=True,
                                         push_prev=True)]
    for position, (_, program, _) in enumerate(group):
        body = _relocate(program, regions[position])
        if position or first:
            body = _wait_first_load(body)
        if position + 1 < len(group):
            body = _barrier(body, clearing(config, placement.clears.get(position + 1, [])))
        instructions.extend(body)
    instructions.append(Finish())
    return Segment(tuple(g[0] for g in group), tuple(g[1] for g in group),
                   tuple(instructions), tuple(regions), data_bytes, writable,
                   placement.on_chip)


def _dram_map(group: list[tuple[QuantLayer, Program, Link]]
              ) -> tuple[list[dict[str, int]], dict[int, int], tuple[int, int], int]:
    """Every layer's regions (tensor -> DRAM base), the activation regions' bytes by base,
    the span of the layers' outputs and the bytes before the instructions."""
    base = 0
    regions: list[dict[str, int]] = [{} for _ in group]
    first = next(x for x in group[0][1].operands if x.tensor == "A")
    regions[0]["A"], base = 0, aligned(first.nbytes)
    outputs_from = base
    # a residual add's stacked input: its skip's region, grown to hold both halves, which
    # the add's predecessor (the residual branch) STOREs into as well (`compiler.residual`)
    # and a layer re-reading an earlier output (a projection shortcut) reads its region
    names = {layer.name: position for position, (layer, _, _) in enumerate(group)}
    into, reads, room = {}, {}, {}
    for position, (layer, program, _) in enumerate(group):
        if layer.inputs and position:  # at 0 the host packs its input (``stack``, ``reread``)
            source = names[layer.inputs[0]]
            if layer.kind == "add":
                into[position - 1] = source
            else:
                reads[position] = source
            stacked = next(x for x in program.operands if x.tensor == "A")
            room[source] = max(room.get(source, 0), stacked.nbytes)
    sizes = {}
    for position, (_, program, _) in enumerate(group):
        if position in into:
            regions[position]["C"] = regions[into[position]]["C"]
        else:
            regions[position]["C"] = base
            sizes[base] = max(program.output.nbytes, room.get(position, 0))
            base = aligned(base + sizes[base])
    for position in range(1, len(group)):
        regions[position]["A"] = regions[reads.get(position, position - 1)]["C"]
    writable = (outputs_from, base)
    for position, (_, program, _) in enumerate(group):
        weights = next(x for x in program.operands if x.tensor == "B")
        regions[position]["B"], base = base, aligned(base + weights.nbytes)
        if program.params is not None:
            regions[position]["P"], base = base, aligned(base + len(program.params.data))
    return regions, sizes, writable, base


def _relocate(program: Program, bases: dict[str, int]) -> list[Instruction]:
    """``program``'s instructions without FINISH, each DRAM address moved to its region's
    place in the segment."""
    moves = [(x.base, x.end, bases[x.tensor] - x.base) for x in (*program.operands,
                                                                  program.output)]
    params = program.params
    if params is not None:
        moves.append((params.base, params.end, bases["P"] - params.base))
    body = []
    for instruction in program.instructions:
        if isinstance(instruction, Finish):
            continue
        if isinstance(instruction, Load | Store) and instruction.rows:
            address = instruction.dram_addr
            shift = next((d for lo, hi, d in moves if lo <= address < hi), None)
            if shift is None:
                raise MappingError(f"{instruction.describe()} addresses no region of "
                                   f"{program.workload.name}")
            instruction = replace(instruction, dram_addr=address + shift)
        body.append(instruction)
    return body


def _barrier(body: list[Instruction], clear: list[Instruction]) -> list[Instruction]:
    """``body`` whose last STORE signals a ZERO that then signals the next layer's LOAD;
    between them ``clear`` (`activation_memory.clearing`) zeroes the next layer's on-chip
    regions, its first COMPUTE waiting for that STORE instead."""
    last = max(i for i, x in enumerate(body) if isinstance(x, Store))
    if body[last].push_prev:
        raise MappingError("the layer's last STORE already signals COMPUTE; cannot chain")
    body = [*body[:last], replace(body[last], push_prev=True), *body[last + 1:]]
    if clear:
        clear = [replace(clear[0], pop_next=True), *clear[1:]]
    return [*body, *clear,
            Compute(mode=ComputeMode.ZERO, acc_base=0, pop_next=True, push_prev=True)]


def _wait_first_load(body: list[Instruction]) -> list[Instruction]:
    """``body`` whose first LOAD waits for the barrier before it."""
    first = next(i for i, x in enumerate(body) if isinstance(x, Load))
    if body[first].pop_next or any(not isinstance(x, Load) for x in body[:first]):
        raise MappingError("the layer does not start with a free LOAD; cannot chain")
    return [*body[:first], replace(body[first], pop_next=True), *body[first + 1:]]
