"""The programs the cost model is fitted on and the disjoint programs it is judged on.

A *program* here is the unit of agreement between the cost model and the RTL: a configuration,
a workload, a mapping and the DRAM timing it runs under. Two sets:

* the **calibration set** (`calibration_cases`): the programs whose per-unit busy counters
  the terms of `dse.cost_parameters.CostParameters` were measured and regressed on
  (``benchmarks/check_cost_model_rtl.py`` prints the fit). Agreement here is fit, not
  prediction.
* the **held-out set** (`held_out_cases`): programs the model never saw. Its configurations
  cover every intrinsic x legal dataflow x interconnect (`tensorforge.config.DATAFLOWS`),
  non-square and one-row arrays, odd bank counts, three bus widths and burst limits; its
  workloads strided and padded convolutions, depthwise, pointwise, TTM and MTTKRP next to
  GEMM and GEMV, at sizes no calibration program has; its mappings are the default mapper's
  and seeded random legal ones; its DRAM adds 0 to 48 cycles per burst. Every case is drawn
  from fixed tables by rotation, so the set is the same on every machine.

`ci_sample` is the fixed 12-program part of the held-out set the default test suite runs: on
the configurations `tests/test_rtl_regression.py` builds anyway, so it costs no extra
Verilator build.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.mapping import Mapping, random_mapping
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import DATAFLOWS, AcceleratorConfig, Interconnect
from tensorforge.errors import MappingError
from tensorforge.intrinsics import Intrinsic
from tensorforge.memory import MemorySystem

CALIBRATION = "calibration"
HELD_OUT = "held-out"

#: Workload texts by kind (affine indices: strides and padding are in the text).
TEXTS = {
    "gemm": "C[i,j] += A[i,k] * B[k,j]",
    "gemv": "C[i] += A[i,k] * B[k]",
    "conv": "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
    "conv_pad1": "C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]",
    "conv_stride2_pad1": "C[k,x,y] += A[c,x*2+r-1,y*2+s-1] * B[k,c,r,s]",
    "depthwise": "C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]",
    "ttm": "C[i,j,l] += A[i,j,k] * B[k,l]",
    "mttkrp": "C[i,j] += A[i,k,l] * B[k,j] * D[l,j]",
    "dot": "C[i] += A[i,k] * B[i,k]",  # a row of dot products: only the DOT intrinsic maps it
}


@dataclass(frozen=True)
class FidelityCase:
    """One program: ``mapping`` is ``"default"`` (the default mapper's) or ``"random:N"`` (a
    random legal mapping drawn with seed N over the device's tensorize choices)."""

    name: str
    split: str
    config_name: str
    config: AcceleratorConfig
    kind: str
    sizes: str
    mapping: str = "default"
    dram_latency: int = 0
    seed: int = 1

    def workload(self) -> Workload:
        return parse_workload(TEXTS[self.kind], self.sizes, name=self.kind)

    def memory(self) -> MemorySystem:
        """The DRAM it runs on: ``dram_latency`` cycles, bus-rate bandwidth, no limit of its
        own on bursts in flight (the DMA's ``dma.outstanding`` bounds them)."""
        return latency_only(self.dram_latency)

    def resolve_mapping(self, memory: MemorySystem | None = None) -> Mapping:
        """The mapping this case runs (the default mapper's for ``memory``, by default the
        case's own, or its seeded random one)."""
        from tensorforge.compiler.mappers import default_mapping, device_choices

        workload = self.workload()
        if self.mapping == "default":
            return default_mapping(workload, self.config, memory or self.memory())
        seed = int(self.mapping.removeprefix("random:"))
        rng = np.random.default_rng(seed)
        choices = device_choices(workload, self.config)
        if not choices:
            raise MappingError(f"{self.name}: no tensorize choice on {self.config.describe()}")
        choice = choices[int(rng.integers(len(choices)))]
        return random_mapping(workload, choice, self.config, rng)

    def describe(self) -> str:
        return (f"{self.kind} {self.sizes} on {self.config_name}, {self.mapping} mapping, "
                f"DRAM +{self.dram_latency}")


def latency_only(latency: int) -> MemorySystem:
    """A DRAM that adds ``latency`` cycles a burst and limits nothing else."""
    return MemorySystem(latency=latency, bandwidth=None, outstanding=None)


def accelerator(intrinsic: str, pe: tuple[int, int], link: str, dataflow: str, *,
                banks: int = 4, bus: int = 64, burst: int = 16, local: int = 0,
                spad: int = 2048, acc: int = 1024) -> AcceleratorConfig:
    """A small accelerator of the RTL suites (cheap to build and to simulate)."""
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic,
        "array": {"rows": pe[0], "cols": pe[1], "interconnect": link, "dataflow": dataflow,
                  "local_bytes": local},
        "scratchpad": {"capacity": spad, "banks": banks, "accumulator": acc},
        "dma": {"bus_bits": bus, "max_burst": burst},
    })


# --- the calibration set: the programs the CostParameters terms were measured on ----------

CALIBRATION_CONFIGS = {
    "gemm4x4-systolic-ws": accelerator("gemm", (4, 4), "systolic", "ws"),
    "gemv4x6-none-os": accelerator("gemv", (4, 6), "none", "os"),
    "dot8-systolic-os": accelerator("dot", (8, 1), "systolic", "os"),
}
CALIBRATION_PROGRAMS = {
    "gemm4x4-systolic-ws": (("gemm", "i=16,j=16,k=16"), ("gemm", "i=32,j=24,k=40"),
                            ("conv_pad1", "k=8,c=4,x=6,y=6,r=3,s=3")),
    "gemv4x6-none-os": (("gemv", "i=48,k=40"), ("gemm", "i=16,j=16,k=16")),
    "dot8-systolic-os": (("gemv", "i=48,k=40"), ("gemm", "i=16,j=16,k=16")),
}


#: The unit terms are measured on ideal DRAM; the bursts in flight and round trips of the
#: memory system and the units (`cost_parameters.RTL_FITTED_TERMS`) on the same programs at these
#: latencies.
CALIBRATION_LATENCIES = (0, 16, 32, 48)


def calibration_cases() -> list[FidelityCase]:
    """The programs of ``benchmarks/check_cost_model_rtl.py`` (default mappings) at every
    `CALIBRATION_LATENCIES` DRAM latency."""
    return [
        FidelityCase(f"cal-{name}-{kind}-{sizes}/lat{latency}", CALIBRATION, name,
                     CALIBRATION_CONFIGS[name], kind, sizes, dram_latency=latency)
        for latency in CALIBRATION_LATENCIES
        for name, programs in CALIBRATION_PROGRAMS.items() for kind, sizes in programs
    ]


# --- the held-out set ---------------------------------------------------------------------

#: One configuration per intrinsic x legal dataflow x interconnect. The five marked (R) are
#: configurations of `tests/test_rtl_regression.py` (built by the default suite anyway); the
#: others differ from every calibration configuration in shape, banks, bus or burst.
HELD_OUT_CONFIGS: dict[str, AcceleratorConfig] = {
    "gemm3x5-none-ws-3banks": accelerator("gemm", (3, 5), "none", "ws", banks=3, burst=8),
    "gemm4x8-systolic-ws-5banks": accelerator("gemm", (4, 8), "systolic", "ws", banks=5,
                                              bus=128, spad=4096, acc=2048),
    "gemm2x6-full-ws-bus32": accelerator("gemm", (2, 6), "full", "ws", banks=2, bus=32,
                                         burst=4),
    "gemm4x8-none-os-3banks": accelerator("gemm", (4, 8), "none", "os", banks=3, bus=32,
                                          burst=4, acc=2048),  # (R)
    "gemm3x5-systolic-os": accelerator("gemm", (3, 5), "systolic", "os", banks=4),
    "gemm1x8-full-os": accelerator("gemm", (1, 8), "full", "os", banks=2),
    "gemm4x4-none-is-7banks": accelerator("gemm", (4, 4), "none", "is", banks=7),
    "gemm3x3-systolic-is-bus128": accelerator("gemm", (3, 3), "systolic", "is", banks=3,
                                              bus=128, burst=8),
    "gemm4x4-full-is-bus128": accelerator("gemm", (4, 4), "full", "is", banks=2, bus=128,
                                          burst=8),  # (R)
    "gemv3x5-none-os-3banks": accelerator("gemv", (3, 5), "none", "os", banks=3),
    "gemv8x4-systolic-os": accelerator("gemv", (8, 4), "systolic", "os", bus=128),
    "gemv1x8-full-os": accelerator("gemv", (1, 8), "full", "os", banks=2, burst=8),
    "gemv6x2-none-ws": accelerator("gemv", (6, 2), "none", "ws", banks=3, bus=32),
    "gemv5x5-systolic-ws": accelerator("gemv", (5, 5), "systolic", "ws", banks=5),
    "gemv4x4-full-ws-5banks": accelerator("gemv", (4, 4), "full", "ws", banks=5),  # (R)
    "dot6-none-os": accelerator("dot", (6, 1), "none", "os", banks=3),
    "dot5-systolic-os-bus32": accelerator("dot", (5, 1), "systolic", "os", bus=32, burst=8),
    "dot8-full-os": accelerator("dot", (8, 1), "full", "os", banks=2, bus=128),
    "conv3x3-none-ws": accelerator("conv2d", (3, 3), "none", "ws", banks=3, local=3,
                                   spad=4096),
    "conv4x4-systolic-ws": accelerator("conv2d", (4, 4), "systolic", "ws", local=3,
                                       spad=4096),  # (R)
    "conv2x4-full-ws-bus128": accelerator("conv2d", (2, 4), "full", "ws", bus=128,
                                          local=3, spad=4096),
    "conv3x5-none-os-5banks": accelerator("conv2d", (3, 5), "none", "os", banks=5, spad=4096),
    "conv2x3-systolic-os": accelerator("conv2d", (2, 3), "systolic", "os", banks=2, spad=4096),
    "conv4x4-full-os": accelerator("conv2d", (4, 4), "full", "os", spad=4096),  # (R)
}

#: Workloads each intrinsic runs in the held-out set, at sizes no calibration program has.
HELD_OUT_WORKLOADS: dict[Intrinsic, tuple[tuple[str, str], ...]] = {
    Intrinsic.GEMM: (
        ("gemm", "i=20,j=14,k=18"), ("conv_stride2_pad1", "k=6,c=4,x=5,y=4,r=3,s=3"),
        ("ttm", "i=4,j=5,k=6,l=7"), ("mttkrp", "i=5,j=6,k=4,l=3"),
        ("gemm", "i=12,j=24,k=9"), ("conv_pad1", "k=6,c=5,x=6,y=5,r=3,s=3"),
    ),
    Intrinsic.GEMV: (
        ("gemv", "i=30,k=22"), ("depthwise", "c=6,x=5,y=5,r=3,s=3"),
        ("mttkrp", "i=5,j=6,k=4,l=3"), ("gemm", "i=10,j=7,k=12"),
        ("ttm", "i=3,j=5,k=4,l=6"), ("gemv", "i=17,k=40"),
    ),
    Intrinsic.DOT: (
        ("gemv", "i=21,k=30"), ("gemm", "i=7,j=6,k=20"), ("depthwise", "c=5,x=4,y=5,r=3,s=3"),
    ),
    Intrinsic.CONV2D: (
        ("conv_pad1", "k=6,c=5,x=6,y=5,r=3,s=3"), ("conv", "k=8,c=3,x=4,y=4,r=3,s=3"),
        ("conv", "k=12,c=8,x=5,y=6,r=1,s=1"), ("conv_pad1", "k=4,c=3,x=7,y=7,r=3,s=3"),
    ),
}
MAPPINGS = ("default", "random:11", "random:23", "default", "random:37")
LATENCIES = (0, 8, 24, 48, 16)
PROGRAMS_PER_CONFIG = 3


@functools.cache
def held_out_cases() -> tuple[FidelityCase, ...]:
    """``PROGRAMS_PER_CONFIG`` programs per held-out configuration: workloads, mappings and
    DRAM latencies taken in rotation from the tables above (72 programs)."""
    mappings = itertools.cycle(MAPPINGS)
    latencies = itertools.cycle(LATENCIES)
    cases = []
    offset = {intrinsic: 0 for intrinsic in HELD_OUT_WORKLOADS}
    for name, config in HELD_OUT_CONFIGS.items():
        table = HELD_OUT_WORKLOADS[config.intrinsic]
        for _ in range(PROGRAMS_PER_CONFIG):
            kind, sizes = table[offset[config.intrinsic] % len(table)]
            offset[config.intrinsic] += 1
            mapping, latency = next(mappings), next(latencies)
            cases.append(FidelityCase(
                f"{name}/{kind}-{sizes}/{mapping}/lat{latency}", HELD_OUT, name, config,
                kind, sizes, mapping, latency))
    return tuple(cases)


#: Configurations of the CI sample: the held-out ones the default suite builds anyway.
CI_CONFIGS = ("gemm4x8-none-os-3banks", "gemm4x4-full-is-bus128", "gemv4x4-full-ws-5banks",
              "conv4x4-systolic-ws", "conv4x4-full-os")
CI_SAMPLE_SIZE = 12


def ci_sample() -> tuple[FidelityCase, ...]:
    """The fixed 12-program held-out sample of the default test run (see module docstring)."""
    cases = [c for c in held_out_cases() if c.config_name in CI_CONFIGS]
    return tuple(cases[:CI_SAMPLE_SIZE])


def coverage(cases) -> set[tuple[str, str, str]]:
    """(intrinsic, dataflow, interconnect) triples the cases' configurations cover."""
    return {(c.config.intrinsic.value, c.config.array.dataflow.value,
             c.config.array.interconnect.value) for c in cases}


def design_space_triples() -> set[tuple[str, str, str]]:
    """Every intrinsic x legal dataflow x interconnect."""
    return {(intrinsic.value, dataflow.value, link.value)
            for intrinsic, dataflows in DATAFLOWS.items() for dataflow in dataflows
            for link in Interconnect}
