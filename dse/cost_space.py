"""`LayerSpace`: everything about one (workload, fusion, tensorize choice, config) that does not
depend on tile sizes or loop order, precomputed once so the cost model can evaluate thousands of
mappings of it with numpy.

The geometry mirrors `tensorforge.compiler.tiling` (which the code generator uses) dimension
by dimension: each operand tile is a row-major array of buffer lines whose dimensions are

* a *group* per unmatched index of the operand (one line slot per value),
* a *group* for the blocks of the index running along a line (the intrinsic's ``elem_axis``),
* an *axis* per intrinsic line axis; a sliding-window axis (CONV2D's ``y+s``) holds one strip
  where neighbouring blocks overlap, so its halo is loaded once; unmatched indices that slide
  with a matched one join its axis, and a window of unmatched indices only (``x+r``) is an
  axis of its own among the groups (`compiler.tiling.sliding_windows`).

Every dimension is described here by the device-index positions it spans, the intrinsic block
size of each, and its kind, so `tensorforge.dse.cost_model` can turn tile sizes (an ``n x D``
array) into lines, DRAM rows, beats and bytes without Python loops over mappings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tensorforge.compiler.layout import dense_layout
from tensorforge.compiler.lowering import Lowering, device_choices
from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.tiling import sliding_windows
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig, Interconnect
from tensorforge.errors import MappingError
from tensorforge.hw.accumulator import AccumulatorBuffer
from tensorforge.hw.compute_unit import step_latency
from tensorforge.hw.dataflow_plan import Operand, local_banks, plan_for
from tensorforge.hw.pe_array import array_latency, bank_reuse_gap
from tensorforge.intrinsics import BLOCK_LAYOUTS, Intrinsic

ROLES = ("A", "B", "C")

GROUP, ELEM, AXIS = 0, 1, 2  # kinds of operand tile dimensions


@dataclass(frozen=True)
class TileDimSpec:
    """One dimension of an operand tile (see the module docstring).

    ``positions`` are device-index positions (``-1`` for an intrinsic index that no workload
    index runs along; it then contributes one line), ``sizes`` the intrinsic block size of
    each entry (1 for a group of an unmatched index).
    """

    kind: int
    positions: tuple[int, ...]
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class OperandSpec:
    role: str
    tensor: str
    indices: tuple[int, ...]  # device-index positions the operand's access uses
    dims: tuple[TileDimSpec, ...]
    elem: int  # device-index position running along a line, -1 if none
    elem_size: int
    gathered: bool  # laid out by the host as a gathered (im2col-like) copy


@dataclass(frozen=True)
class StepPlan:
    """Cycle-level facts of one intrinsic step on this array (from `hw.dataflow_plan`)."""

    beats: int  # streamed lines per step, one per cycle
    stationary_lines: int  # lines written into the PE stores when the stationary block changes
    stationary_role: str  # "A" or "B"
    array_latency: int  # cycles from the last beat to the first output line (`array_latency`)
    output_lines: int  # accumulator lines written per step (read-modify-write)
    isolated_step: int  # cycles of one step alone (`hw.compute_unit.step_latency`)
    conflicts_by_residue: tuple[int, ...]  # bank-conflict cycles of a reloading step, see below
    stationary_banks: int  # stationary blocks the PE stores hold (`local_banks`)
    bank_reuse_gap: int  # cycles from a bank's last beat to its next block's first line
    groups_span_steps: bool  # os: steps that keep their C block accumulate in the PEs
    accumulate_round_trip: int  # least cycles between two writes of one C line (see below)


@dataclass(frozen=True)
class LayerSpace:
    """One tensorize choice (with optional host fusion) of a workload on one accelerator."""

    workload: Workload
    groups: tuple[tuple[str, ...], ...]
    choice: TensorizeChoice
    config: AcceleratorConfig
    device: Workload
    names: tuple[str, ...]
    sizes: np.ndarray  # (D,) int64 device index sizes
    block: np.ndarray  # (D,) int64 intrinsic block per index (1 if unmatched)
    output_mask: np.ndarray  # (D,) bool: index of the output C
    operands: tuple[OperandSpec, OperandSpec, OperandSpec]  # A, B, C
    step: StepPlan
    host_bytes: int  # bytes the host moves to fuse (im2col/col2im) or gather operands

    @property
    def dims(self) -> int:
        return len(self.names)

    def operand(self, role: str) -> OperandSpec:
        return self.operands[ROLES.index(role)]

    @cached_property
    def dependence(self) -> np.ndarray:
        """(3 x D) bool: operand A/B/C uses device index d."""
        mask = np.zeros((3, self.dims), dtype=bool)
        for row, spec in enumerate(self.operands):
            mask[row, list(spec.indices)] = True
        return mask

    @cached_property
    def transfer_counter(self):
        """The code generator's LOAD/STORE counts of this space's tiles (`cost_transfers`)."""
        from tensorforge.dse.cost_transfers import TransferCounter

        return TransferCounter(self.workload, self.choice, self.groups, self.config)

    @cached_property
    def folds(self) -> tuple[bool, bool, bool]:
        """Per operand: whether its runs fold into repeated LOADs/STOREs
        (`cost_transfers.TransferCounter.folds`)."""
        return self.transfer_counter.folds()

    @cached_property
    def stack(self):
        """This space alone as a `cost_rows.SpaceStack`, the form the batch model prices."""
        from tensorforge.dse.cost_rows import SpaceStack

        return SpaceStack([self])

    def describe(self) -> str:
        fused = f" fused {[list(g) for g in self.groups]}" if self.groups else ""
        return f"{self.choice.describe()}{fused}"


def build_space(workload: Workload, choice: TensorizeChoice, config: AcceleratorConfig,
                groups: tuple[tuple[str, ...], ...] = ()) -> LayerSpace:
    """Precompute the `LayerSpace` of ``choice`` (a choice of the fused workload if ``groups``)."""
    intrinsic = Intrinsic(choice.intrinsic)
    if intrinsic is not config.intrinsic:
        raise MappingError(f"the choice uses {intrinsic.value} but the accelerator implements "
                           f"{config.intrinsic.value}")
    lowering = Lowering(workload, groups, choice.stage)
    device = lowering.device
    names = device.indices
    position = {n: p for p, n in enumerate(names)}
    isizes = config.intrinsic_sizes
    imap = choice.index_map
    block = np.ones(len(names), dtype=np.int64)
    for iota, n in imap.items():
        block[position[n]] = isizes[iota]
    accesses = dict(choice.operands)
    operands = []
    host_bytes = 0
    for role in ROLES:
        access = accesses[role]
        spec = _operand(role, access, intrinsic, isizes, imap, position)
        elem_name = names[spec.elem] if spec.elem >= 0 else None
        shape = device.shapes[access.tensor]
        elem_bytes = config.precision.acc_bytes if role == "C" else config.precision.in_bytes
        if dense_layout(access.tensor, shape, (access,), device.sizes, 0, 1, elem_name) is None:
            spec = OperandSpec(**{**spec.__dict__, "gathered": True})
            gathered = math.prod(device.sizes[n] for n in access.indices)
            host_bytes += (math.prod(shape) + gathered) * elem_bytes
        operands.append(spec)
    if groups:  # im2col on the way in, col2im on the way out: read and write every element
        for original in workload.inputs:
            elems = math.prod(workload.shapes[original.tensor])
            elems += math.prod(device.shapes[original.tensor])
            host_bytes += elems * config.precision.in_bytes
        host_bytes += 2 * math.prod(workload.shapes[workload.output.tensor]) * (
            config.precision.acc_bytes)
    output_mask = np.array([n in device.output.indices for n in names])
    return LayerSpace(workload, groups, choice, config, device, names,
                      np.array([device.sizes[n] for n in names], dtype=np.int64), block,
                      output_mask, tuple(operands), step_plan(config), host_bytes)


def _operand(role, access, intrinsic, isizes, imap, position) -> OperandSpec:
    """The tile dimensions of ``role``, in the order `compiler.tiling` lays them out."""
    layout = BLOCK_LAYOUTS[intrinsic][role]
    on_axes = {imap[i] for axis in layout.line_axes for i in axis if i in imap}
    elem = imap.get(layout.elem_axis) if layout.elem_axis else None
    windows = sliding_windows(access, intrinsic, role, imap)
    sliding = dict(windows.on_axis)
    dims = [TileDimSpec(GROUP, (position[n],), (1,)) for n in access.indices
            if n not in on_axes and n != elem and n not in windows.members]
    # a strip shared by a window's indices (`tiling.Windows`); after the groups, which
    # `cost_rows` pads at the front (the order of dimensions before the last changes no count)
    dims += [TileDimSpec(AXIS, tuple(position[m] for m in window), (1,) * len(window))
             for window in windows.apart]
    if elem is not None:
        dims.append(TileDimSpec(ELEM, (position[elem],), (isizes[layout.elem_axis],)))
    for axis in layout.line_axes:
        extra = tuple(m for i in axis for m in sliding.get(i, ()))
        positions = tuple(position[imap[i]] if i in imap else -1 for i in axis)
        dims.append(TileDimSpec(AXIS, positions + tuple(position[m] for m in extra),
                                tuple(isizes[i] for i in axis) + (1,) * len(extra)))
    return OperandSpec(role, access.tensor, tuple(position[n] for n in access.indices),
                       tuple(dims), position[elem] if elem is not None else -1,
                       isizes[layout.elem_axis] if layout.elem_axis else 1, False)


def step_plan(config: AcceleratorConfig) -> StepPlan:
    """The step's beats, stationary reload and bank-conflict table on ``config``.

    Bank conflicts: while the stationary block of the next step is read (port of its operand)
    the current step streams its lines (the other port). Line ``n`` is in bank ``n % banks``;
    with the streamed block ``residue`` lines after the stationary one (mod ``banks``), cycle
    ``t`` conflicts when ``(residue + beat_line[t]) % banks == t % banks``; each conflict holds
    one port for a cycle (`hw.scratchpad.Scratchpad`'s arbitration).

    Accumulate round trip: the compute unit's accumulator walker reads a C line only once its
    last write is done (its pending entry clears the cycle after the write), the old line
    comes back ``read_latency`` later and enters the writer's FIFO (one more cycle), so two
    writes of one line are at least ``read_latency + 2`` cycles apart.
    """
    plan = plan_for(config)
    banks = config.scratchpad.banks
    beat_lines = [beat.line for beat in plan.beats]
    overlap = min(len(beat_lines), plan.stationary_lines)
    table = tuple(
        sum((residue + beat_lines[t]) % banks == t % banks for t in range(overlap))
        for residue in range(banks)
    )
    return StepPlan(
        beats=len(plan.beats),
        stationary_lines=plan.stationary_lines,
        stationary_role="A" if plan.stationary is Operand.A else "B",
        array_latency=array_latency(config),
        output_lines=len(plan.output_lines) * plan.groups_per_step,
        isolated_step=step_latency(config),
        conflicts_by_residue=table,
        stationary_banks=local_banks(config, plan),
        bank_reuse_gap=bank_reuse_gap(config),
        groups_span_steps=plan.groups_span_steps,
        accumulate_round_trip=AccumulatorBuffer.read_latency + 2,
    )


def layer_spaces(workload: Workload, config: AcceleratorConfig, *,
                 fusions: tuple[tuple[tuple[str, ...], ...], ...] = ((),)) -> list[LayerSpace]:
    """Every runnable (fusion, tensorize choice) of ``workload`` on ``config``.

    Only stage-0 choices run on the device (`Lowering`); fusions that the workload cannot take
    are skipped. ``fusions`` defaults to no host fusion.
    """
    spaces = []
    for groups in fusions:
        try:
            choices = device_choices(workload, config.intrinsic.value, groups)
        except MappingError:
            continue
        for choice in choices:
            try:
                spaces.append(build_space(workload, choice, config, groups))
            except MappingError:
                continue
    return spaces


def movement_hops(config: AcceleratorConfig) -> float:
    """PE-to-PE (or wire/crossbar) hops one streamed operand element makes, by interconnect."""
    pes = config.array.pes
    match config.array.interconnect:
        case Interconnect.SYSTOLIC:
            return float(config.array.cols)  # forwarded along a row
        case Interconnect.FULL:
            return 1.0 + math.log2(max(pes, 2))  # crossbar stages
    return math.sqrt(pes)  # a broadcast wire spanning the array
