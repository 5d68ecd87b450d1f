"""Residual additions as device layers: ``z = clamp(requant(m_a*a + m_b*b))`` on the MAC array.

The two int8 operands (``a`` the skip, at scale ``s_a``; ``b`` the residual branch's last
output, at ``s_b``) lie in DRAM as one tensor stacked along the channels, ``S = [a; b]``
(``2C`` channels), and the add is a pointwise convolution over it whose weight holds two
int8 multipliers per output channel::

    C[k,x,y] += S[c,x+p,y+q] * B[k,c]     B[k,k] = m_a, B[k,C+k] = m_b, 0 elsewhere

``m_a : m_b`` is ``s_a : s_b`` to 7 bits (`add_multipliers`: the larger scale's multiplier
127, the other ``round(127 * s_small / s_large)``, at least 1), so the accumulator holds
``(m_a*a + m_b*b) ~= (s_a*a + s_b*b) * 127 / s_large``; the output stage maps
``s_large / 127`` to the output scale (gemmlowp multiplier and rounding shift, no bias) and
clamps, a ReLU/ReLU6 right after the add fused into the clamp.

Why a pointwise convolution over the channel-stacked tensor and not a depthwise 2-tap
reduction: the skip ``a`` is also read, in place, by the residual branch's first
convolution, whose input region is channel-innermost (a line of channels, tile-major blocks
of them outermost). The stacked tensor in the same layout keeps ``a``'s bytes exactly where
that convolution reads them (``S``'s first ``C`` channels are its first ``C / line`` blocks),
so one producer STORE serves both readers; a depthwise choice reads a pixel axis along the
line, and ``a`` would need a copy. The price is ``2C`` MACs per output instead of 2 (a
block-diagonal weight), small beside the convolutions around it. ``S`` is padded like the
skip's other reader's input (``p``, ``q``: that convolution's padding), so the two regions
coincide byte for byte (`compiler.network_chain` checks it).

The quantizer's graph side lives here too: `is_add` and `add_layer` turn a torch.fx sum
into that layer; `rereading` lets a convolution read an earlier output that the layer after
its producer reads first (a projection shortcut), through that reader's zero-padded region
(`input_region`, `reading_padded`), so one copy serves both.
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import fx

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.errors import WorkloadError
from tensorforge.requant import OutputParams, activation_range, quantize_multiplier

if TYPE_CHECKING:
    from tensorforge.compiler.quantize import QuantLayer

QMAX = 127
ADDS = {operator.add, operator.iadd, torch.add}


def add_multipliers(skip_scale: float, residual_scale: float) -> tuple[int, int]:
    """``(m_a, m_b)``: the ratio ``s_a : s_b`` in int8, the larger 127, the smaller at least 1."""
    large = max(skip_scale, residual_scale)
    return tuple(max(1, round(QMAX * s / large)) for s in (skip_scale, residual_scale))


def add_weight(channels: int, multipliers: tuple[int, int]) -> np.ndarray:
    """The ``(C, 2C)`` block-diagonal weight: ``m_a`` on the skip's channel, ``m_b`` on the
    residual's."""
    weight = np.zeros((channels, 2 * channels), dtype=np.int64)
    index = np.arange(channels)
    weight[index, index] = multipliers[0]
    weight[index, channels + index] = multipliers[1]
    return weight


def add_params(channels: int, scales: tuple[float, float], output_scale: float,
               activation: str) -> tuple[OutputParams, float]:
    """The output stage of an add of operands at ``scales`` (skip, residual), and the output
    scale, raised like a layer's until the requantization factor ``s_large / 127 / s_out``
    is below 1 (module docstring); ``activation`` fused into the clamp."""
    large = max(scales)
    output_scale = max(output_scale, large / QMAX * (1 + 2 ** -20))
    multiplier, shift = quantize_multiplier(large / QMAX / output_scale)
    low, high = activation_range(activation, 8, 0, output_scale)
    return OutputParams.per_channel(channels, multiplier=multiplier, shift=shift, low=low,
                                    high=high), output_scale


def add_workload(name: str, shape: tuple[int, int, int], pad: tuple[int, int]) -> Workload:
    """``C[k,x,y] += A[c,x+p,y+q] * B[k,c]`` over the stacked ``(2C, H+2p, W+2q)`` tensor."""
    channels, height, width = shape
    p, q = pad
    rows, cols = "x" + (f"+{p}" if p else ""), "y" + (f"+{q}" if q else "")
    return parse_workload(f"C[k,x,y] += A[c,{rows},{cols}] * B[k,c]",
                          {"k": channels, "c": 2 * channels, "x": height, "y": width,
                           "A": (2 * channels, height + 2 * p, width + 2 * q)}, name=name)


def input_region(workload: Workload) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(low, extents)`` per dimension of the region ``workload``'s ``A`` lies in: the
    tensor and the zero padding its access reaches (as `compiler.layout`'s dense regions)."""
    access = next(a for a in workload.inputs if a.tensor == "A")
    sizes = workload.sizes
    low, extents = [], []
    for expr, extent in zip(access.dims, workload.shapes["A"], strict=True):
        least = expr.constant + sum(min(0, c * (sizes[i] - 1)) for i, c in expr.terms)
        most = expr.constant + sum(max(0, c * (sizes[i] - 1)) for i, c in expr.terms)
        low.append(min(0, least))
        extents.append(max(extent - 1, most) - min(0, least) + 1)
    return tuple(low), tuple(extents)


def reading_padded(workload: Workload, low: tuple[int, ...], extents: tuple[int, ...]
                   ) -> Workload:
    """``workload`` reading its ``A`` from a zero-padded copy of ``extents`` whose position
    0 holds coordinate ``low`` (another reader's region, `input_region`): each ``A``
    coordinate shifted by ``-low``, the padding now part of the tensor."""
    def shifted(access):
        if access.tensor != "A":
            return access
        return replace(access, dims=tuple(replace(expr, constant=expr.constant - first)
                                          for expr, first in zip(access.dims, low,
                                                                 strict=True)))

    overrides = tuple(x for x in workload.shape_overrides if x[0] != "A")
    return replace(workload, inputs=tuple(shifted(a) for a in workload.inputs),
                   shape_overrides=(*overrides, ("A", tuple(extents))))


def rereading(layer: QuantLayer, source: str, steps: list) -> QuantLayer:
    """``layer`` reading ``source``, an earlier layer's output that the step after that
    layer reads first (a projection shortcut's 1x1 convolution of a block input): in that
    reader's padded input region (`reading_padded`), so both read one copy."""
    from tensorforge.compiler.quantize import QuantLayer  # quantize imports this module
    names = ["", *(s.name if isinstance(s, QuantLayer) else None for s in steps)]
    position = names.index(source) if source in names else len(steps)
    first = steps[position] if position < len(steps) else None  # the step after source
    if not isinstance(first, QuantLayer) or first.inputs or first.kind == "add":
        raise WorkloadError(f"{layer.name} reads {source or 'the input'}, which the layer "
                            "after it does not read: simulate_model reads a tensor twice only "
                            "where the next layer reads it too (a residual block's input)")
    low, extents = input_region(first.workload)
    shape = layer.workload.shapes["A"]
    # the tensor must lie where `network_chain.input_offsets` places a zero-padded input
    if len(shape) != 3 or any(-first_low != (extent - n + 1) // 2 for first_low, extent, n in
                              zip(low, extents, shape, strict=True)):
        raise WorkloadError(f"{layer.name} cannot read {source} where {first.name} reads it "
                            f"(a region of {extents} from {low})")
    return replace(layer, workload=reading_padded(layer.workload, low, extents),
                   inputs=(source,))


def is_add(node: fx.Node) -> bool:
    """A sum of two tensors (``x + y``, ``x += y``, ``torch.add``, ``x.add(y)``)."""
    adds = node.op == "call_function" and node.target in ADDS or (
        node.op == "call_method" and node.target in ("add", "add_"))
    return adds and len([a for a in node.args if isinstance(a, fx.Node)]) == 2 and not (
        set(node.kwargs) - {"alpha"} or node.kwargs.get("alpha", 1) != 1)


def add_layer(node: fx.Node, previous: fx.Node | None, tensors: dict, steps: list, values,
         output_scale: float, activation: str) -> QuantLayer:
    """A residual addition (`compiler.residual`): one operand the previous step's output
    (the residual), the other an earlier device tensor (the skip), stacked skip first."""
    from tensorforge.compiler.quantize import QuantLayer  # quantize imports this module
    operands = [a for a in node.args if isinstance(a, fx.Node)]
    if previous not in operands or any(a not in tensors for a in operands):
        raise WorkloadError(
            f"{node.name} adds {', '.join(a.name for a in operands)}: simulate_model adds the "
            "previous layer's output to an earlier layer's (or the input's) int8 output")
    skip = operands[1] if operands[0] is previous else operands[0]
    if skip is previous:
        raise WorkloadError(f"{node.name} adds {skip.name} to itself; scale it instead")
    shape = tuple(values[node].shape[1:])
    if len(shape) != 3 or tuple(values[skip].shape[1:]) != shape or tuple(
            values[previous].shape[1:]) != shape:
        raise WorkloadError(f"{node.name}: residual additions take two (C, H, W) tensors of "
                            "one shape (no broadcasting)")
    (skip_name, skip_scale), (name, residual_scale) = tensors[skip], tensors[previous]
    if name == "" or not isinstance(steps[-1], QuantLayer) or steps[-1].name != name:
        raise WorkloadError(f"{node.name}: the residual branch must end with a device layer "
                            "right before the addition")
    # the stacked tensor is padded as the skip's other reader (the step after it) reads it
    position = 0 if skip_name == "" else 1 + next(
        i for i, s in enumerate(steps) if isinstance(s, QuantLayer) and s.name == skip_name)
    reader = steps[position] if position < len(steps) else None
    pad = (reader.conv[2], reader.conv[3]) if isinstance(reader, QuantLayer) and (
        reader.conv is not None and not reader.inputs) else (0, 0)
    params, output_scale = add_params(shape[0], (skip_scale, residual_scale), output_scale,
                                      activation)
    multipliers = add_multipliers(skip_scale, residual_scale)
    return QuantLayer(node.name, "add", add_workload(node.name, shape, pad),
                      add_weight(shape[0], multipliers), params, "k", activation,
                      max(skip_scale, residual_scale), output_scale, None,
                      inputs=(skip_name, name), multipliers=multipliers)
