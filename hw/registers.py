"""The control/status register map and the AXI4-Lite register file that serves it.

`REGISTERS` is the one definition of the map: the hardware decodes addresses from it, the
simulator and drivers look registers up in it by name (`register`), and the docs print it
(`markdown`). All registers are 32 bits, word aligned; writes to read-only registers and reads
of unmapped addresses are ignored / return 0 with an OKAY response.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.hw.axi import Response, axi_lite_signature

REGISTER_BITS = 32
ADDRESS_BITS = 8


class Access(enum.StrEnum):
    READ = "r"
    WRITE = "w"
    READ_WRITE = "rw"


class Status(enum.IntFlag):
    """Bits of the STATUS register."""

    DONE = 1
    BUSY = 2
    ERROR = 4  # a token counter overflowed, or DRAM answered with an error response


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: Access
    doc: str


REGISTERS: tuple[Register, ...] = (
    Register("control", 0x00, Access.WRITE, "bit 0: write 1 to start the program (self-clearing)"),
    Register("status", 0x04, Access.READ, "bit 0 done, bit 1 busy, bit 2 error (`Status`)"),
    Register("insn_addr", 0x08, Access.READ_WRITE, "DRAM byte address of the program (16-aligned)"),
    Register("insn_count", 0x0C, Access.READ_WRITE, "number of 16-byte instructions to run"),
    Register("cycles", 0x10, Access.READ, "cycles from start to done"),
    Register("load_busy", 0x14, Access.READ, "cycles the load unit was executing a LOAD"),
    Register("compute_busy", 0x18, Access.READ, "cycles the compute unit was executing"),
    Register("store_busy", 0x1C, Access.READ, "cycles the store unit was executing a STORE"),
    Register("bank_conflicts", 0x20, Access.READ, "cycles a scratchpad read lost its bank"),
    Register("dep_wait", 0x24, Access.READ, "sum over units of cycles waiting for a token"),
    Register("bytes_read", 0x28, Access.READ, "AXI read bytes (beats x bus width), fetch included"),
    Register("bytes_written", 0x2C, Access.READ, "AXI write bytes (beats x bus width)"),
)

COUNTERS = tuple(r.name for r in REGISTERS if r.offset >= 0x10)


def register(name: str) -> Register:
    """The register called ``name`` (raises KeyError naming the known ones)."""
    for entry in REGISTERS:
        if entry.name == name:
            return entry
    raise KeyError(f"no register {name!r}; known: {', '.join(r.name for r in REGISTERS)}")


def markdown() -> str:
    lines = ["| offset | name | access | meaning |", "|---|---|---|---|"]
    lines += [f"| {r.offset:#04x} | `{r.name}` | {r.access.value} | {r.doc} |" for r in REGISTERS]
    return "\n".join(lines) + "\n"


class ControlRegisters(wiring.Component):
    """AXI4-Lite register file for `REGISTERS`.

    Contract: one write and one read in flight; a write takes effect at the edge where AW and
    W are both accepted and is answered on B the cycle after; a read is answered on R the cycle
    after AR (``read_latency`` = 1). ``start`` pulses for one cycle per write of 1 to bit 0 of
    ``control``. Each readable register has an input port of the same name; ``insn_addr`` and
    ``insn_count`` are outputs that hold what software wrote.
    """

    read_latency = 1

    def __init__(self) -> None:
        members = {
            "bus": In(axi_lite_signature(ADDRESS_BITS)),
            "start": Out(1),
            "insn_addr": Out(REGISTER_BITS),
            "insn_count": Out(REGISTER_BITS),
            "status": In(REGISTER_BITS),
        }
        members.update({name: In(REGISTER_BITS) for name in COUNTERS})
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        bus = self.bus

        writing = bus.awvalid & bus.wvalid & ~bus.bvalid
        m.d.comb += [bus.awready.eq(writing), bus.wready.eq(writing), bus.bresp.eq(Response.OKAY)]
        m.d.sync += self.start.eq(0)
        with m.If(writing):
            m.d.sync += bus.bvalid.eq(1)
            with m.Switch(bus.awaddr[2:]):
                with m.Case(register("control").offset >> 2):
                    m.d.sync += self.start.eq(bus.wdata[0])
                for name in ("insn_addr", "insn_count"):
                    with m.Case(register(name).offset >> 2):
                        m.d.sync += getattr(self, name).eq(bus.wdata)
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        readable = {r.offset >> 2: getattr(self, r.name) for r in REGISTERS if "r" in r.access}
        m.d.comb += [bus.arready.eq(~bus.rvalid), bus.rresp.eq(Response.OKAY)]
        with m.If(bus.arvalid & ~bus.rvalid):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(0)]
            with m.Switch(bus.araddr[2:]):
                for word, source in readable.items():
                    with m.Case(word):
                        m.d.sync += bus.rdata.eq(source)
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m
