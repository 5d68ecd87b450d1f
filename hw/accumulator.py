"""The accumulator buffer: C blocks the compute unit accumulates into and the DMA stores from.

One `Memory` of ``acc_lines`` lines of ``acc_line_elems`` x ``acc_bits``, two read ports
(compute, DMA) and one write port shared by the compute unit and the DMA (LOAD into ACC).
Synthesis tools build the two read ports by duplicating the RAM, which keeps it in block RAM;
a second write port would not.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.ecp5_bram import Ecp5BlockRam
from tensorforge.hw.ports import acc_read_port, acc_write_port
from tensorforge.hw.scratchpad import ReadSlot, RegisteredReadBuffer


@dataclass(frozen=True)
class _Write:
    """The write the memory takes in this cycle (``registered_writes``): ``en`` per element."""

    addr: Signal
    data: Signal
    en: Signal
    # (this writer writes, its registered request) per writer, first to last in priority:
    # what ``addr``, ``data`` and ``en`` are driven from (`_write_from`), and what a compare
    # with an address reads directly, skipping that choice (`enables_at`)
    writers: tuple

    def enables_at(self, address):
        """``en`` where ``addr`` is ``address``, else 0: each writer's address compared on its
        own and the writer chosen after, so no multiplexer precedes the compares."""
        hits = Const(0, len(self.en))
        for chosen, request in reversed(self.writers):
            hits = Mux(chosen & (request.addr == address), request.mask, hits)
        return hits


def _write_from(m: Module, target, writers) -> None:
    """Drive ``target``'s ``addr``, ``data`` and ``en`` from the first of ``writers``
    ((this writer writes, its request) in priority order) that writes."""
    for index, (chosen, request) in enumerate(writers):
        with (m.If if index == 0 else m.Elif)(chosen):
            m.d.comb += [target.addr.eq(request.addr), target.data.eq(request.data),
                         target.en.eq(request.mask)]


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
    The DMA port keeps `ReadSlot` (one line owned at a time) unless ``registered_dma_reads``.

    ``registered_dma_reads`` (the ECP5 target, without ``output_pipeline``): the DMA port is
    registered and answered the same way (a read accepted in t returns its line in t+2, up to
    three lines owned), so the block RAM's read ends at a register instead of running on into
    the store unit's line queue; the store unit queues each request's row fields to match
    (`StoreUnit.registered_acc_reads`).

    ``registered_writes`` (the ECP5 target): each writer's request (address, data, mask) and
    the choice between them are registered (no enable) before the memory's write port, so a
    write accepted in cycle t reaches the memory in cycle t+1. A read accepted in t+1 still
    sees it, so the contract above is unchanged: the registered compute port
    (``registered_reads``) takes the elements that port wrote in its read's cycle into its line
    two cycles later (`_bypassed_read`), the DMA port is transparent to it. The compute unit's
    sum (its LUT-RAM queues' heads and the adders) and the choice of writer (from the writer's
    handshake, on about 550 loads) then end at these registers instead of at the write-data
    flip-flops Yosys puts in front of the block RAMs (to give the non-transparent read ports
    their old line on a collision, it writes them a cycle late and passes the written data
    around them).

    ``bram_output_registers`` (the ECP5 target, with ``read_every_cycle`` and
    ``registered_writes``): each registered port reads its own copy of the lines on DP16KD
    blocks whose output register is on (`Ecp5BlockRam`), written from the registered
    requests; that register stands where the port's fabric data register was, so the block
    RAM's read (5.8 ns from the clock to its data at speed 6, with the register 1 ns) ends
    inside the block. The latencies and what a read sees are unchanged (the lines the write
    port writes in a read's cycle are merged in as before; each element has blocks of its
    own, so an element written at the edge it is read is always bypassed). The registered
    ports' room to accept is kept as a thermometer the handshakes shift
    (`RegisteredReadBuffer` ``counted_room``): the same ``req.ready``, with no adders after
    the consumer's ``resp.ready``. A port that is not registered (the DMA port with
    ``output_pipeline``) keeps the `Memory`.
    """

    read_latency = 1
    write_latency = 1

    def __init__(self, config: AcceleratorConfig, read_every_cycle: bool = False,
                 registered_reads: bool = False, registered_writes: bool = False,
                 registered_dma_reads: bool = False,
                 bram_output_registers: bool = False) -> None:
        if bram_output_registers and not (read_every_cycle and registered_writes):
            raise ConfigError("bram_output_registers reads the block RAMs in every cycle and "
                              "bypasses them for the registered writes: it needs "
                              "read_every_cycle and registered_writes")
        self.config = config
        self.bram_output_registers = bram_output_registers
        self.read_every_cycle = read_every_cycle
        self.registered_reads = registered_reads
        self.registered_dma_reads = registered_dma_reads
        self.registered_writes = registered_writes
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
        blocks_only = self.bram_output_registers and self.registered_reads \
            and self.registered_dma_reads  # every port on its own DP16KD blocks
        if not blocks_only:
            memory = Memory(shape=unsigned(line_bits), depth=config.acc_lines, init=[])
            m.submodules.memory = memory
        address_bits = config.acc_address_bits

        early_write = None  # registered_writes: the registered requests, as the memory sees them
        write_port = None  # the memory's port they write through (unless blocks_only)
        if self.registered_writes:
            early_write = self._registered_write(m, self.compute_write.req, self.dma_write.req)
            if not blocks_only:
                write_port = memory.write_port(granularity=config.precision.acc_bits)
                m.d.comb += [write_port.addr.eq(early_write.addr),
                             write_port.data.eq(early_write.data),
                             write_port.en.eq(early_write.en)]
        for name, port in (("compute", self.compute_read), ("dma", self.dma_read)):
            registered = self.registered_dma_reads if name == "dma" else self.registered_reads
            bypassed = registered and early_write is not None
            if registered:
                slot = RegisteredReadBuffer(port, line_bits, f"{name}_read",
                                            counted_room=self.bram_output_registers)
            else:
                slot = ReadSlot(port, line_bits, f"{name}_read")
            accepted = Signal(name=f"{name}_read_accepted")
            read_addr = port.req.payload[:address_bits]
            m.d.comb += [
                accepted.eq(port.req.valid & slot.can_accept),
                port.req.ready.eq(slot.can_accept),
            ]
            if bypassed and self.bram_output_registers:
                ram = Ecp5BlockRam(config.acc_lines, line_bits, config.precision.acc_bits)
                m.submodules[f"{name}_blocks"] = ram
                m.d.comb += [ram.read_addr.eq(read_addr), ram.write_addr.eq(early_write.addr),
                             ram.write_data.eq(early_write.data),
                             ram.write_en.eq(early_write.en)]
                late = self._bypassed_read(m, early_write, read_addr, ram.read_data, name)
                slot.elaborate_into(m, None, accepted, registered_data=late)
                continue
            transparent_for = () if write_port is None or bypassed else (write_port,)
            read_port = memory.read_port(transparent_for=transparent_for)
            m.d.comb += [
                read_port.en.eq(1 if self.read_every_cycle else accepted),
                read_port.addr.eq(read_addr),
            ]
            if bypassed:
                data = Signal(len(read_port.data), name=f"{name}_read_q")
                m.d.sync += data.eq(read_port.data)
                late = self._bypassed_read(m, early_write, read_port.addr, data, name)
                slot.elaborate_into(m, read_port.data, accepted, registered_data=late)
            else:
                slot.elaborate_into(m, read_port.data, accepted)

        compute, dma = self.compute_write.req, self.dma_write.req
        if early_write is not None:
            m.d.comb += [compute.ready.eq(1), dma.ready.eq(~compute.valid)]
            return m
        write_port = memory.write_port(granularity=config.precision.acc_bits)
        m.d.comb += [compute.ready.eq(1), dma.ready.eq(~compute.valid)]
        _write_from(m, write_port, ((compute.valid, compute.payload), (dma.valid, dma.payload)))
        return m

    def _registered_write(self, m: Module, compute, dma) -> _Write:
        """Both writers' requests registered as they are, and which one writes: the chosen
        one's address, data and lane enables in the next cycle."""
        config = self.config
        from_compute = Signal(name="write_from_compute")
        from_dma = Signal(name="write_from_dma")
        compute_q = Signal.like(compute.payload, name="compute_write_q")
        dma_q = Signal.like(dma.payload, name="dma_write_q")
        write = _Write(
            addr=Signal(range(config.acc_lines), name="write_addr"),
            data=Signal(config.acc_line_elems * config.precision.acc_bits, name="write_data"),
            en=Signal(config.acc_line_elems, name="write_en"),
            writers=((from_compute, compute_q), (from_dma, dma_q)))
        m.d.sync += [
            from_compute.eq(compute.valid),
            from_dma.eq(dma.valid & ~compute.valid),
            compute_q.eq(compute.payload),
            dma_q.eq(dma.payload),
        ]
        _write_from(m, write, write.writers)
        return write

    def _bypassed_read(self, m: Module, write, read_addr, data, name: str):
        """A registered port's line, two cycles after its read (``data``, already registered),
        with the elements ``write`` wrote in the read's cycle (which a non-transparent read
        does not see).

        The port is not made transparent instead because Yosys would then merge the data
        register into the block RAM's read (the read data's only user), which puts the
        buffer's logic back behind the block RAM's 5.6 ns read."""
        acc_bits = self.config.precision.acc_bits
        elems = self.config.acc_line_elems
        hits = [Signal(elems, name=f"{name}_bypass_hits_{i}") for i in (1, 2)]
        lines = [Signal(len(write.data), name=f"{name}_bypass_line_{i}") for i in (1, 2)]
        m.d.sync += [
            hits[0].eq(write.enables_at(read_addr)),
            lines[0].eq(write.data),
            hits[1].eq(hits[0]),
            lines[1].eq(lines[0]),
        ]
        merged = Signal(len(data), name=f"{name}_read_merged")
        for e in range(elems):
            bits = slice(e * acc_bits, (e + 1) * acc_bits)
            m.d.comb += merged[bits].eq(Mux(hits[1][e], lines[1][bits], data[bits]))
        return merged
