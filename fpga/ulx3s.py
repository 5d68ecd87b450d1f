"""The ULX3S board top: the SoC on the board's 25 MHz clock, FTDI UART and LEDs.

Pins and I/O standards come from amaranth-boards' ULX3S platform (clock ``clk25`` on G2, the
FTDI UART's ``rx`` on M1 and ``tx`` on L4, LVCMOS33), so this module only says which
resources the SoC uses. The platform makes the ``sync`` domain from ``clk25`` with its
power-on reset. LEDs: 0 the accelerator's done (``irq``), 7 a ~1.5 Hz heartbeat that says
the bitstream is loaded and clocked.
"""

from __future__ import annotations

from amaranth import Elaboratable, Module, Signal
from amaranth.lib import io

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.board.soc import BoardSoc, SocOptions
from tensorforge.hw.targets import Target

BOARD_CLOCK_HZ = 25e6
#: ULX3S variants by their ECP5 part (the 85F first; the platforms differ only in the part).
PARTS = {"ulx3s": "LFE5U-85F", "ulx3s-85f": "LFE5U-85F", "ulx3s-45f": "LFE5U-45F",
         "ulx3s-25f": "LFE5U-25F", "ulx3s-12f": "LFE5U-12F"}
PACKAGE = "CABGA381"  # every ULX3S (nextpnr's name for the platform's "BG381")
HEARTBEAT_BITS = 24  # 25 MHz / 2**24: the LED toggles every ~0.67 s


def platform_for(board: str):
    """The amaranth-boards platform of ``board`` (a key of `PARTS`)."""
    from amaranth_boards import ulx3s

    try:
        size = PARTS[board].split("-")[1]
    except KeyError:
        raise ConfigError(f"unknown board {board!r}; known: {', '.join(PARTS)}") from None
    return getattr(ulx3s, f"ULX3S_{size}_Platform")(toolchain="Trellis")


def check_clock(options: SocOptions) -> None:
    """The SoC runs on the board's oscillator: refuse options made for another clock."""
    if options.clock_hz != BOARD_CLOCK_HZ:
        raise ConfigError(f"the ULX3S SoC runs on the board's {BOARD_CLOCK_HZ / 1e6:g} MHz "
                          f"clock, not {options.clock_hz / 1e6:g} MHz")


class Ulx3sTop(Elaboratable):
    """`BoardSoc` wired to the ULX3S's UART and LEDs (see the module docstring); ``options``
    must pass `check_clock`. The accelerator is built for the ``ecp5`` target (its multipliers
    on MULT18X18D slices with their own registers, pipeline registers in its memory-side
    control: the same results as the simulated SoC, a few more cycles)."""

    def __init__(self, config: AcceleratorConfig, options: SocOptions) -> None:
        self.config = config
        self.options = options

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.soc = soc = BoardSoc(self.config, self.options, Target.ECP5)
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = uart_rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = uart_tx = io.Buffer("o", uart.tx)
        m.submodules.done_led = done_led = io.Buffer("o", platform.request("led", 0, dir="-"))
        m.submodules.heartbeat_led = heartbeat_led = io.Buffer(
            "o", platform.request("led", 7, dir="-"))
        heartbeat = Signal(HEARTBEAT_BITS)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        m.d.comb += [soc.uart_rx.eq(uart_rx.i), uart_tx.o.eq(soc.uart_tx),
                     done_led.o.eq(soc.irq), heartbeat_led.o.eq(heartbeat[-1])]
        return m
