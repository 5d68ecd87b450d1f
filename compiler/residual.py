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
"""

from __future__ import annotations

import numpy as np

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.requant import OutputParams, activation_range, quantize_multiplier

QMAX = 127


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
