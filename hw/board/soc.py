"""The board SoC: the accelerator, on-chip memory in place of DRAM, and a UART host bridge.

::

    uart_rx -> UartReceiver -> FIFO -> HostBridge -> AxiLiteDecoder -+-> memory.host
    uart_tx <- UartTransmitter <------/                               +-> accelerator.s_axil
                                                                      +-> SocInfo
    accelerator.m_axi ----------------------------------------------> memory.axi

The address map and the frames are `tensorforge.hw.board.host_protocol`'s. The same component is
the board top's content (`tensorforge.fpga.ulx3s`) and the simulated board
(`tensorforge.sim.soc_sim`), so the runtime is tested against the design that is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.accelerator import Accelerator
from tensorforge.hw.axi import Response, axi_lite_signature
from tensorforge.hw.board.axi_lite_decoder import AxiLiteDecoder
from tensorforge.hw.board.host_bridge import HostBridge
from tensorforge.hw.board.host_protocol import (
    INFO_BASE,
    INFO_MAGIC,
    INFO_WORDS,
    MEMORY_BASE,
    PROTOCOL_VERSION,
    REGISTERS_BASE,
    WINDOW_BITS,
    config_digest,
)
from tensorforge.hw.board.onchip_memory import OnChipMemory
from tensorforge.hw.board.uart import UartReceiver, UartTransmitter, uart_divisor
from tensorforge.hw.registers import ADDRESS_BITS
from tensorforge.hw.targets import Target, parse_target

MEMORY_WINDOW_BITS = 31  # memory answers 0x00000000-0x7fffffff (SLVERR past its size)
RX_FIFO_BYTES = 16  # slack while the bridge waits for a memory port the accelerator holds


@dataclass(frozen=True)
class SocOptions:
    """What the SoC adds around the accelerator.

    ``memory_bytes`` of block RAM (a power of two; 128 KiB takes 64 of the LFE5U-85F's 208
    DP16KD beside the 8x8 accelerator's own); the UART runs at ``baud`` from a ``clock_hz``
    clock; a frame silent for ``frame_timeout_s`` is abandoned.
    """

    memory_bytes: int = 128 * 1024
    clock_hz: float = 25e6
    baud: int = 115200
    frame_timeout_s: float = 0.1

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0 or self.memory_bytes & (self.memory_bytes - 1):
            raise ConfigError(f"memory size must be a power of two of bytes, not "
                              f"{self.memory_bytes}")
        if self.memory_bytes > 1 << MEMORY_WINDOW_BITS:
            raise ConfigError(f"memory size must be at most 2 GiB, not {self.memory_bytes}")
        uart_divisor(self.clock_hz, self.baud)
        if not self.frame_timeout_s > 0:
            raise ConfigError(f"frame timeout must be positive, not {self.frame_timeout_s}")

    @property
    def divisor(self) -> int:
        return uart_divisor(self.clock_hz, self.baud)

    @property
    def frame_timeout_cycles(self) -> int:
        return max(1, round(self.clock_hz * self.frame_timeout_s))


class SocInfo(wiring.Component):
    """Read-only words (``INFO_WORDS``) that describe the SoC to the host.

    Contract: a read is answered the cycle after AR; writes are taken and answered SLVERR.
    """

    def __init__(self, words: dict[str, int]) -> None:
        self.words = [words[name] for name in INFO_WORDS]
        super().__init__({"bus": In(axi_lite_signature(WINDOW_BITS))})

    def elaborate(self, platform) -> Module:
        m = Module()
        bus = self.bus
        m.d.comb += [bus.arready.eq(~bus.rvalid), bus.rresp.eq(Response.OKAY),
                     bus.bresp.eq(Response.SLVERR)]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(0)]
            with m.Switch(bus.araddr[2:]):
                for index, value in enumerate(self.words):
                    with m.Case(index):
                        m.d.sync += bus.rdata.eq(value)
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        writing = bus.awvalid & bus.wvalid & ~bus.bvalid
        m.d.comb += [bus.awready.eq(writing), bus.wready.eq(writing)]
        with m.If(writing):
            m.d.sync += bus.bvalid.eq(1)
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        return m


class BoardSoc(wiring.Component):
    """The SoC for one `AcceleratorConfig` and `SocOptions` (see the module docstring).

    Ports: ``uart_rx`` (idle high), ``uart_tx``, ``irq`` (the accelerator's done).
    ``target`` is the accelerator's (`tensorforge.hw.targets`; same results on every target).
    """

    def __init__(self, config: AcceleratorConfig, options: SocOptions | None = None,
                 target: Target | str = Target.GENERIC) -> None:
        self.config = config
        self.options = options or SocOptions()
        self.target = parse_target(target)
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "irq": Out(1)})

    def info_words(self) -> dict[str, int]:
        options = self.options
        return {
            "magic": INFO_MAGIC,
            "version": PROTOCOL_VERSION,
            "memory_bytes": options.memory_bytes,
            "config_digest": config_digest(self.config),
            "clock_hz": round(options.clock_hz),
            "baud": options.baud,
        }

    def elaborate(self, platform) -> Module:
        m = Module()
        options = self.options
        m.submodules.accelerator = accelerator = Accelerator(self.config, target=self.target)
        m.submodules.memory = memory = OnChipMemory(options.memory_bytes,
                                                    self.config.dma.bus_bits,
                                                    host_address_bits=MEMORY_WINDOW_BITS)
        m.submodules.receiver = receiver = UartReceiver(options.divisor)
        m.submodules.transmitter = transmitter = UartTransmitter(options.divisor)
        m.submodules.rx_fifo = rx_fifo = SyncFIFOBuffered(width=8, depth=RX_FIFO_BYTES)
        m.submodules.bridge = bridge = HostBridge(options.frame_timeout_cycles)
        m.submodules.decoder = decoder = AxiLiteDecoder({
            "memory": (MEMORY_BASE, MEMORY_WINDOW_BITS),
            "registers": (REGISTERS_BASE, ADDRESS_BITS),
            "info": (INFO_BASE, WINDOW_BITS),
        })
        m.submodules.info = info = SocInfo(self.info_words())

        m.d.comb += [receiver.rx.eq(self.uart_rx), self.uart_tx.eq(transmitter.tx),
                     self.irq.eq(accelerator.irq)]
        wiring.connect(m, receiver.bytes, rx_fifo.w_stream)
        wiring.connect(m, rx_fifo.r_stream, bridge.rx)
        wiring.connect(m, bridge.tx, transmitter.bytes)
        wiring.connect(m, bridge.bus, decoder.bus)
        wiring.connect(m, decoder.memory, memory.host)
        wiring.connect(m, decoder.registers, accelerator.s_axil)
        wiring.connect(m, decoder.info, info.bus)
        wiring.connect(m, accelerator.m_axi, memory.axi)
        return m
