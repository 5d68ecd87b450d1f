"""Switching activity of a program run, and the power and energy it implies after synthesis.

The ASIC flow (`tensorforge.fpga.synthesize_asic`) sets switching activity on the design's
*input ports* and lets OpenSTA propagate it through the mapped netlist. So what a run has to
supply is exactly that: per input port, the bit transitions per clock cycle the workload
caused. `ToggleCounter` (cocotb side) samples every input except the clock once per rising
edge while the program runs and counts flipped bits; that is cheap, needs no waveform, and is
exact for synchronous inputs (sampling at the edge is what the flip-flops see). The data the
accelerator reads from DRAM arrives on ``m_axi__rdata``, so all-zero operands toggle far less
than random ones, and power follows.

Host side: `input_ports` lists a design's inputs from its Verilog, `PortActivity` turns
toggle counts into rates, and `estimate_power` synthesizes the design with them and returns
area, power, and energy = power x cycles x clock period.

This is the quick estimate (ports only, OpenSTA guesses the registers). `tensorforge.sim.power`
measures every register's activity instead; ``simulate --power`` uses that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CLOCK_PORT = "clk"
_DIGITS = 4  # rates are rounded so equal runs share one synthesis cache entry
_INPUT = re.compile(r"^\s*input\s+(?:\[(\d+):(\d+)\]\s*)?\\?([A-Za-z_][A-Za-z0-9_$]*)\s*;",
                    re.MULTILINE)


def input_ports(verilog: str, top: str) -> dict[str, int]:
    """Input ports of module ``top`` in Amaranth's Verilog, with their widths (clock excluded)."""
    match = re.search(rf"^module\s+\\?{re.escape(top)}\s*\(", verilog, re.MULTILINE)
    if match is None:
        raise ValueError(f"no module {top} in the Verilog")
    end = verilog.find("\nendmodule", match.end())
    body = verilog[match.end() : end if end >= 0 else None]
    ports = {}
    for high, low, name in _INPUT.findall(body):
        if name != CLOCK_PORT:
            ports[name] = abs(int(high) - int(low)) + 1 if high else 1
    return ports


class ToggleCounter:
    """Counts bit flips on input ports, sampled at each rising clock edge (cocotb side)."""

    def __init__(self, dut, ports: tuple[tuple[str, int], ...]) -> None:
        self.clock = dut.clk
        self.handles = [(name, getattr(dut, name)) for name, _ in ports]
        self.toggles = {name: 0 for name, _ in ports}
        self.cycles = 0
        self._task = None

    @staticmethod
    def _sample(handle) -> int:
        value = handle.value
        return int(value) if value.is_resolvable else 0

    def start(self) -> None:
        import cocotb

        self._task = cocotb.start_soon(self._count())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _count(self) -> None:
        from cocotb.triggers import RisingEdge

        edge = RisingEdge(self.clock)
        sample = self._sample
        previous = [sample(handle) for _, handle in self.handles]
        while True:
            await edge
            self.cycles += 1
            for index, (name, handle) in enumerate(self.handles):
                value = sample(handle)
                flipped = value ^ previous[index]
                if flipped:
                    self.toggles[name] += flipped.bit_count()
                    previous[index] = value


@dataclass(frozen=True)
class PortActivity:
    """Bit transitions per input port over ``cycles`` clock cycles of one run."""

    toggles: dict[str, int]
    widths: dict[str, int]
    cycles: int

    def rates(self) -> dict[str, float]:
        """Transitions per bit per clock cycle of each port (OpenSTA's ``-activity``)."""
        cycles = max(1, self.cycles)
        return {
            name: round(self.toggles.get(name, 0) / (cycles * width), _DIGITS)
            for name, width in sorted(self.widths.items())
        }

    @property
    def mean_rate(self) -> float:
        """Transitions per bit per cycle over all input bits."""
        bits = sum(self.widths.values())
        total = sum(self.toggles.get(name, 0) for name in self.widths)
        return round(total / (max(1, self.cycles) * max(1, bits)), _DIGITS)


@dataclass(frozen=True)
class PowerEstimate:
    """Area and power of a design under one run's activity, and that run's energy."""

    area_um2: float
    power_mw: float
    internal_mw: float
    switching_mw: float
    leakage_mw: float
    clock_ns: float
    cycles: int
    mean_activity: float

    @property
    def energy_uj(self) -> float:
        """mW x ns = 1e-12 J = 1e-6 uJ."""
        return self.power_mw * self.cycles * self.clock_ns * 1e-6

    def to_dict(self) -> dict[str, Any]:
        return {
            "area_um2": self.area_um2,
            "power_mw": self.power_mw,
            "internal_mw": self.internal_mw,
            "switching_mw": self.switching_mw,
            "leakage_mw": self.leakage_mw,
            "energy_uj": self.energy_uj,
            "clock_ns": self.clock_ns,
            "cycles": self.cycles,
            "mean_activity": self.mean_activity,
        }


def estimate_power(
    verilog: str, top: str, activity: PortActivity, cycles: int, *, clock_ns: float = 10.0
) -> PowerEstimate:
    """Synthesize ``verilog`` (cached) with the run's port activity; power and energy."""
    from tensorforge.fpga import synthesize_asic

    report = synthesize_asic(
        verilog,
        top,
        clock_ns=clock_ns,
        activity=activity.mean_rate,
        port_activity=activity.rates(),
        clock_port=CLOCK_PORT,
    )
    power = report.power_mw
    return PowerEstimate(
        area_um2=report.area_um2,
        power_mw=power.total,
        internal_mw=power.internal,
        switching_mw=power.switching,
        leakage_mw=power.leakage,
        clock_ns=clock_ns,
        cycles=cycles,
        mean_activity=activity.mean_rate,
    )
