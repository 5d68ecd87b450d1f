"""The accelerator top level: controller, load/compute/store units, buffers, AXI ports.

Ports (Verilog names as Amaranth flattens them, top module ``accelerator``):

* ``m_axi__*``: one AXI4 manager to DRAM (``dma.bus_bits`` data, 32-bit addresses, 1-bit IDs).
  Instruction fetch and LOAD share AR/R (`AxiReadArbiter`, IDs `ReadId`), STORE uses AW/W/B.
* ``s_axil__*``: AXI4-Lite subordinate with the control/status registers (8-bit addresses).
* ``irq``: high while STATUS.done is set.

Activation memory (``scratchpad.activations`` bytes, none by default): a block RAM inside the
accelerator (`AxiMemory`, submodule ``activations``) that is a window of the DMA's address
space, `AcceleratorConfig.activation_window` (from ``ACTIVATION_BASE`` = 2^31). LOAD reads
and STORE writes to DMA addresses from 2^31 up go to it (`AxiWindowDecoder`) and never
appear on ``m_axi``, so a network's activations can stay on chip between layers; the
instruction fetch always reads DRAM. A burst that starts or runs past the window's end is
answered SLVERR and ends in STATUS.error, as a DRAM error does. The memory serves one read
and one write burst at a time, a beat per cycle (`AxiMemory`'s timing attributes give the
cycles around each burst); a unit's burst to the window waits until its bursts to DRAM are
answered, and the other way round.

Register map (`tensorforge.hw.registers.REGISTERS`, 32-bit registers):

=======  ==============  ======  ==================================================
offset   name            access  meaning
=======  ==============  ======  ==================================================
0x00     control         w       bit 0: write 1 to start the program
0x04     status          r       bit 0 done, bit 1 busy, bit 2 error
0x08     insn_addr       rw      DRAM byte address of the program (16-aligned)
0x0C     insn_count      rw      number of 16-byte instructions
0x10     cycles          r       cycles from start to done
0x14     load_busy       r       cycles the load unit was busy
0x18     compute_busy    r       cycles the compute unit was busy
0x1C     store_busy      r       cycles the store unit was busy
0x20     bank_conflicts  r       cycles a scratchpad read lost its bank
0x24     dep_wait        r       sum over units of cycles waiting for a token
0x28     bytes_read      r       ``m_axi`` read bytes (beats x bus width), fetch included
0x2C     bytes_written   r       ``m_axi`` write bytes (beats x bus width)
=======  ==============  ======  ==================================================

Counters restart from 0 at each start and count only while busy. ``bytes_read`` and
``bytes_written`` count DRAM traffic only: the activation memory's beats are on chip.
"""

from __future__ import annotations

import functools

from amaranth import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig
from tensorforge.hw.accumulator import AccumulatorBuffer
from tensorforge.hw.axi import AxiReadArbiter, axi_lite_signature, axi_signature, forward
from tensorforge.hw.axi_memory import AxiMemory
from tensorforge.hw.axi_window import AxiWindowDecoder, Channels
from tensorforge.hw.controller import Controller
from tensorforge.hw.counters import add_counters
from tensorforge.hw.dma import LoadUnit, StoreUnit
from tensorforge.hw.ports import SPAD_ADDR_BITS
from tensorforge.hw.registers import (
    ADDRESS_BITS,
    ControlRegisters,
    Status,
)
from tensorforge.hw.scratchpad import Scratchpad
from tensorforge.hw.skid import SkidBuffer
from tensorforge.hw.targets import Target, parse_target
from tensorforge.hw.unit_link import RegisteredUnitLink

TOP_NAME = "accelerator"


class Accelerator(wiring.Component):
    """The whole accelerator for one `AcceleratorConfig`.

    Contract: software writes ``insn_addr`` and ``insn_count``, writes 1 to ``control`` and
    polls ``status`` (or waits for ``irq``); the program's DRAM writes are complete when
    ``done`` is set. ``start_latency`` = 2 cycles from the AXI-Lite write to ``busy``.
    ``compute_unit`` replaces the compute unit (a factory taking the config), for tests.
    ``target`` picks the primitives (`tensorforge.hw.targets`); every target computes the
    same results, ``ecp5`` in a few more cycles.
    """

    start_latency = 2

    def __init__(self, config: AcceleratorConfig, compute_unit=None,
                 target: Target | str = Target.GENERIC) -> None:
        self.config = config
        self.target = parse_target(target)
        if compute_unit is None:
            from tensorforge.hw.compute_unit import ComputeUnit

            compute_unit = functools.partial(ComputeUnit, target=self.target)
        self._compute_unit = compute_unit
        super().__init__(
            {
                "m_axi": Out(axi_signature(config.dma.bus_bits)),
                "s_axil": In(axi_lite_signature(ADDRESS_BITS)),
                "irq": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        m.submodules.registers = registers = ControlRegisters()
        m.submodules.load = load = LoadUnit(config, self.target)
        m.submodules.compute = compute = self._compute_unit(config)
        m.submodules.store = store = StoreUnit(config, self.target)
        units = {"load": load, "compute": compute, "store": store}
        # a unit that reports retirement takes its next command before it is idle
        retiring = tuple(name for name, unit in units.items()
                         if "retired" in unit.signature.members)
        ecp5 = self.target is Target.ECP5
        m.submodules.controller = controller = Controller(
            config, retiring, pipelined=ecp5)
        m.submodules.scratchpad = scratchpad = Scratchpad(
            config, read_every_cycle=ecp5, registered_reads=ecp5, registered_addresses=ecp5,
            bram_output_registers=ecp5)
        m.submodules.accumulator = accumulator = AccumulatorBuffer(
            config, read_every_cycle=ecp5, registered_reads=ecp5, registered_writes=ecp5,
            registered_dma_reads=store.registered_acc_reads, bram_output_registers=ecp5)
        m.submodules.read_arbiter = arbiter = AxiReadArbiter(
            config.dma.bus_bits, registered=self.target is Target.ECP5)

        wiring.connect(m, wiring.flipped(self.s_axil), registers.bus)
        wiring.connect(m, controller.fetch, arbiter.fetch)
        load_dram, store_dram = load.axi, store.axi  # the units' ports toward DRAM
        if config.scratchpad.activations:
            load_dram, store_dram = self._add_activation_memory(m, load.axi, store.axi)
        wiring.connect(m, load_dram, arbiter.load)
        forward(m, arbiter.bus, self.m_axi)
        forward(m, store_dram, self.m_axi)

        for name, unit in units.items():
            self._link_unit(m, controller, name, unit, retires=name in retiring, registered=ecp5)
        for name in ("a_read", "b_read"):
            requester, port = getattr(compute, name), getattr(scratchpad, name)
            if ecp5:  # the bank arbitration starts from registers, the walkers' handshake too
                skid = m.submodules[f"{name}_request"] = SkidBuffer(unsigned(SPAD_ADDR_BITS))
                wiring.connect(m, requester.req, skid.i)
                wiring.connect(m, skid.o, port.req)
                wiring.connect(m, port.resp, requester.resp)
            else:
                wiring.connect(m, requester, port)
        wiring.connect(m, load.spad_write, scratchpad.write)
        wiring.connect(m, compute.acc_read, accumulator.compute_read)
        wiring.connect(m, compute.acc_write, accumulator.compute_write)
        wiring.connect(m, load.acc_write, accumulator.dma_write)
        wiring.connect(m, store.acc_read, accumulator.dma_read)

        error = Signal()
        m.d.comb += [
            controller.start.eq(registers.start),
            controller.insn_addr.eq(registers.insn_addr),
            controller.insn_count.eq(registers.insn_count),
            error.eq(controller.error | load.error | store.error),
            registers.status.eq(
                (controller.done * int(Status.DONE))
                | (controller.busy * int(Status.BUSY))
                | (error * int(Status.ERROR))
            ),
            self.irq.eq(controller.done),
        ]

        bus_bytes = config.dma.bus_bytes
        axi = self.m_axi
        increments = {
            "cycles": 1,
            "load_busy": ~load.idle,
            "compute_busy": ~compute.idle,
            "store_busy": ~store.idle,
            "bank_conflicts": scratchpad.conflict,
            "dep_wait": controller.dep_wait,
            "bytes_read": (axi.rvalid & axi.rready) * bus_bytes,
            "bytes_written": (axi.wvalid & axi.wready) * bus_bytes,
        }
        # on ECP5 the increments are registered: every path into a counter starts at a
        # register next to it (docs/ecp5_target.md)
        add_counters(m, registers, increments, starting=registers.start & ~controller.busy,
                     busy=controller.busy, registered=ecp5)
        return m

    @staticmethod
    def _link_unit(m: Module, controller, name: str, unit, retires: bool,
                   registered: bool) -> None:
        """The controller's gate to one unit: wired directly, or (``registered``, the ECP5
        target) through a `RegisteredUnitLink`, so the gate decides from registers."""
        command = getattr(controller, f"{name}_cmd")
        idle, retired = unit.idle, unit.retired if retires else None
        if registered:
            link = m.submodules[f"{name}_link"] = RegisteredUnitLink(command.payload.shape())
            wiring.connect(m, command, link.gate_cmd)
            command = link.unit_cmd
            m.d.comb += [link.unit_idle.eq(idle), link.unit_retired.eq(retired if retires else 0)]
            idle, retired = link.gate_idle, link.gate_retired
        wiring.connect(m, command, unit.cmd)
        m.d.comb += getattr(controller, f"{name}_idle").eq(idle)
        if retires:
            m.d.comb += getattr(controller, f"{name}_retired").eq(retired)

    def _add_activation_memory(self, m: Module, load_axi, store_axi):
        """The activation memory (`AxiMemory`, submodule ``activations``) and the decoders
        that route the load unit's reads and the store unit's writes in its window to it;
        returns the decoders' DRAM ports, which stand in for the units' own."""
        config = self.config
        bus_bits, outstanding = config.dma.bus_bits, config.dma.outstanding
        m.submodules.activations = memory = AxiMemory(config.scratchpad.activations, bus_bits)
        m.submodules.load_window = reads = AxiWindowDecoder(
            bus_bits, Channels.READ, ACTIVATION_BASE, outstanding)
        m.submodules.store_window = writes = AxiWindowDecoder(
            bus_bits, Channels.WRITE, ACTIVATION_BASE, outstanding)
        wiring.connect(m, load_axi, reads.bus)
        wiring.connect(m, store_axi, writes.bus)
        for decoder in (reads, writes):
            forward(m, decoder.window, memory.axi)
        return reads.dram, writes.dram
