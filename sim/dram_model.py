"""The DRAM the accelerator sees in simulation (cocotb side): bounded, guarded and paced.

A cocotbext-axi `AxiSlave` serves the accelerator's AXI4 manager port from `GuardedMemory`,
a plain byte array with two rules the stock `AxiRam` lacks (it wraps addresses modulo its
size, so a stray write would silently land inside the image):

* an access past the end answers SLVERR (the accelerator raises STATUS.error);
* a write outside the program's *writable* ranges (its output region) is refused, answered
  SLVERR, and recorded as a `WriteViolation` the driver turns into an error naming the STORE.

Timing (`MemorySystem`) is added with cocotbext-axi pause generators, the library's own knob
for back-pressure. A generator is advanced once per rising clock edge, so besides deciding the
pause it also samples the handshakes of that edge: the read one delays each burst's data by
``latency`` cycles after its AR handshake and paces R beats to ``bandwidth``; the write one
paces W beats and holds each B response ``latency`` cycles after the burst's last W beat.
A memory without latency at full bus rate installs none: the stock slave answers as fast
as it can. The outstanding-burst limit sets the slave's AR, AW and B queue limits (the stock
ones hold two), so the slave takes about that many bursts before it answers the first.

This is the reference model: it is slow (Python every cycle), and the Verilog DRAM of the
simulation top (`tensorforge.sim.sim_top`, ``axi_dram.v``) is checked against it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cocotbext.axi import AxiBus, AxiSlave

from tensorforge.memory import MemorySystem

#: Bytes past the image (rounded up to a bus beat) that still answer OKAY: bursts are
#: bus-aligned, so the last beat of the image may reach a little past its end.
GUARD_BYTES = 4096


def ram_size(image_bytes: int, bus_bytes: int) -> int:
    """DRAM size for an image: the image rounded up to a whole beat, plus `GUARD_BYTES`."""
    return -(-image_bytes // bus_bytes) * bus_bytes + GUARD_BYTES


@dataclass(frozen=True)
class WriteViolation:
    """A write the program was not allowed to make: ``length`` bytes at ``address``."""

    address: int
    length: int


class GuardedMemory:
    """The byte store behind the AXI slave (cocotbext-axi's ``target`` interface)."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.size = size  # the current run's DRAM size (at most len(data))
        self.writable: tuple[tuple[int, int], ...] = ()
        self.violations: list[WriteViolation] = []
        self.on_violation: Callable[[], None] | None = None

    def load(self, image: bytes, writable: tuple[tuple[int, int], ...], size: int) -> None:
        """Start a run: the image at address 0, then zeros up to ``size``; no violations yet."""
        if not len(image) <= size <= len(self.data):
            raise ValueError(f"image of {len(image)} B in {size} B of DRAM, at most "
                             f"{len(self.data)} B")
        self.data[:] = bytes(len(self.data))
        self.data[: len(image)] = image
        self.size = size
        self.writable = writable
        self.violations = []

    async def read(self, address: int, length: int) -> bytes:
        if address + length > self.size:
            raise IndexError(f"read of {length} B at {address:#x} past {self.size:#x}")
        return bytes(self.data[address : address + length])

    async def write(self, address: int, data: bytes) -> None:
        end = address + len(data)
        if not any(start <= address and end <= stop for start, stop in self.writable):
            self.violations.append(WriteViolation(address, len(data)))
            if self.on_violation is not None:
                self.on_violation()
            raise PermissionError(f"write of {len(data)} B at {address:#x} outside the output")
        self.data[address:end] = data


def _high(handle) -> bool:
    return str(handle.value) == "1"


def _fired(channel, name: str) -> bool:
    """``<name>valid & <name>ready`` of one AXI channel at this clock edge."""
    return _high(getattr(channel, f"{name}valid")) and _high(getattr(channel, f"{name}ready"))


class _TokenBucket:
    """Earns ``rate`` beats per cycle, holds at most one: a beat may move when it holds one."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = 1.0

    def tick(self, moved: bool) -> None:
        if moved:
            self.tokens -= 1.0
        self.tokens = min(1.0, self.tokens + self.rate)

    @property
    def ready(self) -> bool:
        return self.tokens >= 1.0 - 1e-9


def _read_pauses(bus, memory: MemorySystem, bus_bytes: int) -> Iterator[bool]:
    """Pause decisions of the R channel; samples AR and R handshakes at each edge.

    A burst whose AR handshake is at edge ``c`` may present data from edge ``c + 1 + latency``
    (edge ``c + 1`` is when the stock slave would first drive it).
    """
    bucket = _TokenBucket(memory.beats_per_cycle(bus_bytes))
    bursts: deque[list[int]] = deque()  # [cycle its data may start, beats left]
    cycle = 0
    while True:
        if _fired(bus.ar, "ar"):
            bursts.append([cycle + 1 + memory.latency, int(bus.ar.arlen.value) + 1])
        beat = _fired(bus.r, "r")
        if beat and bursts:
            bursts[0][1] -= 1
            if bursts[0][1] == 0:
                bursts.popleft()
        bucket.tick(beat)
        yield not (bursts and bursts[0][0] <= cycle and bucket.ready)
        cycle += 1


def _write_pauses(bus, memory: MemorySystem, bus_bytes: int) -> Iterator[bool]:
    """Pause decisions of the W channel (pacing); B is held by `_response_pauses`."""
    bucket = _TokenBucket(memory.beats_per_cycle(bus_bytes))
    while True:
        bucket.tick(_fired(bus.w, "w"))
        yield not bucket.ready


def _response_pauses(bus, memory: MemorySystem) -> Iterator[bool]:
    """Pause decisions of the B channel: each response waits ``latency`` after its last beat."""
    responses: deque[int] = deque()  # cycle each pending response may go
    cycle = 0
    while True:
        if _fired(bus.w, "w") and _high(bus.w.wlast):
            responses.append(cycle + 2 + memory.latency)
        if _fired(bus.b, "b") and responses:
            responses.popleft()
        yield not (responses and responses[0] <= cycle)
        cycle += 1


class DramModel:
    """The accelerator's DRAM: an `AxiSlave` on ``m_axi__*`` over a `GuardedMemory`."""

    def __init__(self, dut, size: int, clock, prefix: str = "m_axi") -> None:
        self.bus = AxiBus.from_prefix(dut, prefix, bus_separator="__")
        self.bus_bytes = len(self.bus.read.r.rdata) // 8
        self.memory = GuardedMemory(size)
        self.slave = AxiSlave(self.bus, clock, dut.rst, target=self.memory)
        self.system = MemorySystem.preset("ideal")

    def set_memory(self, system: MemorySystem) -> None:
        """Install (or, for a memory with no latency at bus rate, remove) the pause generators
        and set the queue limits; call after a reset."""
        self.system = system
        read_if, write_if = self.slave.read_if, self.slave.write_if
        limit = -1 if system.outstanding is None else system.outstanding  # -1: no limit
        for queue in (read_if.ar_channel, write_if.aw_channel, write_if.b_channel):
            queue.queue_occupancy_limit = limit
        channels = (read_if.r_channel, write_if.w_channel, write_if.b_channel)
        if system.latency == 0 and system.beats_per_cycle(self.bus_bytes) >= 1:
            for channel in channels:
                channel.clear_pause_generator()
                channel.pause = False
            return
        read_bus, write_bus = self.bus.read, self.bus.write
        read_if.r_channel.set_pause_generator(_read_pauses(read_bus, system, self.bus_bytes))
        write_if.w_channel.set_pause_generator(_write_pauses(write_bus, system, self.bus_bytes))
        write_if.b_channel.set_pause_generator(_response_pauses(write_bus, system))

    def read(self, address: int, length: int) -> bytes:
        return bytes(self.memory.data[address : address + length])
