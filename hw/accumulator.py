"""The accumulator buffer: C blocks the compute unit accumulates into and the DMA stores from.

One `Memory` of ``acc_lines`` lines of ``acc_line_elems`` x ``acc_bits``, two read ports
(compute, DMA) and one write port shared by the compute unit and the DMA (LOAD into ACC).
Synthesis tools build the two read ports by duplicating the RAM, which keeps it in block RAM;
a second write port would not.
"""

from __future__ import annotations

from amaranth import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.ports import acc_read_port, acc_write_port
from tensorforge.hw.scratchpad import ReadSlot, RegisteredReadBuffer


class AccumulatorBuffer(wiring.Component):
    """Accumulator lines with masked element writes.

    Contract: a read accepted in cycle t returns its line in cycle t+1 (``read_latency`` = 1),
    one line per read port per cycle, independently. Writes land at the clock edge
    (``write_latency`` = 1: a read accepted in the cycle after a write sees it; in the same
    cycle, the old line). The compute unit's writes win the write port; a DMA write waits
    (``dma_write.req.ready`` low) while the compute unit writes.

    ``read_every_cycle`` (the ECP5 target): the memory's read ports are enabled in every cycle
    and read whatever address is presented; the slots take the data only in the cycle after
    an accepted read, so the responses are the same. The block RAMs' clock enables and the
    flip-flops Yosys adds on their read side then have no enable, where the acceptance (the
    consumer's handshake) drove about 330 enables per port.

    ``registered_reads`` (the ECP5 target): the compute port's data is registered (no enable)
    and answered through `RegisteredReadBuffer`: a read accepted in cycle t returns its line
    in cycle t+2, one line per cycle as before; its ``req.ready`` no longer waits on
    ``resp.ready``. Writes and what a read sees (the line as of its acceptance) are unchanged.
    The DMA port keeps `ReadSlot` (one line owned at a time): the store unit latches each
    row's fields with the request and relies on that.
    """

    read_latency = 1
    write_latency = 1

    def __init__(self, config: AcceleratorConfig, read_every_cycle: bool = False,
                 registered_reads: bool = False) -> None:
        self.config = config
        self.read_every_cycle = read_every_cycle
        self.registered_reads = registered_reads
        super().__init__(
            {
                "compute_read": In(acc_read_port(config)),
                "compute_write": In(acc_write_port(config)),
                "dma_read": In(acc_read_port(config)),
                "dma_write": In(acc_write_port(config)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        line_bits = config.acc_line_elems * config.precision.acc_bits
        memory = Memory(shape=unsigned(line_bits), depth=config.acc_lines, init=[])
        m.submodules.memory = memory
        address_bits = max(1, (config.acc_lines - 1).bit_length())

        for name, port in (("compute", self.compute_read), ("dma", self.dma_read)):
            read_port = memory.read_port(transparent_for=())
            registered = self.registered_reads and name == "compute"
            slot = (RegisteredReadBuffer if registered else ReadSlot)(
                port, line_bits, f"{name}_read")
            accepted = Signal(name=f"{name}_read_accepted")
            m.d.comb += [
                accepted.eq(port.req.valid & slot.can_accept),
                port.req.ready.eq(slot.can_accept),
                read_port.en.eq(1 if self.read_every_cycle else accepted),
                read_port.addr.eq(port.req.payload[:address_bits]),
            ]
            slot.elaborate_into(m, read_port.data, accepted)

        write_port = memory.write_port(granularity=config.precision.acc_bits)
        compute, dma = self.compute_write.req, self.dma_write.req
        m.d.comb += [compute.ready.eq(1), dma.ready.eq(~compute.valid)]
        with m.If(compute.valid):
            m.d.comb += [
                write_port.addr.eq(compute.payload.addr),
                write_port.data.eq(compute.payload.data),
                write_port.en.eq(compute.payload.mask),
            ]
        with m.Elif(dma.valid):
            m.d.comb += [
                write_port.addr.eq(dma.payload.addr),
                write_port.data.eq(dma.payload.data),
                write_port.en.eq(dma.payload.mask),
            ]
        return m
