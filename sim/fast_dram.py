"""The Verilog DRAM of the simulation top, from the cocotb side: image in, timing, image out.

`tensorforge.sim.sim_top` puts ``tensorforge_axi_dram`` beside the accelerator; this class
is everything Python does with it, none of it per cycle: before a run it sets the memory's
timing and checks (`MemorySystem`, the writable ranges, the size) on the top-level
``dram_*`` inputs and loads the image with ``$readmemh``; after the run it reads the refused
write, if any, and dumps the memory with ``$writememh``. Image files hold one bus word a
line in hex, the word's bytes little-endian (byte 0 is the lowest two hex digits).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cocotb.triggers import RisingEdge

from tensorforge.memory import MemorySystem
from tensorforge.sim.sim_top import MAX_OUTSTANDING, PATH_BYTES, RATE_BITS, WRITABLE_RANGES


def image_to_hex(image: bytes, bus_bytes: int, size: int) -> bytes:
    """``image`` zero-padded to ``size`` bytes (a multiple of the bus) as ``$readmemh`` text."""
    padded = np.zeros(size, dtype=np.uint8)
    padded[: len(image)] = np.frombuffer(image, dtype=np.uint8)
    words = padded.reshape(-1, bus_bytes)[:, ::-1]  # most significant byte first
    digits = np.frombuffer(words.tobytes().hex().encode(), dtype=f"S{2 * bus_bytes}")
    return b"\n".join(digits.tolist()) + b"\n"


def hex_to_image(text: str, bus_bytes: int) -> bytes:
    """The bytes of a ``$writememh`` dump (comments and address lines skipped)."""
    digits = "".join(line.strip() for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith(("//", "@")))
    words = np.frombuffer(bytes.fromhex(digits), dtype=np.uint8).reshape(-1, bus_bytes)
    return words[:, ::-1].tobytes()


def _pack_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    starts = ends = 0
    for index, (start, end) in enumerate(ranges):
        starts |= start << (64 * index)
        ends |= end << (64 * index)
    return starts, ends


def _path_value(path: Path) -> int:
    """A path as a Verilog string packed in a vector (first character most significant)."""
    text = str(path).encode()
    if len(text) > PATH_BYTES:
        raise ValueError(f"path of {len(text)} B, the Verilog DRAM takes {PATH_BYTES} B")
    return int.from_bytes(text, "big")


class FastDram:
    """Controls ``tensorforge_axi_dram`` through the ``dram_*`` ports of the simulation top."""

    def __init__(self, dut, bus_bytes: int) -> None:
        self.dut = dut
        self.bus_bytes = bus_bytes
        dut.dram_image_load.value = 0
        dut.dram_image_dump.value = 0

    def configure(self, memory: MemorySystem, writable: tuple[tuple[int, int], ...],
                  ram_bytes: int) -> None:
        """Set the timing, the size and the writable ranges (held for the whole run)."""
        if len(writable) > WRITABLE_RANGES:
            raise ValueError(f"{len(writable)} writable ranges, at most {WRITABLE_RANGES}")
        dut = self.dut
        dut.dram_latency.value = memory.latency
        rate = round(memory.beats_per_cycle(self.bus_bytes) * (1 << RATE_BITS))
        dut.dram_rate.value = max(1, min(rate, 1 << RATE_BITS))
        dut.dram_outstanding.value = memory.outstanding or MAX_OUTSTANDING
        dut.dram_size_words.value = ram_bytes // self.bus_bytes
        starts, ends = _pack_ranges(writable)
        dut.dram_writable_count.value = len(writable)
        dut.dram_writable_start.value = starts
        dut.dram_writable_end.value = ends

    async def _pulse(self, strobe, path: Path) -> None:
        self.dut.dram_image_path.value = _path_value(path)
        strobe.value = 1
        await RisingEdge(self.dut.host_clk)
        strobe.value = 0
        await RisingEdge(self.dut.host_clk)

    async def load(self, image: bytes, ram_bytes: int, path: Path) -> None:
        """Write ``image`` (zero-padded to ``ram_bytes``) to ``path`` and load it."""
        path.write_bytes(image_to_hex(image, self.bus_bytes, ram_bytes))
        await self._pulse(self.dut.dram_image_load, path)

    async def dump(self, length: int, path: Path) -> bytes:
        """The first ``length`` bytes of the memory, dumped through ``path``."""
        words = max(1, -(-length // self.bus_bytes))
        self.dut.dram_dump_words.value = words
        await self._pulse(self.dut.dram_image_dump, path)
        return hex_to_image(path.read_text(), self.bus_bytes)[:length]

    def violations(self) -> list[tuple[int, int]]:
        """The first refused write ``(address, length)`` of the run, or ``[]``."""
        dut = self.dut
        if str(dut.dram_violation.value) != "1":
            return []
        return [(int(dut.dram_violation_address.value), int(dut.dram_violation_length.value))]

    def refused_writes(self) -> int:
        return int(self.dut.dram_violations.value)
