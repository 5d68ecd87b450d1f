"""An 8N1 UART: a receiver and a transmitter with byte streams, for the board's host link.

Both run from one clock and a bit period of ``divisor`` cycles (`uart_divisor` picks it for a
clock and a baud rate). The receiver samples each bit in its middle, so it tolerates the
clock/baud mismatch of a rounded divisor (a few percent over ten bits).
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from tensorforge.errors import ConfigError

FRAME_BITS = 10  # start, 8 data, stop
MIN_DIVISOR = 4  # the receiver needs a middle to sample in
MAX_BAUD_ERROR = 0.02


def uart_divisor(clock_hz: float, baud: int) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``; a `ConfigError` when the rounding
    error would break framing or the rate is too fast for the clock."""
    if baud <= 0:
        raise ConfigError(f"baud rate must be positive, not {baud}")
    divisor = round(clock_hz / baud)
    if divisor < MIN_DIVISOR:
        raise ConfigError(
            f"{baud} baud is too fast for a {clock_hz / 1e6:g} MHz clock (at least "
            f"{MIN_DIVISOR} cycles per bit); use at most {int(clock_hz // MIN_DIVISOR)} baud"
        )
    error = abs(clock_hz / divisor - baud) / baud
    if error > MAX_BAUD_ERROR:
        raise ConfigError(
            f"{baud} baud is {error:.1%} off at {clock_hz / 1e6:g} MHz (divisor {divisor}); "
            f"pick a rate within {MAX_BAUD_ERROR:.0%}, e.g. {round(clock_hz / divisor)}"
        )
    return divisor


class UartReceiver(wiring.Component):
    """Bytes from the ``rx`` line (idle high), LSB first.

    Contract: a byte is offered on ``bytes`` half a bit after the middle of its stop bit and
    stays offered until taken; a byte that completes while the previous one is still offered
    is dropped and pulses ``overrun``. A start bit that is gone at its middle (a glitch) or a
    stop bit that is low (a framing error) delivers nothing.
    """

    def __init__(self, divisor: int) -> None:
        if divisor < MIN_DIVISOR:
            raise ConfigError(f"UART divisor must be at least {MIN_DIVISOR}, not {divisor}")
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "bytes": Out(stream.Signature(8)),
                          "overrun": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        line = Signal(init=1)
        m.submodules.synchronizer = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self.divisor))
        bit = Signal(range(8))
        shift = Signal(8)

        m.d.sync += self.overrun.eq(0)
        with m.If(self.bytes.ready):
            m.d.sync += self.bytes.valid.eq(0)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(self.divisor // 2)
                    m.next = "START"
            with m.State("START"):
                with m.If((timer == 0) & line):  # the start bit did not last: a glitch
                    m.next = "IDLE"
                with m.Elif(timer == 0):
                    m.d.sync += [timer.eq(self.divisor - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), bit.eq(bit + 1),
                                 timer.eq(self.divisor - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    with m.If(line):
                        with m.If(self.bytes.valid & ~self.bytes.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.bytes.payload.eq(shift), self.bytes.valid.eq(1)]
                    m.next = "IDLE"
        return m


class UartTransmitter(wiring.Component):
    """Bytes from ``bytes`` onto the ``tx`` line (idle high), LSB first, one stop bit.

    Contract: ``bytes.ready`` is high while the line is idle; a byte taken goes out as a
    ``FRAME_BITS * divisor``-cycle frame starting the next cycle.
    """

    def __init__(self, divisor: int) -> None:
        if divisor < MIN_DIVISOR:
            raise ConfigError(f"UART divisor must be at least {MIN_DIVISOR}, not {divisor}")
        self.divisor = divisor
        super().__init__({"bytes": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        frame = Signal(FRAME_BITS, init=~0)
        bits_left = Signal(range(FRAME_BITS + 1))
        timer = Signal(range(self.divisor))

        m.d.comb += [self.tx.eq(frame[0]), self.bytes.ready.eq(bits_left == 0)]
        with m.If(self.bytes.valid & self.bytes.ready):
            m.d.sync += [frame.eq(Cat(0, self.bytes.payload, 1)), bits_left.eq(FRAME_BITS),
                         timer.eq(self.divisor - 1)]
        with m.Elif(bits_left != 0):
            with m.If(timer == 0):
                m.d.sync += [frame.eq(Cat(frame[1:], 1)), bits_left.eq(bits_left - 1),
                             timer.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
