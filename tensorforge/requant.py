"""The output pipeline's integer semantics: bias, requantization, activation clamp (numpy).

This is the reference the hardware (``hw/output_pipeline.py``), the functional simulator and
the compiler share. Per element, with ``B = acc_bits`` and ``x`` an accumulator value:

1. ``t = wrap_B(x + bias)``
2. ``u = (t * multiplier + 2**(B-2)) >> (B-1)`` (arithmetic shift), except ``t ==
   multiplier == -2**(B-1)``, which gives ``2**(B-1) - 1``: gemmlowp's
   ``SaturatingRoundingDoublingHighMul`` (its round-half-away-from-zero nudge and truncating
   division reduce to this one floor for every product).
3. ``v = u >> shift`` rounded half away from zero: gemmlowp's ``RoundingDivideByPOT``.
4. ``w = wrap_B(v + zero_point)``; the result is ``min(max(w, low), high)``, an ``in_bits``
   value since ``low`` and ``high`` are.

That is TFLite's ``MultiplyByQuantizedMultiplier`` for a right shift (a real scale below 1,
the case of every convolution and fully connected layer), followed by its output offset and
activation clamp. Activations are clamp bounds (`activation_range`): ReLU clamps below at the
output zero point, ReLU6 also above at the quantized 6.

Parameters travel as a *block* of three accumulator lines per set of lanes (`param_lines`):
bias, multiplier, and a packed line whose ``acc_bits`` lanes hold ``shift`` (bits 0..7), then
``zero_point``, ``low`` and ``high`` (``in_bits`` each, two's complement), so
``acc_bits >= 8 + 3 * in_bits``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from tensorforge.errors import ConfigError
from tensorforge.intrinsics import wrap

PARAM_LINES = 3  # bias, multiplier, packed (shift, zero point, low, high)
SHIFT_BITS = 8


class Activation(enum.StrEnum):
    NONE = "none"
    RELU = "relu"
    RELU6 = "relu6"


def fits(in_bits: int, acc_bits: int) -> bool:
    """Whether the packed parameter line holds shift, zero point and both bounds."""
    return acc_bits >= SHIFT_BITS + 3 * in_bits


def rounding_doubling_high_mul(t: np.ndarray, multiplier: np.ndarray, acc_bits: int
                               ) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` at ``acc_bits`` (step 2 above)."""
    t = np.asarray(t, dtype=object)
    multiplier = np.asarray(multiplier, dtype=object)
    low = -(1 << (acc_bits - 1))
    product = (t * multiplier + (1 << (acc_bits - 2))) >> (acc_bits - 1)
    overflow = (t == low) & (multiplier == low)
    return np.where(overflow, (1 << (acc_bits - 1)) - 1, product)


def rounding_divide_by_pot(u: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``u / 2**shift`` rounded half away from zero."""
    u = np.asarray(u, dtype=object)
    shift = np.asarray(shift, dtype=object)
    mask = (np.ones_like(shift) << shift) - 1
    remainder = u & mask
    threshold = (mask >> 1) + (u < 0)
    return (u >> shift) + (remainder > threshold)


def requantize(acc, bias, multiplier, shift, zero_point, low, high, *, acc_bits: int
               ) -> np.ndarray:
    """The output pipeline on ``acc`` (any shape; parameters broadcast against it), int64."""
    t = _wrap_exact(np.asarray(acc, dtype=object) + np.asarray(bias, dtype=object), acc_bits)
    u = rounding_doubling_high_mul(t, multiplier, acc_bits)
    v = rounding_divide_by_pot(u, shift)
    w = _wrap_exact(v + np.asarray(zero_point, dtype=object), acc_bits)
    return np.minimum(np.maximum(w, low), high).astype(np.int64)


def _wrap_exact(values: np.ndarray, bits: int) -> np.ndarray:
    """`wrap` on Python integers (object arrays), which do not overflow at 64 bits."""
    half = 1 << (bits - 1)
    return (values + half) % (1 << bits) - half


def quantize_multiplier(scale: float, acc_bits: int = 32) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``scale ~= multiplier / 2**(acc_bits-1) / 2**shift``
    (TFLite's ``QuantizeMultiplier`` for scales in (0, 1))."""
    if not 0 < scale < 1:
        raise ConfigError(f"the output pipeline takes requantization scales in (0, 1), "
                          f"not {scale}; fold a larger scale into the weights")
    mantissa, exponent = math.frexp(scale)  # scale = mantissa * 2**exponent, 0.5 <= m < 1
    multiplier = round(mantissa * (1 << (acc_bits - 1)))
    if multiplier == 1 << (acc_bits - 1):
        multiplier //= 2
        exponent += 1
    shift = -exponent
    if shift >= acc_bits:
        return 0, 0
    return multiplier, shift


def activation_range(activation: Activation | str, in_bits: int, zero_point: int = 0,
                     scale: float | None = None) -> tuple[int, int]:
    """``(low, high)`` clamp bounds of an activation on ``in_bits`` outputs (TFLite's
    ``CalculateActivationRangeQuantized``); ReLU6 needs the output ``scale``."""
    qmin, qmax = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    match Activation(activation):
        case Activation.NONE:
            return qmin, qmax
        case Activation.RELU:
            return max(qmin, zero_point), qmax
        case Activation.RELU6:
            if scale is None or scale <= 0:
                raise ConfigError("ReLU6 needs the output scale (a positive float)")
            return max(qmin, zero_point), min(qmax, zero_point + round(6.0 / scale))


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class OutputParams:
    """Per-channel parameters of the output pipeline (arrays of one length, the channels)."""

    bias: np.ndarray
    multiplier: np.ndarray
    shift: np.ndarray
    zero_point: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def per_channel(cls, channels: int, *, bias=0, multiplier, shift, zero_point=0,
                    low, high) -> OutputParams:
        values = [np.broadcast_to(np.asarray(v, dtype=np.int64), (channels,)).copy()
                  for v in (bias, multiplier, shift, zero_point, low, high)]
        return cls(*values)

    @property
    def channels(self) -> int:
        return len(self.bias)

    def check(self, in_bits: int, acc_bits: int) -> None:
        """Raise `ConfigError` unless every value fits its field."""
        if not fits(in_bits, acc_bits):
            raise ConfigError(f"the output pipeline packs shift, zero point and bounds into one "
                              f"{acc_bits}-bit lane: acc_bits must be at least "
                              f"{SHIFT_BITS + 3 * in_bits} for in_bits {in_bits}")
        acc_lo, acc_hi = -(1 << (acc_bits - 1)), (1 << (acc_bits - 1)) - 1
        in_lo, in_hi = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
        ranges = {"bias": (acc_lo, acc_hi), "multiplier": (acc_lo, acc_hi),
                  "shift": (0, acc_bits - 1), "zero_point": (in_lo, in_hi),
                  "low": (in_lo, in_hi), "high": (in_lo, in_hi)}
        for name, (lo, hi) in ranges.items():
            values = getattr(self, name)
            if len(values) != self.channels:
                raise ConfigError(f"output parameter {name} has {len(values)} values, "
                                  f"bias has {self.channels}")
            if values.size and (values.min() < lo or values.max() > hi):
                raise ConfigError(f"output parameter {name} must lie in {lo}..{hi}")

    def apply(self, acc: np.ndarray, channel_axis: int, acc_bits: int) -> np.ndarray:
        """`requantize` of ``acc`` with channel ``c`` of ``channel_axis`` using entry ``c``."""
        acc = np.asarray(acc, dtype=np.int64)
        shape = [1] * acc.ndim
        shape[channel_axis] = self.channels
        return requantize(acc, *(getattr(self, n).reshape(shape) for n in _NAMES),
                          acc_bits=acc_bits)


_NAMES = ("bias", "multiplier", "shift", "zero_point", "low", "high")


def params_from_scales(input_scale: float, weight_scales, output_scale: float, *,
                       bias=None, zero_point: int = 0, activation: Activation | str = "none",
                       in_bits: int = 8, acc_bits: int = 32) -> OutputParams:
    """The per-channel parameters of a layer quantized TFLite's way: int8 inputs at
    ``input_scale`` (zero point 0), per-channel symmetric weights at ``weight_scales``, a
    float ``bias`` per channel quantized to the accumulator's scale ``input_scale x
    weight_scale``, outputs at ``output_scale`` and ``zero_point``, then ``activation``."""
    weight_scales = np.atleast_1d(np.asarray(weight_scales, dtype=np.float64))
    channels = len(weight_scales)
    acc_scales = input_scale * weight_scales
    pairs = [quantize_multiplier(float(s / output_scale), acc_bits) for s in acc_scales]
    bias_values = np.zeros(channels) if bias is None else np.asarray(bias, dtype=np.float64)
    low, high = activation_range(activation, in_bits, zero_point, output_scale)
    return OutputParams.per_channel(
        channels, bias=np.round(bias_values / acc_scales).astype(np.int64),
        multiplier=[m for m, _ in pairs], shift=[s for _, s in pairs],
        zero_point=zero_point, low=low, high=high)


def pack_lane(shift, zero_point, low, high, in_bits: int) -> np.ndarray:
    """The packed parameter lane (unsigned, below ``2**(8 + 3*in_bits)``)."""
    mask = (1 << in_bits) - 1
    values = [np.asarray(v, dtype=np.int64) for v in (shift, zero_point, low, high)]
    packed = values[0] & ((1 << SHIFT_BITS) - 1)
    for position, value in enumerate(values[1:]):
        packed = packed | ((value & mask) << (SHIFT_BITS + position * in_bits))
    return packed


def unpack_lane(packed, in_bits: int) -> tuple[np.ndarray, ...]:
    """``(shift, zero_point, low, high)`` from packed lanes (inverse of `pack_lane`)."""
    packed = np.asarray(packed, dtype=np.int64)
    shift = packed & ((1 << SHIFT_BITS) - 1)
    fields = [wrap((packed >> (SHIFT_BITS + k * in_bits)) & ((1 << in_bits) - 1), in_bits)
              for k in range(3)]
    return (shift, *fields)


def param_lines(params: OutputParams, channels: np.ndarray, in_bits: int, acc_bits: int
                ) -> np.ndarray:
    """The ``PARAM_LINES x len(channels)`` block whose lane ``e`` holds the parameters of
    channel ``channels[e]`` (a negative channel: zeros, a lane nothing reads)."""
    channels = np.asarray(channels, dtype=np.int64)
    used = channels >= 0
    pick = np.where(used, channels, 0)

    def lane(name):
        return np.where(used, getattr(params, name)[pick], 0)

    packed = pack_lane(lane("shift"), lane("zero_point"), lane("low"), lane("high"), in_bits)
    return np.stack([lane("bias"), lane("multiplier"), wrap(packed, acc_bits)])


def requantize_lines(acc_lines: np.ndarray, block: np.ndarray, in_bits: int, acc_bits: int
                     ) -> np.ndarray:
    """STORE's output pipeline: accumulator lines (``rows x lanes``) through the parameter
    ``block`` (`param_lines`), lane by lane; what the hardware computes."""
    shift, zero_point, low, high = unpack_lane(block[2], in_bits)
    return requantize(acc_lines, block[0], block[1], shift, zero_point, low, high,
                      acc_bits=acc_bits)
