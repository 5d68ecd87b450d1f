"""The integer reference of a quantized network, in plain numpy (no compiler, no workloads).

Convolutions are written out tap by tap from the torch geometry (stride, padding, dilation)
over the int8 tensors, linear layers as a matrix-vector product, both accumulated in int64,
max pooling as the maximum over each window with torch's -inf padding (`max_pool2d`),
average pooling as each window's sum over the zero-padded input (torch's
``count_include_pad``; the output stage divides), a residual addition as
``m_a * skip + m_b * residual`` from the two int8 tensors (`add_output`),
then each layer's output stage (`tensorforge.requant`, the integer semantics the hardware
shares) and the integer host steps (`compiler.quantize.global_avg_pool`, flatten). What the
accelerator computes for a `QuantizedNetwork` must equal `reference_output` bit for bit.
"""

from __future__ import annotations

import numpy as np

from tensorforge.compiler.quantize import QuantizedNetwork, QuantLayer, global_avg_pool


def conv2d(a: np.ndarray, weight: np.ndarray, conv: tuple[int, ...], depthwise: bool
           ) -> np.ndarray:
    """``(C, H, W)`` x ``(K, C, R, S)`` (depthwise: ``(C, R, S)``) -> ``(K, OH, OW)``, int64."""
    sh, sw, ph, pw, dh, dw = conv
    a = np.pad(np.asarray(a, dtype=np.int64), ((0, 0), (ph, ph), (pw, pw)))
    r_taps, s_taps = weight.shape[-2:]
    out_h = (a.shape[1] - dh * (r_taps - 1) - 1) // sh + 1
    out_w = (a.shape[2] - dw * (s_taps - 1) - 1) // sw + 1
    out = np.zeros((weight.shape[0], out_h, out_w), dtype=np.int64)
    for r in range(r_taps):
        for s in range(s_taps):
            patch = a[:, r * dh: r * dh + sh * (out_h - 1) + 1: sh,
                      s * dw: s * dw + sw * (out_w - 1) + 1: sw]
            if depthwise:
                out += patch * weight[:, r, s][:, None, None]
            else:
                out += np.einsum("chw,kc->khw", patch, weight[:, :, r, s])
    return out


def max_pool2d(a: np.ndarray, kernel: tuple[int, int], conv: tuple[int, ...]) -> np.ndarray:
    """``(C, H, W)`` -> ``(C, OH, OW)``: each window's maximum, padded positions never chosen
    (torch's ``max_pool2d``, floor mode), int64."""
    sh, sw, ph, pw, _, _ = conv
    kh, kw = kernel
    lowest = np.iinfo(np.int64).min
    a = np.pad(np.asarray(a, dtype=np.int64), ((0, 0), (ph, ph), (pw, pw)),
               constant_values=lowest)
    out_h, out_w = (a.shape[1] - kh) // sh + 1, (a.shape[2] - kw) // sw + 1
    out = np.full((a.shape[0], out_h, out_w), lowest, dtype=np.int64)
    for x in range(out_h):
        for y in range(out_w):
            out[:, x, y] = a[:, x * sh: x * sh + kh, y * sw: y * sw + kw].max(axis=(1, 2))
    return out


def layer_output(layer: QuantLayer, q: np.ndarray) -> np.ndarray:
    """One layer on int8 input ``q``: the accumulator, then the output stage."""
    weight = np.asarray(layer.weight, dtype=np.int64)
    if layer.kind == "linear":
        acc = weight @ np.asarray(q, dtype=np.int64).reshape(-1)
    elif layer.kind == "global_avg_pool":  # each channel's sum, divided by the output stage
        acc = np.asarray(q, dtype=np.int64).sum(axis=(1, 2), keepdims=True)
    elif layer.kind == "max_pool":  # the output stage is the identity
        acc = max_pool2d(q, layer.kernel, layer.conv)
    elif layer.kind == "avg_pool":  # each window's sum, zero padded; divided by the stage
        acc = conv2d(q, np.ones((len(q), *layer.kernel), dtype=np.int64), layer.conv, True)
    else:
        acc = conv2d(q, weight, layer.conv, layer.kind == "depthwise_conv2d")
    return layer.params.apply(acc, 0, 32)


def add_output(layer: QuantLayer, skip: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """A residual addition: ``m_a * skip + m_b * residual`` in int64, then the output stage."""
    m_a, m_b = layer.multipliers
    acc = m_a * np.asarray(skip, dtype=np.int64) + m_b * np.asarray(residual, dtype=np.int64)
    return layer.params.apply(acc, 0, 32)


def reference_output(network: QuantizedNetwork, q: np.ndarray) -> np.ndarray:
    """The int8 output (int64 array) of ``network`` on the int8 input ``q``."""
    outputs = {"": q}  # each device layer's output by name, for the additions' skips
    for step in network.steps:
        if isinstance(step, QuantLayer) and step.kind == "add":
            q = add_output(step, outputs[step.inputs[0]], q)
            outputs[step.name] = q
        elif isinstance(step, QuantLayer):  # a projection shortcut reads an earlier output
            q = layer_output(step, outputs[step.inputs[0]] if step.inputs else q)
            outputs[step.name] = q
        elif step.op == "global_avg_pool":
            q = global_avg_pool(q)
        else:  # flatten
            q = np.asarray(q).reshape(-1)
    return q
