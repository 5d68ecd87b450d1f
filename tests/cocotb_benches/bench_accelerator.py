"""cocotb bench of the whole accelerator: a hand-written tiled GEMM program, checked with numpy.

The program computes ``C = A @ B`` (int8 x int8 -> int32) tile by tile with the GEMM intrinsic,
VTA style: the scratchpad holds two A/B buffers and the accumulator two C buffers, so loads of
step s+1 overlap the compute of step s and the store of one C tile overlaps the next tile's
compute; the four token queues order them. The host side is cocotbext-axi: an `AxiRam` (with
random stalls) as DRAM and an `AxiLiteMaster` on the control registers (`REGISTERS`).
Configuration: ``bench_config()`` = ``accelerator`` (config dict), ``m``, ``n``, ``k``.
"""

from __future__ import annotations

import cocotb
import numpy as np
from axi_bench_parts import attach_ram, reset, start_clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.registers import COUNTERS, Status, register
from tensorforge.isa import Buffer, Compute, ComputeMode, Finish, Load, Store, encode_program
from tensorforge.sim.bench_support import bench_config

RAM_BYTES = 1 << 17
PROGRAM_ADDR, A_ADDR, B_ADDR, C_ADDR = 0x0000, 0x4000, 0x8000, 0xC000
TIMEOUT_CYCLES = 200_000


def gemm_program(config: AcceleratorConfig, m: int, n: int, k: int) -> list:
    """Tiled GEMM with double-buffered operands and accumulators, synchronised by tokens."""
    rows, cols = config.array.rows, config.array.cols  # intrinsic: C[i,j] += A[i,k] B[k,j]
    tile_i, tile_k, tile_j = rows, rows, cols
    a_lines, b_lines = config.blocks["A"].lines, config.blocks["B"].lines
    c_lines = config.blocks["C"].lines
    program, step = [], 0
    tiles = [(i, j) for i in range(0, m, tile_i) for j in range(0, n, tile_j)]
    for t, (i, j) in enumerate(tiles):
        acc_base = (t % 2) * c_lines
        # Clear this C buffer once the store of tile t-2 (same buffer) has read it.
        program.append(Compute(mode=ComputeMode.ZERO, acc_base=acc_base, pop_next=t >= 2))
        k_steps = range(0, k, tile_k)
        for kk in k_steps:
            spad = (step % 2) * (a_lines + b_lines)
            program.append(
                Load(
                    buffer=Buffer.SPAD,
                    line=spad,
                    dram_addr=A_ADDR + i * k + kk,
                    rows=min(tile_i, m - i),
                    row_len=min(tile_k, k - kk),
                    stride=k,
                    pad_after=tile_i - min(tile_i, m - i),
                    pop_next=step >= 2,
                )
            )
            program.append(
                Load(
                    buffer=Buffer.SPAD,
                    line=spad + a_lines,
                    dram_addr=B_ADDR + kk * n + j,
                    rows=min(tile_k, k - kk),
                    row_len=min(tile_j, n - j),
                    stride=n,
                    pad_after=tile_k - min(tile_k, k - kk),
                    push_next=True,
                )
            )
            last = kk == k_steps[-1]
            program.append(
                Compute(
                    acc_base=acc_base,
                    a_base=spad,
                    b_base=spad + a_lines,
                    pop_prev=True,
                    push_prev=True,
                    push_next=last,
                )
            )
            step += 1
        program.append(
            Store(
                line=acc_base,
                dram_addr=C_ADDR + (i * n + j) * 4,
                rows=min(tile_i, m - i),
                row_len=min(tile_j, n - j),
                stride=n,
                pop_prev=True,
                push_prev=True,
            )
        )
    program.append(Finish())
    return program


class AcceleratorBench:
    def __init__(self, dut, rng: np.random.Generator) -> None:
        self.dut = dut
        start_clock(dut)
        self.ram = attach_ram(dut, RAM_BYTES, rng, pauses=True)
        bus = AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__")
        self.host = AxiLiteMaster(bus, dut.clk, dut.rst)

    async def write(self, name: str, value: int) -> None:
        await self.host.write_dword(register(name).offset, value)

    async def read(self, name: str) -> int:
        return await self.host.read_dword(register(name).offset)

    async def run(self, program: list) -> dict[str, int]:
        self.ram.write(PROGRAM_ADDR, encode_program(program))
        await self.write("insn_addr", PROGRAM_ADDR)
        await self.write("insn_count", len(program))
        await self.write("control", 1)
        for _ in range(TIMEOUT_CYCLES // 100):
            status = Status(await self.read("status"))
            if Status.DONE in status:
                break
            await ClockCycles(self.dut.clk, 100)
        else:
            raise AssertionError(f"not done after {TIMEOUT_CYCLES} cycles (status {status!r})")
        assert Status.ERROR not in status, f"status {status!r}"
        return {name: await self.read(name) for name in COUNTERS}


@cocotb.test()
async def tiled_gemm_matches_numpy(dut) -> None:
    """A random ``m x k`` by ``k x n`` GEMM (partial edge tiles included) equals numpy's."""
    settings = bench_config()
    config = AcceleratorConfig.from_dict(settings["accelerator"])
    m, n, k = settings["m"], settings["n"], settings["k"]
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    dut._log.info(
        "accelerator bench: %s, GEMM %dx%dx%d, RANDOM_SEED=%d",
        config.describe(),
        m,
        n,
        k,
        cocotb.RANDOM_SEED,
    )
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    bench = AcceleratorBench(dut, rng)
    await reset(dut)
    bench.ram.write(A_ADDR, a.tobytes())
    bench.ram.write(B_ADDR, b.tobytes())
    bench.ram.write(C_ADDR, bytes(m * n * 4))
    program = gemm_program(config, m, n, k)
    counters = await bench.run(program)

    observed = np.frombuffer(bench.ram.read(C_ADDR, m * n * 4), dtype="<i4").reshape(m, n)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    wrong = np.argwhere(observed != expected)
    assert not len(wrong), (
        f"{len(wrong)} of {m * n} results differ, first at {tuple(wrong[0])}: "
        f"{observed[tuple(wrong[0])]} != {expected[tuple(wrong[0])]}"
    )
    dut._log.info("accelerator bench: %d instructions, counters %s", len(program), counters)
    operand_bytes = len(encode_program(program)) + a.size + b.size
    assert counters["bytes_read"] >= operand_bytes, counters
    assert counters["bytes_written"] >= m * n * 4, counters
    assert 0 < counters["compute_busy"] < counters["cycles"], counters
    assert 0 < counters["load_busy"] < counters["cycles"], counters
