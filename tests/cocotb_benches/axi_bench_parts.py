"""Parts shared by the DMA and accelerator benches: stream driver, AXI burst monitor, DRAM.

Timing convention of these benches: inputs change on the falling edge; handshakes are judged
after the design settles (``ReadOnly``) in the same half cycle, so what is seen is what the
next rising edge registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly
from cocotbext.axi import AxiBus, AxiRam

from tensorforge.hw.axi import BOUNDARY_BYTES, plan_bursts

CLOCK_PERIOD_NS = 10


def start_clock(dut) -> None:
    Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()


async def reset(dut, cycles: int = 3) -> None:
    dut.rst.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
    dut.rst.value = 0


def attach_ram(dut, size: int, rng, pauses: bool) -> AxiRam:
    """An `AxiRam` on ``m_axi__*``; with ``pauses``, every channel stalls at random."""
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi", bus_separator="__"), dut.clk, dut.rst, size=size)
    if pauses:
        channels = (
            ram.write_if.aw_channel,
            ram.write_if.w_channel,
            ram.write_if.b_channel,
            ram.read_if.ar_channel,
            ram.read_if.r_channel,
        )
        for channel in channels:
            channel.set_pause_generator(_random_pauses(rng.integers(1 << 30)))
    return ram


def _random_pauses(seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    while True:
        yield bool(rng.random() < 0.3)


class StreamDriver:
    """Sends payloads on an Amaranth stream port ``<prefix>__{valid,ready,payload}``."""

    def __init__(self, dut, prefix: str) -> None:
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clock = dut.clk
        self.valid.value = 0

    async def send(self, payload: int) -> None:
        """Present ``payload`` (from a falling edge) until a rising edge takes it."""
        self.valid.value = 1
        self.payload.value = payload
        while True:
            await ReadOnly()
            taken = bool(self.ready.value)
            await FallingEdge(self.clock)
            if taken:
                break
        self.valid.value = 0


async def wait_high(dut, signal, timeout_cycles: int, what: str) -> int:
    """Wait (from a falling edge) until ``signal`` is 1; return the cycles waited."""
    for cycle in range(timeout_cycles):
        await ReadOnly()
        if signal.value:
            await FallingEdge(dut.clk)
            return cycle
        await FallingEdge(dut.clk)
    raise AssertionError(f"{what}: still waiting after {timeout_cycles} cycles")


@dataclass
class BurstMonitor:
    """Records every AR and AW handshake and checks the AXI rules the DMA promises.

    Every burst: INCR, full-width beats, bus-aligned address, 1..max_burst beats, no 4 KiB
    crossing. ``reads`` / ``writes`` list ``(address, beats)`` in issue order.
    """

    dut: object
    bus_bytes: int
    max_burst: int
    reads: list[tuple[int, int, int]] = field(default_factory=list)
    writes: list[tuple[int, int]] = field(default_factory=list)
    # bursts in flight (AR sent, last R beat not yet taken; AW sent, B not yet taken), and
    # the most seen at once
    reads_in_flight: int = 0
    writes_in_flight: int = 0
    most_reads_in_flight: int = 0
    most_writes_in_flight: int = 0

    async def run(self) -> None:
        dut = self.dut
        while True:
            await FallingEdge(dut.clk)
            await ReadOnly()
            self.count_in_flight()
            for channel, log in (("ar", self.reads), ("aw", self.writes)):
                if not (
                    getattr(dut, f"m_axi__{channel}valid").value
                    and getattr(dut, f"m_axi__{channel}ready").value
                ):
                    continue
                address = int(getattr(dut, f"m_axi__{channel}addr").value)
                beats = int(getattr(dut, f"m_axi__{channel}len").value) + 1
                self.check(channel, address, beats)
                if channel == "ar":
                    log.append((int(dut.m_axi__arid.value), address, beats))
                else:
                    log.append((address, beats))

    def count_in_flight(self) -> None:
        dut = self.dut

        def fired(name: str) -> bool:
            return bool(getattr(dut, f"m_axi__{name}valid").value) and bool(
                getattr(dut, f"m_axi__{name}ready").value
            )

        self.reads_in_flight += fired("ar") - (fired("r") and bool(dut.m_axi__rlast.value))
        self.writes_in_flight += fired("aw") - fired("b")
        self.most_reads_in_flight = max(self.most_reads_in_flight, self.reads_in_flight)
        self.most_writes_in_flight = max(self.most_writes_in_flight, self.writes_in_flight)

    def check(self, channel: str, address: int, beats: int) -> None:
        dut = self.dut
        size = int(getattr(dut, f"m_axi__{channel}size").value)
        burst = int(getattr(dut, f"m_axi__{channel}burst").value)
        assert burst == 1, f"{channel}: burst type {burst}, expected INCR"
        assert 1 << size == self.bus_bytes, f"{channel}: size {size} for a {self.bus_bytes} B bus"
        assert address % self.bus_bytes == 0, f"{channel}: unaligned burst at {address:#x}"
        assert 1 <= beats <= self.max_burst, f"{channel}: {beats} beats > {self.max_burst}"
        end = address + beats * self.bus_bytes - 1
        assert address // BOUNDARY_BYTES == end // BOUNDARY_BYTES, (
            f"{channel}: burst {address:#x}+{beats} crosses a 4 KiB boundary"
        )


def expected_bursts(rows: list[tuple[int, int]], bus_bytes: int, max_burst: int) -> list:
    """The reference burst plan of a list of ``(start, bytes)`` rows, in order."""
    plan = []
    for start, length in rows:
        plan += plan_bursts(start, length, bus_bytes, max_burst)
    return plan
