"""Random programs for the differential fuzzer: (configuration, workload, mapping, memory).

Why a bounded pool of configurations: each one costs a Verilator build (about a minute),
while a program on a built model costs well under a second. So configurations come from
`POOL` (twelve of the regression and matrix accelerators, `tensorforge.sim.rtl_matrix`, which
the default test suite builds anyway) and everything else varies freely: the workload kind
and its sizes, the mapping (the default mapper's, or a seeded random legal one over the
device's tensorize choices), the DRAM's latency, bandwidth and bursts in flight, and the
input data.

Case ``index`` of a campaign with seed ``seed`` is drawn from its own generator,
``default_rng((seed, index))``, so it is the same case whatever ``--programs`` is, and a
case file (`FuzzCase.to_dict`) carries the configuration itself, so it replays even after the
pool changed.

The ``space`` pool (``tensorforge fuzz --pool space``) leaves the tested tables: it draws
`SPACE_CONFIGS` accelerators from the default design space (`tensorforge.dse.hwspace`) with
every primitive free but the array's size, so the DMA's bus widths and bursts, bank counts,
local stores and buffer sizes a sweep can propose are fuzzed too. The tables had no burst
longer than the instruction fetch's queue, which is how a design a sweep proposed could hang
on the RTL unseen (fixed in a964fef). Each of its configurations is one more Verilator build,
so CI keeps to the tables; the space pool is for campaigns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.fidelity_cases import TEXTS, FidelityCase
from tensorforge.errors import MappingError
from tensorforge.intrinsics import Intrinsic
from tensorforge.memory import MemorySystem
from tensorforge.sim.rtl_matrix import all_configs

#: The configurations a campaign draws from: all eight regression ones and four matrix ones
#: that cover what the regression ones do not (DOT on `none` and `full`, GEMV on a systolic
#: array, CONV2D on `none`, input-stationary GEMM on a systolic array).
POOL = (
    "gemm4x4-systolic-ws", "gemm4x8-none-os-3banks", "gemm4x4-full-is-bus128",
    "dot8-systolic-os", "gemv4x4-full-ws-5banks", "gemv4x6-none-os", "conv4x4-systolic-ws",
    "conv4x4-full-os", "dot4-full-os", "gemv3x2-systolic-ws", "conv2x2-none-ws",
    "gemm2x2-systolic-is",
)

#: Pools by name (``tensorforge fuzz --pool``): ``all`` is every regression and matrix
#: configuration, one per intrinsic x dataflow x interconnect and more (24; the default test
#: suite builds each of them too).
POOLS: dict[str, tuple[str, ...]] = {"default": POOL, "all": tuple(all_configs())}
#: Every pool name `pool_configs` accepts: ``repeat`` is the default pool built with
#: ``controller.repeat`` (its programs fold their transfers, `compiler.repeats`).
POOL_NAMES = (*POOLS, "space", "repeat")

#: The default design space, arrays kept to 2-4 PEs a side (each builds in about a minute)
#: and buffers to 32-64 KiB (the sizes the fuzzer's small workloads can use).
SPACE_OVERRIDES = {
    "rows": {"low": 2, "high": 4, "power_of_two": True},
    "cols": {"low": 2, "high": 4, "power_of_two": True},
    "spad_kib": {"low": 32, "high": 64, "power_of_two": True},
    "acc_kib": {"low": 32, "high": 64, "power_of_two": True},
}
SPACE_CONFIGS = 8
#: Keeps the space pool's generator apart from the cases' ``(seed, index)`` streams.
SPACE_STREAM = 0x5BACE

Pool = dict[str, AcceleratorConfig] | tuple[str, ...]

#: Workload kinds (`fidelity_cases.TEXTS`) each intrinsic can implement.
KINDS: dict[Intrinsic, tuple[str, ...]] = {
    Intrinsic.GEMM: ("gemm", "conv", "conv_pad1", "conv_stride2_pad1", "ttm", "mttkrp"),
    Intrinsic.GEMV: ("gemv", "gemm", "conv_pad1", "conv_stride2_pad1", "depthwise", "ttm",
                     "mttkrp"),
    Intrinsic.DOT: ("dot", "gemv", "gemm", "conv_pad1", "depthwise", "ttm", "mttkrp"),
    Intrinsic.CONV2D: ("conv", "conv_pad1", "conv_stride2_pad1"),
}

#: Inclusive size ranges per index name; small, so a program simulates in well under a second.
SIZES = {"i": (1, 20), "j": (1, 20), "k": (1, 24), "l": (1, 6), "c": (1, 6), "x": (1, 7),
         "y": (1, 7), "r": (1, 3), "s": (1, 3)}
#: Convolutions on the CONV2D intrinsic need the full kernel: its rows of taps are fixed.
KERNEL = 3
LATENCIES = (0, 1, 4, 16, 32, 64)
BANDWIDTHS = (None, None, 2.0, 4.0, 8.0)  # bytes a cycle; None is the bus rate
OUTSTANDING = (None, None, 1, 2, 4, 16)
RANDOM_MAPPING_SHARE = 0.75
MAX_TRIES = 50


@dataclass(frozen=True)
class FuzzCase:
    """One drawn program; ``mapping`` is ``"default"`` or ``"random:N"`` as in `FidelityCase`."""

    index: int
    config_name: str
    config: AcceleratorConfig
    kind: str
    sizes: str
    mapping: str
    memory: MemorySystem
    seed: int  # of the input data

    @property
    def name(self) -> str:
        return f"case{self.index}-{self.config_name}-{self.kind}"

    def _fidelity(self) -> FidelityCase:
        """The same program as a `FidelityCase`, whose workload and mapping resolution it reuses."""
        return FidelityCase(self.name, "fuzz", self.config_name, self.config, self.kind,
                            self.sizes, self.mapping, self.memory.latency, self.seed)

    def workload(self) -> Workload:
        return self._fidelity().workload()

    def resolve_mapping(self) -> Mapping:
        return self._fidelity().resolve_mapping(self.memory)

    def inputs(self) -> dict[str, np.ndarray]:
        return self.workload().random_inputs(np.random.default_rng(self.seed))

    def describe(self) -> str:
        return (f"{self.kind} {self.sizes} on {self.config_name}, {self.mapping} mapping, "
                f"memory {self.memory.describe()}, inputs seed {self.seed}")

    def to_dict(self) -> dict:
        return {"index": self.index, "config_name": self.config_name,
                "config": self.config.to_dict(), "kind": self.kind, "sizes": self.sizes,
                "mapping": self.mapping, "memory": self.memory.to_dict(), "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict) -> FuzzCase:
        return cls(index=int(data["index"]), config_name=str(data["config_name"]),
                   config=AcceleratorConfig.from_dict(data["config"]), kind=str(data["kind"]),
                   sizes=str(data["sizes"]), mapping=str(data["mapping"]),
                   memory=MemorySystem.from_dict(data["memory"]), seed=int(data["seed"]))


def _sizes(kind: str, intrinsic: Intrinsic, rng: np.random.Generator) -> str:
    chosen = {}
    for name in _index_names(kind):
        low, high = SIZES[name]
        chosen[name] = int(rng.integers(low, high, endpoint=True))
    if intrinsic is Intrinsic.CONV2D:
        chosen["r"] = chosen["s"] = KERNEL
    return ",".join(f"{name}={size}" for name, size in chosen.items())


def _index_names(kind: str) -> list[str]:
    """Index names of a workload text, in order of first appearance."""
    names: list[str] = []
    for char in TEXTS[kind]:
        if char in SIZES and char not in names:
            names.append(char)
    return names


def _memory(rng: np.random.Generator) -> MemorySystem:
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    return MemorySystem(latency=pick(LATENCIES), bandwidth=pick(BANDWIDTHS),
                        outstanding=pick(OUTSTANDING))


def space_pool(seed: int) -> dict[str, AcceleratorConfig]:
    """`SPACE_CONFIGS` distinct accelerators of the default design space (`SPACE_OVERRIDES`),
    drawn from the campaign's seed; named by their primitives."""
    from tensorforge.dse.hwspace import HardwareSpace

    space = HardwareSpace(SPACE_OVERRIDES)
    rng = np.random.default_rng((seed, SPACE_STREAM))
    pool: dict[str, AcceleratorConfig] = {}
    for _ in range(100 * SPACE_CONFIGS):
        config = space.to_config(space.space.sample(1, rng)[0])
        if config not in pool.values():
            pool[_space_name(config)] = config
        if len(pool) == SPACE_CONFIGS:
            break
    return pool


def _space_name(config: AcceleratorConfig) -> str:
    array, pad, dma = config.array, config.scratchpad, config.dma
    return (f"{config.intrinsic.value}{array.rows}x{array.cols}-{array.interconnect.value}-"
            f"{array.dataflow.value}-local{int(array.local_bytes)}-{pad.capacity // 1024}k"
            f"{pad.banks}b-acc{pad.accumulator // 1024}k-bus{dma.bus_bits}x{dma.max_burst}")


def pool_configs(name: str, seed: int) -> dict[str, AcceleratorConfig]:
    """The configurations of pool ``name`` (one of `POOL_NAMES`) for campaign ``seed``."""
    if name == "space":
        return space_pool(seed)
    if name == "repeat":
        return {f"{key}+repeat": dataclasses.replace(
                    config, controller=dataclasses.replace(config.controller, repeat=True))
                for key, config in _configs_of(POOL).items()}
    return _configs_of(POOLS[name])


def _configs_of(pool: Pool) -> dict[str, AcceleratorConfig]:
    if isinstance(pool, dict):
        return dict(pool)
    table = all_configs()
    return {name: table[name] for name in pool}


def draw_case(seed: int, index: int, pool: Pool = POOL) -> FuzzCase:
    """Case ``index`` of campaign ``seed`` on ``pool`` (names of `rtl_matrix` configurations,
    or name -> configuration); redraws sizes (up to `MAX_TRIES`) until the workload has a
    legal mapping on the drawn configuration."""
    rng = np.random.default_rng((seed, index))
    configs = _configs_of(pool)
    names = list(configs)
    config_name = names[int(rng.integers(len(names)))]
    config = configs[config_name]
    kinds = KINDS[config.intrinsic]
    memory = _memory(rng)
    for _ in range(MAX_TRIES):
        kind = kinds[int(rng.integers(len(kinds)))]
        sizes = _sizes(kind, config.intrinsic, rng)
        mapping = ("default" if rng.random() >= RANDOM_MAPPING_SHARE
                   else f"random:{int(rng.integers(1 << 31))}")
        case = FuzzCase(index, config_name, config, kind, sizes, mapping, memory,
                        int(rng.integers(1 << 31)))
        try:
            case.resolve_mapping()
        except MappingError:
            continue
        return case
    raise MappingError(f"fuzz case {index} of seed {seed}: no mappable workload on "
                       f"{config_name} in {MAX_TRIES} draws")


def draw_cases(count: int, seed: int, pool: Pool = POOL) -> list[FuzzCase]:
    """Cases ``0 .. count-1`` of campaign ``seed``."""
    configs = _configs_of(pool)
    return [draw_case(seed, index, configs) for index in range(count)]
