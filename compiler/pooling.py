"""Pooling as device layers: the quantizer's global average, average and max pooling.

Every pool keeps its input's scale and is a depthwise workload over the previous step's int8
output with an all-ones ``B``:

* global average pooling (``AdaptiveAvgPool2d(1)``, ``mean`` over the pixels):
  ``C[c,0,0] += A[c,r,s] * B[c,r,s]`` over the whole image, each channel's sum, times
  ``1 / (H*W)`` in the output stage (`averaging_params`);
* average pooling (``AvgPool2d``, ``F.avg_pool2d``: any kernel, stride and padding):
  ``C[c,x,y] += A[c,sx*x+r-p,sy*y+s-p] * B[c,r,s]``, each window's sum, times ``1 / (kh*kw)``
  (or ``1 / divisor_override``). The LOADs pad with zeros, so the padding counts in the
  divisor (``count_include_pad=True``, torch's default);
* max pooling (``MaxPool2d``, ``F.max_pool2d``): ``C[c,x,y] max= A[...] * B[c,r,s]`` (MAX
  COMPUTEs), stored through an identity output stage; zero padding is max pooling's -inf
  padding only on input that cannot be negative, so a padded one must follow a ReLU.

The averaging output stage (`averaging_params`) multiplies the sum by the factor and rounds
once to nearest (`tensorforge.requant`'s semantics, which the reference,
`tensorforge.network_reference`, applies to its own window sums). ``ceil_mode=True`` and
``count_include_pad=False`` are taken where they change nothing (the output size is floor
mode's; no padding), refused elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import fx, nn

from tensorforge.compiler.torch_import import window_expression
from tensorforge.compiler.workload import parse_workload
from tensorforge.errors import WorkloadError
from tensorforge.requant import OutputParams

if TYPE_CHECKING:
    from tensorforge.compiler.quantize import QuantLayer

QMAX = 127
#: the multiplier that, at shift 0, returns every int8 value as it is
IDENTITY_MULTIPLIER = (1 << 31) - 1
_MAX_ARGS = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
             "return_indices")
_AVG_ARGS = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
             "divisor_override")
_DEFAULTS = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
             "return_indices": False, "count_include_pad": True, "divisor_override": None}


def is_global_pool(node: fx.Node, target) -> bool:
    """Average pooling over all pixels: ``AdaptiveAvgPool2d(1)`` or ``mean`` over (2, 3)."""
    if isinstance(target, nn.AdaptiveAvgPool2d):
        size = target.output_size
        return size in (1, (1, 1))
    if node.op in ("call_function", "call_method") and node.target in (torch.mean, "mean"):
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dims = tuple(dims) if isinstance(dims, list | tuple) else (dims,)
        return {d % 4 for d in dims} == {2, 3}
    if node.op == "call_function" and node.target is torch.nn.functional.adaptive_avg_pool2d:
        return node.args[1] in (1, (1, 1))
    return False


def averaging_params(channels: int, divisor: int) -> OutputParams:
    """The output stage that divides each channel's sum by ``divisor``, rounded once to
    nearest: multiplier ``round(2**31 / divisor)`` at shift 0, so the pipeline's doubling
    high multiply rounds ``sum * multiplier / 2**31`` (halves up) and nothing after it does.
    (`quantize_multiplier`'s form, a multiplier in ``[2**30, 2**31)`` and a shift, would round
    twice: a 2x2 window holding 1, 0, 0, 0 would average to 1.)"""
    multiplier = round((1 << 31) / divisor) if divisor > 1 else IDENTITY_MULTIPLIER
    return OutputParams.per_channel(channels, multiplier=multiplier, shift=0,
                                    low=-QMAX - 1, high=QMAX)


def global_pool_layer(name: str, shape: tuple[int, ...], scale: float) -> QuantLayer:
    """Global average pooling as a device layer: a depthwise convolution whose kernel is the
    whole ``(C, H, W)`` input, all ones, so the accumulator holds each channel's sum; the
    output stage multiplies by ``1 / (H*W)`` at the input's scale."""
    from tensorforge.compiler.quantize import QuantLayer  # quantize imports this module
    channels, height, width = shape
    workload = parse_workload("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]",
                              {"c": channels, "x": 1, "y": 1, "r": height, "s": width,
                               "A": shape}, name=name)
    return QuantLayer(name, "global_avg_pool", workload, np.ones(shape, dtype=np.int64),
                      averaging_params(channels, height * width), "c", "none", scale, scale,
                      None)


@dataclass(frozen=True)
class WindowPool:
    """A windowed pooling node's options, each ``(h, w)``."""

    kind: str  # max_pool or avg_pool
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    divisor: int  # avg_pool: what the window sum is divided by
    ceil_mode: bool


def window_pool(node: fx.Node, target) -> WindowPool | None:
    """The options of a windowed pooling node, else None; a `WorkloadError` for those the
    device never runs (the rest, `window_pool_layer`)."""
    if isinstance(target, nn.MaxPool2d | nn.AvgPool2d):
        kind = "max_pool" if isinstance(target, nn.MaxPool2d) else "avg_pool"
        options = {**_DEFAULTS, **{name: getattr(target, name) for name in (
            _MAX_ARGS if kind == "max_pool" else _AVG_ARGS)[1:]}}
    elif node.op == "call_function" and node.target in (torch.nn.functional.max_pool2d,
                                                        torch.nn.functional.avg_pool2d):
        kind = "max_pool" if node.target is torch.nn.functional.max_pool2d else "avg_pool"
        names = _MAX_ARGS if kind == "max_pool" else _AVG_ARGS
        options = {**_DEFAULTS, **dict(zip(names, node.args, strict=False)), **node.kwargs}
    else:
        return None

    def pair(value) -> tuple[int, int]:
        return (value, value) if isinstance(value, int) else tuple(value)

    kernel = pair(options["kernel_size"])
    padding = pair(options["padding"])
    if kind == "max_pool" and (pair(options["dilation"]) != (1, 1)
                               or options["return_indices"]):
        raise WorkloadError(f"{node.name}: max pooling with dilation or return_indices is "
                            "not supported by simulate_model; use dilation=1")
    if not options["count_include_pad"] and any(padding):
        raise WorkloadError(
            f"{node.name}: average pooling with count_include_pad=False (a divisor that "
            "changes at the border) is not supported by simulate_model; use "
            "count_include_pad=True (the device's zero padding counts) or padding=0")
    return WindowPool(kind, kernel, pair(options["stride"] or kernel),  # torch: the kernel
                      padding, options["divisor_override"] or kernel[0] * kernel[1],
                      bool(options["ceil_mode"]))


def nonnegative(steps: list) -> bool:
    """Whether the last step's output cannot be negative: a layer with ReLU/ReLU6, or a pool
    over such an output."""
    from tensorforge.compiler.quantize import QuantLayer  # quantize imports this module
    for step in reversed(steps):
        if isinstance(step, QuantLayer) and not step.kind.endswith("pool"):
            return step.activation in ("relu", "relu6")
        if not isinstance(step, QuantLayer):
            return False
    return False


def window_pool_layer(name: str, pool: WindowPool, shape: tuple[int, ...],
                      out_shape: tuple[int, ...], scale: float, nonnegative_input: bool
                      ) -> QuantLayer:
    """Average or max pooling as a device layer (module docstring) from the ``(C, H, W)``
    input to ``(C, OH, OW)``, all-ones kernel."""
    from tensorforge.compiler.quantize import QuantLayer  # quantize imports this module
    (kh, kw), (sh, sw), (ph, pw) = pool.kernel, pool.stride, pool.padding
    floor = tuple((size + 2 * p - k) // s + 1 for size, k, s, p in zip(
        shape[1:], pool.kernel, pool.stride, pool.padding, strict=True))
    if pool.ceil_mode and tuple(out_shape[1:]) != floor:  # else ceil mode changes nothing
        raise WorkloadError(f"{name}: pooling with ceil_mode=True, where it adds a partial "
                            "window, is not supported by simulate_model; use ceil_mode=False "
                            "or an input size the windows tile")
    if pool.kind == "max_pool" and (ph or pw) and not nonnegative_input:
        raise WorkloadError(
            f"{name}: a padded max pool runs on the device only after a ReLU or ReLU6 (the "
            "LOADs pad with zeros, which is max pooling's -inf padding only on non-negative "
            "input); use padding=0 or put the pool after the activation")
    channels = shape[0]
    rows, cols = window_expression(sh, "x", 1, "r", ph), window_expression(sw, "y", 1, "s", pw)
    reduction = "max=" if pool.kind == "max_pool" else "+="
    workload = parse_workload(f"C[c,x,y] {reduction} A[c,{rows},{cols}] * B[c,r,s]",
                              {"c": channels, "x": out_shape[1], "y": out_shape[2], "r": kh,
                               "s": kw, "A": shape}, name=name)
    # a max pool's identity stage stores the window maxima themselves
    params = averaging_params(channels, 1 if pool.kind == "max_pool" else pool.divisor)
    return QuantLayer(name, pool.kind, workload, np.ones((channels, kh, kw), dtype=np.int64),
                      params, "c", "none", scale, scale, (sh, sw, ph, pw, 1, 1), (kh, kw))


__all__ = ["averaging_params", "global_pool_layer", "is_global_pool", "nonnegative",
           "WindowPool", "window_pool",
           "window_pool_layer"]
