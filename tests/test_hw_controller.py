"""The controller's fetch/dispatch/token gates (Amaranth simulator), and the whole accelerator
running a hand-written tiled GEMM on Verilator against numpy."""

from __future__ import annotations

import functools
import random

import pytest

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    DmaConfig,
    ScratchpadConfig,
)
from tensorforge.hw.accelerator import TOP_NAME, Accelerator

ACCELERATOR_CONFIGS = {
    "gemm4x4-ws-bus64": AcceleratorConfig(
        array=ArrayConfig(rows=4, cols=4, interconnect="systolic", dataflow="ws"),
        scratchpad=ScratchpadConfig(capacity=2048, banks=4, accumulator=1024),
        dma=DmaConfig(bus_bits=64, max_burst=16),
    ),
    "gemm4x8-os-bus32-3banks": AcceleratorConfig(
        array=ArrayConfig(rows=4, cols=8, interconnect="none", dataflow="os"),
        scratchpad=ScratchpadConfig(capacity=2048, banks=3, accumulator=2048),
        dma=DmaConfig(bus_bits=32, max_burst=4),
    ),
}


@functools.cache
def accelerator_model(name: str):
    from tensorforge.sim.rtl_harness import build_model

    return build_model(Accelerator(ACCELERATOR_CONFIGS[name]), top=TOP_NAME)


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(ACCELERATOR_CONFIGS))
def test_accelerator_runs_tiled_gemm(name, tmp_path, cocotb_benches):
    config = ACCELERATOR_CONFIGS[name]
    seed = random.SystemRandom().randrange(1 << 31)
    sizes = random.Random(seed)
    m, n, k = (sizes.randint(5, 13) for _ in range(3))
    results = accelerator_model(name).run(
        cocotb_benches / "bench_accelerator.py",
        test_dir=tmp_path,
        config={"accelerator": config.to_dict(), "m": m, "n": n, "k": k},
        seed=seed,
    )
    assert len(results.passed) == 1, f"seed {seed}"
