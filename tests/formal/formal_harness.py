"""The frame every unit harness shares: the design elaborated once, free inputs, no reset."""

from __future__ import annotations

from amaranth.hdl import Assume, Module, ResetSignal, Signal
from formal_probe import elaborated
from formal_properties import Past, stream_source


class Harness:
    """A top module holding ``design`` (elaborated here, so its insides can be probed).

    ``free`` collects the inputs the solver drives; reset stays low, since every register
    starts at its reset value anyway.
    """

    def __init__(self, design) -> None:
        self.design = design
        self.fragment = elaborated(design)
        self.m = m = Module()
        m.submodules.design = self.fragment
        m.d.comb += Assume(~ResetSignal())
        self.past = Past(m)
        self.free: list = []

    def free_input(self, signal):
        """Let the solver drive ``signal`` (a design input) freely."""
        source = Signal.like(signal, name=f"free_{signal.name}")
        self.free.append(source)
        self.m.d.comb += signal.eq(source)
        return source

    def command_source(self, port, name: str):
        """Free commands on a stream ``port``, offered by the stream rules; returns the payload
        view the caller constrains with `Assume`."""
        self.free_input(port.valid)
        self.free_input(port.payload.as_value())
        stream_source(self.m, self.past, port, name=name)
        return port.payload
