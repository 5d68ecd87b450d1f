"""Verilog of the requantizer alone between registers, for an ECP5 Fmax comparison.

``python benchmarks/requantizer_verilog.py generic|ecp5 > requant.v`` then
``tensorforge synth requant.v --top requant_top --flow ecp5 --clock-ns 8 --out-of-context``:
the default 8x8 config's requantizer (8 lanes, int32 -> int8), `Requantizer` (generic, one
combinational stage) or `PipelinedRequantizer` (ecp5), its line and parameters from one input
register and its result into one output register (docs/ecp5_target.md).
"""

from __future__ import annotations

import sys

from amaranth import Elaboratable, Module, Signal
from amaranth.back import verilog

from tensorforge.config import AcceleratorConfig
from tensorforge.hw.output_pipeline import PipelinedRequantizer, Requantizer
from tensorforge.requant import PARAM_LINES


class RegisteredRequantizer(Elaboratable):
    def __init__(self, staged: bool) -> None:
        self.config = AcceleratorConfig(output_pipeline=True)
        self.staged = staged
        self.line_bits = self.config.acc_line_elems * self.config.precision.acc_bits
        self.din = Signal(self.line_bits * (1 + PARAM_LINES))
        self.dout = Signal(self.config.acc_line_elems * self.config.precision.in_bits)

    def elaborate(self, platform) -> Module:
        m = Module()
        unit = PipelinedRequantizer(self.config, 1) if self.staged else Requantizer(self.config)
        m.submodules.unit = unit
        held = Signal.like(self.din)
        m.d.sync += held.eq(self.din)
        ports = [unit.line] + [getattr(unit, f"param_{k}") for k in range(PARAM_LINES)]
        for k, port in enumerate(ports):
            m.d.comb += port.eq(held[k * self.line_bits:(k + 1) * self.line_bits])
        if self.staged:
            m.d.comb += unit.valid.eq(1)
        m.d.sync += self.dout.eq(unit.narrow)
        return m


def main(argv: list[str]) -> int:
    if argv not in (["generic"], ["ecp5"]):
        print("usage: requantizer_verilog.py generic|ecp5", file=sys.stderr)
        return 2
    top = RegisteredRequantizer(staged=argv[0] == "ecp5")
    print(verilog.convert(top, name="requant_top", ports=[top.din, top.dout]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
