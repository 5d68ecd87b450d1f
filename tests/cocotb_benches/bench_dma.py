"""cocotb bench of the DMA (load + store units, scratchpad, accumulator) against a byte model.

The design is ``DmaHarness`` (tests/test_hw_dma.py): an AXI4 port ``m_axi`` on a cocotbext-axi
`AxiRam` with random stalls on every channel, LOAD and STORE command streams, and a scratchpad
read port for checking. Random 2D strided tiles (unaligned starts, odd lengths, padding, rows
cut at the line, rows across 4 KiB boundaries) go DRAM -> scratchpad, DRAM -> accumulator and
accumulator -> DRAM; lines and the whole DRAM image are compared with the reference below, and
every burst with `plan_bursts`. Directed rows make every burst length from 1 to ``max_burst``
occur in both directions. On the write side `WriteChecker` checks that each burst's W beats
end in ``wlast`` exactly at its AW length and that a STORE reports idle only once every burst
has its B response; B responses are held back in long runs, and a long STORE issues more
bursts than the store unit may leave unanswered. Configuration: ``bench_config()`` = the
AcceleratorConfig dict plus ``transfers``.
"""

from __future__ import annotations

import cocotb
import numpy as np
from axi_bench_parts import (
    BurstMonitor,
    StreamDriver,
    attach_ram,
    expected_bursts,
    reset,
    start_clock,
    wait_high,
)
from cocotb.triggers import FallingEdge, ReadOnly

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.dma_rows import transfer_runs
from tensorforge.isa import Buffer, Load, Store
from tensorforge.sim.bench_support import bench_config

RAM_BYTES = 1 << 16
STORE_REGION = 1 << 15  # loads read below, stores write above
TIMEOUT_CYCLES = 20_000


class DmaReference:
    """What LOAD and STORE do to bytes (the ISA docstring's semantics, byte by byte)."""

    def __init__(self, config: AcceleratorConfig, dram: bytearray) -> None:
        self.config = config
        self.dram = dram
        self.spad = {}
        self.acc = {}

    def geometry(self, buffer: Buffer) -> tuple[int, int]:
        c = self.config
        if buffer is Buffer.ACC:
            return c.acc_line_elems, c.precision.acc_bytes
        return c.spad_line_elems, c.precision.in_bytes

    def rows(self, insn, buffer: Buffer) -> list[tuple[int, int]]:
        """``(start, bytes)`` of each row that touches DRAM."""
        elems, elem_bytes = self.geometry(buffer)
        out = []
        for r in range(insn.rows):
            length = min(insn.row_len, elems) * elem_bytes
            if length:
                out.append((insn.dram_addr + r * insn.stride * elem_bytes, length))
        return out

    def runs(self, insn, buffer: Buffer) -> list[tuple[int, int]]:
        """``(start, bytes)`` of each burst plan: the rows, joined when back to back."""
        runs = transfer_runs(insn.dram_addr, insn.rows, insn.row_len, insn.stride,
                             *self.geometry(buffer))
        assert sum(n for _, n in runs) == sum(n for _, n in self.rows(insn, buffer))
        return runs

    def load(self, insn: Load) -> dict[int, bytes]:
        elems, elem_bytes = self.geometry(insn.buffer)
        line_bytes = elems * elem_bytes
        lines = {}
        line = insn.line
        for _ in range(insn.pad_before):
            lines[line], line = bytes(line_bytes), line + 1
        for r in range(insn.rows):
            start = insn.dram_addr + r * insn.stride * elem_bytes
            data = self.dram[start : start + min(insn.row_len, elems) * elem_bytes]
            lines[line], line = bytes(data).ljust(line_bytes, b"\0"), line + 1
        for _ in range(insn.pad_after):
            lines[line], line = bytes(line_bytes), line + 1
        (self.acc if insn.buffer is Buffer.ACC else self.spad).update(lines)
        return lines

    def store(self, insn: Store) -> None:
        line_bytes = self.config.acc_line_bytes
        for r, (start, length) in enumerate(self.rows(insn, Buffer.ACC)):
            data = self.acc.get(insn.line + r, bytes(line_bytes))
            self.dram[start : start + length] = data[:length]


class WriteChecker:
    """Watches W and B handshakes: beats per burst (counted to ``wlast``) and B responses."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.burst_beats: list[int] = []  # beats of each W burst, in order
        self.responses = 0
        self.beats = 0

    async def run(self) -> None:
        dut = self.dut
        while True:
            await FallingEdge(dut.clk)
            await ReadOnly()
            if dut.m_axi__wvalid.value and dut.m_axi__wready.value:
                self.beats += 1
                if dut.m_axi__wlast.value:
                    self.burst_beats.append(self.beats)
                    self.beats = 0
            if dut.m_axi__bvalid.value and dut.m_axi__bready.value:
                self.responses += 1


def _long_pauses(rng: np.random.Generator):
    """Pauses in runs of up to 40 cycles, to pile up bursts waiting for their B response."""
    while True:
        pause = bool(rng.random() < 0.5)
        for _ in range(int(rng.integers(1, 41))):
            yield pause


class DmaBench:
    def __init__(self, dut, config: AcceleratorConfig, rng: np.random.Generator) -> None:
        self.dut = dut
        self.config = config
        self.rng = rng
        self.bus_bytes = config.dma.bus_bytes
        start_clock(dut)
        self.ram = attach_ram(dut, RAM_BYTES, rng, pauses=True)
        self.ram.write_if.b_channel.set_pause_generator(_long_pauses(rng))
        image = bytearray(rng.integers(0, 256, RAM_BYTES, dtype=np.uint8).tobytes())
        self.ram.write(0, bytes(image))
        self.reference = DmaReference(config, image)
        self.load_cmd = StreamDriver(dut, "load_cmd")
        self.store_cmd = StreamDriver(dut, "store_cmd")
        self.monitor = BurstMonitor(dut, self.bus_bytes, config.dma.max_burst)
        self.writes = WriteChecker(dut)
        dut.spad_read__req__valid.value = 0
        dut.spad_read__resp__ready.value = 0

    async def start(self) -> None:
        await reset(self.dut)
        cocotb.start_soon(self.monitor.run())
        cocotb.start_soon(self.writes.run())

    async def load(self, insn: Load) -> None:
        before = len(self.monitor.reads)
        await self.load_cmd.send(insn.encode())
        await wait_high(self.dut, self.dut.load_idle, TIMEOUT_CYCLES, f"{insn.describe()}")
        expected = self.reference.load(insn)
        bursts = [(a, n) for _, a, n in self.monitor.reads[before:]]
        plan = expected_bursts(
            self.reference.runs(insn, insn.buffer), self.bus_bytes, self.config.dma.max_burst
        )
        assert bursts == plan, f"{insn.describe()}: bursts {bursts}, expected {plan}"
        if insn.buffer is Buffer.SPAD:
            for line, data in expected.items():
                observed = await self.read_spad(line)
                assert observed == data, (
                    f"{insn.describe()}: line {line} holds {observed.hex()}, expected {data.hex()}"
                )

    async def store(self, insn: Store) -> None:
        before = len(self.monitor.writes)
        await self.store_cmd.send(insn.encode())
        await wait_high(self.dut, self.dut.store_idle, TIMEOUT_CYCLES, f"{insn.describe()}")
        self.reference.store(insn)
        plan = expected_bursts(
            self.reference.runs(insn, Buffer.ACC), self.bus_bytes, self.config.dma.max_burst
        )
        bursts = self.monitor.writes[before:]
        assert bursts == plan, f"{insn.describe()}: bursts {bursts}, expected {plan}"
        issued = [n for _, n in self.monitor.writes]
        assert self.writes.burst_beats == issued, (
            f"{insn.describe()}: W bursts of {self.writes.burst_beats[before:]} beats (to wlast), "
            f"AW lengths {issued[before:]}"
        )
        assert self.writes.responses == len(issued), (
            f"{insn.describe()}: idle with {len(issued) - self.writes.responses} B responses due"
        )

    async def read_spad(self, line: int) -> bytes:
        dut = self.dut
        driver = StreamDriver(dut, "spad_read__req")
        await driver.send(line)
        dut.spad_read__resp__ready.value = 1
        while True:
            await ReadOnly()
            if dut.spad_read__resp__valid.value:
                value = int(dut.spad_read__resp__payload.value)
                await FallingEdge(dut.clk)
                break
            await FallingEdge(dut.clk)
        dut.spad_read__resp__ready.value = 0
        return value.to_bytes(self.config.spad_line_bytes, "little")

    def dram_matches(self) -> None:
        observed = self.ram.read(0, RAM_BYTES)
        expected = bytes(self.reference.dram)
        if observed != expected:
            first = next(i for i in range(RAM_BYTES) if observed[i] != expected[i])
            raise AssertionError(
                f"DRAM differs first at {first:#x}: {observed[first : first + 16].hex()} "
                f"expected {expected[first : first + 16].hex()}"
            )

    # --- stimulus ---------------------------------------------------------------------------

    def random_tile(self, buffer: Buffer, lines: int, region: int, directed_beats: int = 0):
        """Fields of a random tile (or a one-row tile of ``directed_beats`` beats)."""
        rng = self.rng
        elems, elem_bytes = self.reference.geometry(buffer)
        if directed_beats:
            offset, length = _row_for_beats(directed_beats, elems, elem_bytes, self.bus_bytes)
            base = int(rng.integers(1, region // 4096)) * 4096 - int(rng.integers(0, 2)) * 2048
            return dict(
                line=int(rng.integers(0, lines)),
                rows=1,
                row_len=length // elem_bytes,
                stride=0,
                dram_addr=base + offset,
                pads=(0, 0),
            )
        pads = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
        if rng.random() < 0.4:  # rows back to back in DRAM: one run of long bursts
            rows = int(rng.integers(2, lines - sum(pads) + 1))
            row_len = stride = int(rng.integers(1, elems + 1))
        else:
            rows = int(rng.integers(1, 5))
            row_len = int(rng.integers(0, elems + 3))
            stride = int(rng.integers(0, 2 * elems + 8))
        footprint = (rows * (stride + elems) + 1) * elem_bytes
        if rng.random() < 0.3:  # straddle a 4 KiB boundary
            address = int(rng.integers(1, region // 4096)) * 4096 - int(rng.integers(1, 64))
        else:
            address = int(rng.integers(0, region - footprint))
        address -= address % elem_bytes
        span = pads[0] + rows + pads[1]
        return dict(
            line=int(rng.integers(0, lines - span + 1)),
            rows=rows,
            row_len=row_len,
            stride=stride,
            dram_addr=address,
            pads=pads,
        )

    def load_insn(self, buffer: Buffer, directed_beats: int = 0) -> Load:
        lines = self.config.spad_lines if buffer is Buffer.SPAD else self.config.acc_lines
        tile = self.random_tile(buffer, min(lines, 64), STORE_REGION, directed_beats)
        before, after = tile.pop("pads")
        return Load(buffer=buffer, pad_before=before, pad_after=after, **tile)

    def long_run_insn(self, buffer: Buffer | None) -> Load | Store:
        """A LOAD (or, for ``None``, a STORE) of whole lines back to back, longer than
        ``max_burst`` beats and across a 4 KiB boundary: long bursts, cut at the boundary."""
        target = Buffer.ACC if buffer is None else buffer
        elems, elem_bytes = self.reference.geometry(target)
        lines = self.config.spad_lines if target is Buffer.SPAD else self.config.acc_lines
        rows = min(lines, 64)
        span = rows * elems * elem_bytes
        page = int(self.rng.integers(1, STORE_REGION // 4096 - span // 4096 - 1))
        address = page * 4096 - (span // 2) // elem_bytes * elem_bytes
        fields = dict(line=0, rows=rows, row_len=elems, stride=elems)
        if buffer is None:
            return Store(dram_addr=STORE_REGION + address, **fields)
        return Load(buffer=buffer, dram_addr=address, **fields)

    def store_insn(self, directed_beats: int = 0) -> Store:
        tile = self.random_tile(
            Buffer.ACC, min(self.config.acc_lines, 64), STORE_REGION, directed_beats
        )
        tile.pop("pads")
        tile["dram_addr"] += STORE_REGION
        return Store(**tile)

    def long_store_insn(self) -> Store:
        """More one- or two-beat rows than the store unit may leave without a B response."""
        rows = min(self.config.acc_lines, 2 * self.config.dma.outstanding + 5)
        elems, elem_bytes = self.reference.geometry(Buffer.ACC)
        row_len = max(1, min(elems, self.bus_bytes // elem_bytes))
        stride = row_len + int(self.rng.integers(1, 3))  # apart: a run (and bursts) per row
        elem = int(self.rng.integers(0, STORE_REGION // 2 // elem_bytes))
        address = STORE_REGION + elem * elem_bytes
        return Store(line=0, rows=rows, row_len=row_len, stride=stride, dram_addr=address)


def _row_for_beats(beats: int, elems: int, elem_bytes: int, bus_bytes: int) -> tuple[int, int]:
    """A (start lane, bytes) row of exactly ``beats`` bus beats, or raise if none fits a line."""
    for length in range(elems * elem_bytes, 0, -elem_bytes):
        for offset in range(0, bus_bytes, elem_bytes):
            if -(-(offset + length) // bus_bytes) == beats:
                return offset, length
    raise ValueError(f"no row of {beats} beats fits a line of {elems} x {elem_bytes} B")


def feasible_beats(elems: int, elem_bytes: int, bus_bytes: int, max_burst: int) -> list[int]:
    out = []
    for beats in range(1, max_burst + 1):
        try:
            _row_for_beats(beats, elems, elem_bytes, bus_bytes)
        except ValueError:
            continue
        out.append(beats)
    return out


@cocotb.test()
async def dma_moves_random_tiles(dut) -> None:
    """Random and directed LOADs and STOREs, then the DRAM image and every burst are checked."""
    settings = bench_config()
    config = AcceleratorConfig.from_dict(settings["accelerator"])
    transfers = settings.get("transfers", 20)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    dut._log.info("dma bench: %s, RANDOM_SEED=%d", config.describe(), cocotb.RANDOM_SEED)
    bench = DmaBench(dut, config, rng)
    await bench.start()
    max_burst = config.dma.max_burst
    bus = config.dma.bus_bytes

    load_spad = feasible_beats(config.spad_line_elems, config.precision.in_bytes, bus, max_burst)
    load_acc = feasible_beats(config.acc_line_elems, config.precision.acc_bytes, bus, max_burst)
    for beats in load_spad:
        await bench.load(bench.load_insn(Buffer.SPAD, beats))
    for beats in load_acc:
        await bench.load(bench.load_insn(Buffer.ACC, beats))
    for _ in range(transfers):
        await bench.load(bench.load_insn(Buffer.SPAD))
        await bench.load(bench.load_insn(Buffer.ACC))
    for beats in load_acc:
        await bench.store(bench.store_insn(beats))
    for _ in range(transfers):
        await bench.store(bench.store_insn())
    await bench.store(bench.long_store_insn())
    for buffer in (Buffer.SPAD, Buffer.ACC, None):
        insn = bench.long_run_insn(buffer)
        await (bench.store(insn) if buffer is None else bench.load(insn))
    # A LOAD into the scratchpad and a STORE at the same time: separate channels, no interference.
    for _ in range(transfers // 2):
        load, store = bench.load_insn(Buffer.SPAD), bench.store_insn()
        both = [cocotb.start_soon(bench.load(load)), cocotb.start_soon(bench.store(store))]
        for task in both:
            await task
    bench.dram_matches()

    read_lengths = {n for _, _, n in bench.monitor.reads}
    write_lengths = {n for _, n in bench.monitor.writes}
    missing_reads = (set(load_spad) | set(load_acc)) - read_lengths
    missing_writes = set(load_acc) - write_lengths
    assert not missing_reads, f"read burst lengths never seen: {missing_reads}"
    assert not missing_writes, f"write burst lengths never seen: {missing_writes}"
    assert not int(dut.error.value), "an AXI response other than OKAY was flagged"
    outstanding = config.dma.outstanding
    monitor = bench.monitor
    assert monitor.most_reads_in_flight <= outstanding, (
        f"{monitor.most_reads_in_flight} read bursts in flight, at most {outstanding} allowed")
    assert monitor.most_writes_in_flight <= outstanding, (
        f"{monitor.most_writes_in_flight} write bursts in flight, at most {outstanding} allowed")
    if settings.get("reach_outstanding"):  # the limit, not the DRAM, bounded the bursts
        assert monitor.most_reads_in_flight == outstanding, monitor.most_reads_in_flight
        assert monitor.most_writes_in_flight == outstanding, monitor.most_writes_in_flight
    dut._log.info(
        "dma bench: %d read and %d write bursts, lengths %s / %s, at most %d / %d in flight",
        len(bench.monitor.reads),
        len(bench.monitor.writes),
        sorted(read_lengths),
        sorted(write_lengths),
        monitor.most_reads_in_flight,
        monitor.most_writes_in_flight,
    )
