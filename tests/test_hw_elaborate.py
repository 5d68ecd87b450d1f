"""Elaboration smoke test: `Accelerator` converts to Verilog over a grid of configurations, and
the Verilog passes ``verilator --lint-only -Wall`` with only the waivers below.

Waivers (each is how Amaranth's Verilog back end writes correct code, not a design problem):

* WIDTHEXPAND / WIDTHTRUNC: operands of different widths (``x == 1'h1``, ``a + 5'h10``,
  ``! multi_bit``): Amaranth's width rules, which Yosys writes out with Verilog's.
* UNUSEDSIGNAL: unused bits of wide ports and intermediate nets (e.g. AXI ``rlast``, ``bid``,
  the high bits of a shifted beat) that Amaranth still names.
* PROCASSINIT: registers get their reset value in their declaration (``reg x = 0;``).
* CASEINCOMPLETE: ``casez`` without a default; Amaranth assigns the default before the case.
* ASCRANGE: memories are declared ``[0:depth-1]``.
* DECLFILENAME: all modules are in one file, named after the top.

Everything else, notably combinational loops (UNOPTFLAT), multiple drivers, latches and
blocking/non-blocking mixes, fails the test.
"""

from __future__ import annotations

import functools
import subprocess

import pytest

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    DmaConfig,
    PrecisionConfig,
    ScratchpadConfig,
)
from tensorforge.hw.accelerator import TOP_NAME, Accelerator

LINT_WAIVERS = (
    "WIDTHEXPAND",
    "WIDTHTRUNC",
    "UNUSEDSIGNAL",
    "PROCASSINIT",
    "CASEINCOMPLETE",
    "ASCRANGE",
    "DECLFILENAME",
)


def _config(
    intrinsic,
    rows,
    cols,
    link,
    dataflow,
    banks,
    bus=64,
    burst=16,
    local=0,
    in_bits=8,
    acc_bits=32,
    spad=2048,
    acc=1024,
    pipeline=False,
    activations=0,
) -> AcceleratorConfig:
    return AcceleratorConfig(
        intrinsic=intrinsic,
        array=ArrayConfig(
            rows=rows, cols=cols, interconnect=link, dataflow=dataflow, local_bytes=local
        ),
        scratchpad=ScratchpadConfig(capacity=spad, banks=banks, accumulator=acc,
                                    activations=activations),
        dma=DmaConfig(bus_bits=bus, max_burst=burst),
        precision=PrecisionConfig(in_bits=in_bits, acc_bits=acc_bits),
        output_pipeline=pipeline,
    )


GRID = {
    "gemm-3x5-systolic-ws-3banks": _config("gemm", 3, 5, "systolic", "ws", 3),
    "gemm-4x4-full-is-bus128": _config("gemm", 4, 4, "full", "is", 4, bus=128, burst=256),
    "gemm-2x2-none-os-int16-acc64-bus32": _config(
        "gemm", 2, 2, "none", "os", 2, bus=32, burst=1, in_bits=16, acc_bits=64
    ),
    "dot-4x4-none-os-1bank": _config("dot", 4, 4, "none", "os", 1),
    "gemv-4x3-full-ws-3banks": _config("gemv", 4, 3, "full", "ws", 3, bus=32, burst=7),
    "conv2d-3x4-systolic-ws": _config("conv2d", 3, 4, "systolic", "ws", 4, local=3),
    "gemm-3x5-output-pipeline": _config("gemm", 3, 5, "systolic", "ws", 3, pipeline=True),
    "conv2d-2x3-output-pipeline-int16-acc64": _config(
        "conv2d", 2, 3, "none", "os", 2, in_bits=16, acc_bits=64, pipeline=True
    ),
    "gemm-2x2-activations-bus32": _config("gemm", 2, 2, "systolic", "ws", 2, bus=32, burst=4,
                                          activations=1024),
}


@functools.cache
def verilog_of(name: str) -> str:
    from amaranth.back import verilog

    return verilog.convert(Accelerator(GRID[name]), name=TOP_NAME, emit_src=False)


@pytest.mark.parametrize("name", sorted(GRID))
def test_accelerator_converts(name):
    text = verilog_of(name)
    assert f"module {TOP_NAME}(" in text
    for port in ("m_axi__araddr", "m_axi__wstrb", "s_axil__rdata", "irq"):
        assert port in text, f"{name}: port {port} missing"


@pytest.mark.rtl
@pytest.mark.parametrize("name", sorted(GRID))
def test_accelerator_lints_clean(name, tmp_path):
    from tensorforge.sim.verilator_env import ensure_verilator_env

    install = ensure_verilator_env()
    source = tmp_path / f"{TOP_NAME}.v"
    source.write_text(verilog_of(name))
    command = [
        str(install.executable),
        "--lint-only",
        "-Wall",
        "--top-module",
        TOP_NAME,
        *(f"-Wno-{waiver}" for waiver in LINT_WAIVERS),
        str(source),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, f"{name}: verilator lint failed\n{completed.stderr[-4000:]}"
    assert "%Warning" not in completed.stderr, f"{name}:\n{completed.stderr[-4000:]}"
