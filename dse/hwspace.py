"""The accelerator design space: HASCO's hardware primitives (section V-A) as search variables.

Every primitive of `AcceleratorConfig` is one variable of a `Space`, so the optimizers search
accelerators without knowing what one is. Pruning works as in HASCO's Listing 2: a primitive
can be fixed (``rows = 16``), given a range (``spad_kib = {low = 32, high = 512,
power_of_two = true}``) or a list (``interconnect = {choices = ["systolic", "none"]}``), from
a TOML file or a dict; whatever is not mentioned keeps the default space's domain.

The space is conditional: primitives that contradict each other (a weight-stationary CONV2D
with no per-PE memory for its taps, a scratchpad too large for the ISA's address field, a
dataflow the intrinsic has no schedule for) are never proposed. The space's repair
(`tensorforge.dse.hw_repair`) moves every drawn point to the nearest buildable one, so
every optimizer's ``ask`` returns points `HardwareSpace.to_config` accepts. A point given
by hand may still contradict itself: `to_config` raises the `ConfigError`, and the co-design
loop records it as infeasible with that message.

Both intrinsics of the default space run every layer of every zoo model, some only through
padded tensorize choices that idle part of the array (depthwise convolutions on either,
strided convolutions and matrix products on CONV2D; `benchmarks/coverage_zoo.py`).
`tensorforge.dse.coverage` lists what a space's intrinsics cannot run and why, and the sweep
prices such a layer on the host rather than failing the design.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    DmaConfig,
    PrecisionConfig,
    ScratchpadConfig,
    read_toml,
)
from tensorforge.dse.hw_repair import HardwareRepair
from tensorforge.dse.space import Space, variable_from_spec
from tensorforge.errors import ConfigError
from tensorforge.units import Bytes

#: Primitive name -> its domain in the default space, in the TOML/dict form of `Space`.
#: Sized for a laptop sweep: about 1.6 million grid points (fewer buildable ones: the repair
#: moves the rest), every intrinsic with each dataflow it has a schedule for, arrays from 8x8
#: to 64x64 (the largest ones exceed HASCO's 2 W edge budget under the first-order model),
#: scratchpads from 32 KiB to 512 KiB, accumulators from 32 KiB to 128 KiB, and the DMA bus
#: width, which the area/power model charges for (its DMA term).
DEFAULT_SPACE: dict[str, Any] = {
    "intrinsic": {"choices": ["gemm", "conv2d", "gemv", "dot"]},
    "rows": {"low": 8, "high": 64, "power_of_two": True},
    "cols": {"low": 8, "high": 64, "power_of_two": True},
    "interconnect": {"choices": ["systolic", "none", "full"]},
    "dataflow": {"choices": ["ws", "os", "is"]},
    "local_bytes": {"choices": [0, 16, 64]},
    "spad_kib": {"low": 32, "high": 512, "power_of_two": True},
    "banks": {"choices": [1, 2, 4, 8]},
    # from 32 KiB: at 16 KiB a 64x64 array's accumulator holds a single output block, which
    # the mapper cannot tile mobilenet_v2's strided conv1 into on CONV2D
    "acc_kib": {"low": 32, "high": 128, "power_of_two": True},
    "bus_bits": {"choices": [64, 128, 256]},
    "max_burst": {"low": 4, "high": 64, "power_of_two": True},
    # the cost model prices its latency hiding (cost_trace, rtl_parameters) but the area model
    # not yet its queues, so a search would always take the most; a space file may search it,
    # e.g. {choices=[4, 8, 16]}
    "outstanding": 16,
    "in_bits": 8,
    "acc_bits": 32,
    "conv_taps": 3,
}

#: What each variable means, for error messages and ``--help``.
PRIMITIVES: dict[str, str] = {
    "intrinsic": "hardware intrinsic: dot, gemv, gemm, conv2d",
    "rows": "PE array rows (reshapeArray)",
    "cols": "PE array columns (reshapeArray)",
    "interconnect": "linkPEs: none, systolic, full",
    "dataflow": "stationary operand: ws, os, is",
    "local_bytes": "per-PE local memory in bytes (distributeCache)",
    "spad_kib": "shared scratchpad in KiB (addCache)",
    "banks": "scratchpad banks (partitionBanks)",
    "acc_kib": "accumulator buffer in KiB",
    "bus_bits": "DMA bus width in bits (burstTransfer)",
    "max_burst": "longest AXI burst in beats (burstTransfer)",
    "outstanding": "bursts each DMA unit keeps in flight (burstTransfer)",
    "in_bits": "operand width in bits",
    "acc_bits": "accumulator width in bits",
    "conv_taps": "kernel taps of the CONV2D intrinsic",
}


class HardwareSpace:
    """A `Space` over the HASCO primitives plus the point <-> `AcceleratorConfig` mapping."""

    def __init__(self, spec: Mapping[str, Any] | None = None) -> None:
        """``spec`` overrides `DEFAULT_SPACE` per primitive; unknown names are a ConfigError."""
        spec = dict(spec or {})
        unknown = sorted(set(spec) - set(DEFAULT_SPACE))
        if unknown:
            known = ", ".join(f"{name} ({PRIMITIVES[name]})" for name in DEFAULT_SPACE)
            raise ConfigError(f"unknown design-space primitives {unknown}; known: {known}")
        self.spec: dict[str, Any] = {
            name: spec.get(name, DEFAULT_SPACE[name]) for name in DEFAULT_SPACE
        }
        variables = [variable_from_spec(name, value) for name, value in self.spec.items()]
        repair = HardwareRepair([v.name for v in variables], [v.values for v in variables],
                                self.to_config)
        self.space = Space(variables, repair=repair)

    @classmethod
    def from_toml(cls, path: str | Path) -> HardwareSpace:
        """Read a space file: primitives at the top level or under a ``[space]`` table."""
        data = read_toml(path, "design-space file")
        if set(data) == {"space"} and isinstance(data["space"], dict):
            data = data["space"]
        return cls(data)

    def __repr__(self) -> str:
        return f"HardwareSpace({self.spec!r})"

    @property
    def cardinality(self) -> int:
        return self.space.cardinality

    def free_variables(self) -> list[str]:
        """Names of the primitives actually searched (more than one value)."""
        return [v.name for v in self.space.variables if v.size > 1]

    def to_config(self, point: Mapping[str, Any]) -> AcceleratorConfig:
        """The accelerator of a design point; ConfigError when its primitives contradict."""
        try:
            return AcceleratorConfig(
                intrinsic=point["intrinsic"],
                array=ArrayConfig(
                    rows=point["rows"],
                    cols=point["cols"],
                    interconnect=point["interconnect"],
                    dataflow=point["dataflow"],
                    local_bytes=Bytes(point["local_bytes"]),
                ),
                scratchpad=ScratchpadConfig(
                    capacity=Bytes.kib(point["spad_kib"]),
                    banks=point["banks"],
                    accumulator=Bytes.kib(point["acc_kib"]),
                ),
                dma=DmaConfig(
                    bus_bits=point["bus_bits"],
                    max_burst=point["max_burst"],
                    outstanding=point["outstanding"],
                ),
                precision=PrecisionConfig(in_bits=point["in_bits"], acc_bits=point["acc_bits"]),
                conv_taps=point["conv_taps"],
            )
        except KeyError as missing:
            raise ConfigError(f"design point lacks primitive {missing.args[0]!r}") from None
        except (TypeError, ValueError) as error:
            if isinstance(error, ConfigError):
                raise
            raise ConfigError(f"design point {dict(point)!r}: {error}") from None

    @staticmethod
    def point_of(config: AcceleratorConfig) -> dict[str, Any]:
        """The design point of a configuration (inverse of `to_config`)."""
        return {
            "intrinsic": config.intrinsic.value,
            "rows": config.array.rows,
            "cols": config.array.cols,
            "interconnect": config.array.interconnect.value,
            "dataflow": config.array.dataflow.value,
            "local_bytes": int(config.array.local_bytes),
            "spad_kib": _kib(config.scratchpad.capacity),
            "banks": config.scratchpad.banks,
            "acc_kib": _kib(config.scratchpad.accumulator),
            "bus_bits": config.dma.bus_bits,
            "max_burst": config.dma.max_burst,
            "outstanding": config.dma.outstanding,
            "in_bits": config.precision.in_bits,
            "acc_bits": config.precision.acc_bits,
            "conv_taps": config.conv_taps,
        }

    def describe(self) -> str:
        """One line per primitive: fixed value or searched domain."""
        lines = []
        for variable in self.space.variables:
            values = variable.values
            shown = repr(values[0]) if len(values) == 1 else "{" + ", ".join(map(str, values)) + "}"
            lines.append(f"{variable.name:12s} {shown}")
        return "\n".join(lines)


def _kib(size: int) -> int | float:
    kib = size / 1024
    return int(kib) if kib == int(kib) else kib
