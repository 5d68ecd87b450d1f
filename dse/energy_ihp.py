"""Per-event energies of an accelerator on IHP SG13G2 (`energy.EventEnergies`), and the power of
its running clock.

Memories are not fitted: a line read or written costs what the IHP macros the flow picks for
that memory (`memory_shapes.choose`) say in their Liberty files, the same figures the ASIC
flow charges per counted access: a read touches the ``cols`` macros of one row of one copy, a
write every copy. A memory the flow builds from flip-flops has no macro energy; its logic is
in the logic fit.

The logic is fitted (`fit_energies`, by ``benchmarks/calibrate_energy.py``) on workload-driven
power runs of the synthesized netlist (`tensorforge.sim.power`): its energy over a run is
non-negative least squares on the run's events (`LOGIC_EVENTS`: MACs, bytes forwarded between
PEs, bus beats, accumulator lines written, each carrying the logic around it) plus a clock
term per cycle that grows with the design's registers (`clock_features`). DRAM is off chip:
`DRAM_PJ_PER_BYTE`, a published figure.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.energy import EventEnergies
from tensorforge.errors import ConfigError

TECH = "ihp-sg13g2"
FIT_FILE = f"energy_fit-{TECH}.json"
#: DRAM access energy: 20 pJ/bit, the low end of the 1.3-2.6 nJ per 64-bit access in
#: M. Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014 (the
#: figure the first-order model takes too, so the two agree off chip).
DRAM_PJ_PER_BYTE = 160.0
#: The events whose logic energy is fitted (their memories are priced from the macros).
LOGIC_EVENTS = ("macs", "forward_bytes", "dma_beats", "acc_line_writes")


def clock_features(config: AcceleratorConfig) -> dict[str, float]:
    """What the clock's energy per cycle grows with: the design's flip-flops, each of whose
    clock pins toggles every cycle (the RTL gates no clock; the measured clock power is
    10.2 uW per flip-flop at 100 MHz on every calibration design). The count is not known
    before synthesis, so the area model's standard-cell area stands in for it (its logic
    grows with its registers), with a constant."""
    from tensorforge.dse.area_power import component_costs, load_fit
    from tensorforge.dse.memory_shapes import memory_cost

    area = sum(part["area_um2"] for part in component_costs(load_fit(TECH), config).values())
    return {"logic_um2": area - memory_cost(config).macro_area_um2, "one": 1.0}


@dataclass(frozen=True)
class EnergyFit:
    """Fitted logic energy per event (pJ) and clock energy per cycle per feature (pJ), with
    the held-out check of the whole model and the setting it was fitted in."""

    logic_pj: dict[str, float]
    clock_pj: dict[str, float]
    clock_ns: float
    data: str
    rtl_commit: str
    errors: dict[str, Any] = field(default_factory=dict)
    hardware_digest: str = ""  # of the sources the measured RTL came from
    reference_rtl: list = field(default_factory=list)  # `sim.rtl_identity.reference_rtl`

    def stale_reasons(self) -> list[str]:
        """Why the fit no longer describes the RTL: its accelerators' Verilog changed."""
        from tensorforge.sim.rtl_identity import rtl_changed

        if self.hardware_digest and rtl_changed(self.hardware_digest, self.reference_rtl):
            return ["the RTL changed since the energy runs"]
        return []

    def held_out_error(self) -> float | None:
        """The largest held-out error of total on-chip power (None: not checked)."""
        held = self.errors.get("held_out")
        return None if not held else held["max_abs"]

    @property
    def digest(self) -> str:
        """Identity of the fit, for the hardware model's version."""
        from tensorforge.hashing import stable_hash

        return stable_hash(self.logic_pj, self.clock_pj, self.rtl_commit)[:12]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnergyFit:
        return cls(**data)

    def clock_pj_per_cycle(self, config: AcceleratorConfig) -> float:
        return sum(self.clock_pj.get(k, 0.0) * v for k, v in clock_features(config).items())


@functools.cache
def load_energy_fit() -> EnergyFit | None:
    """The packaged fit (``dse/data/energy_fit-ihp-sg13g2.json``), None before the first
    calibration."""
    path = resources.files("tensorforge.dse") / "data" / FIT_FILE
    try:
        return EnergyFit.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None


def memory_access_pj(config: AcceleratorConfig) -> dict[str, float]:
    """Macro energy of one scratchpad-bank and one accumulator line read and write (pJ)."""
    from tensorforge.dse.memory_shapes import choose, memory_requests

    energies = {"spad_read": 0.0, "spad_write": 0.0, "acc_read": 0.0, "acc_write": 0.0}
    for memory in memory_requests(config):
        kind = ("spad" if memory.instance.startswith("scratchpad.")
                else "acc" if memory.instance.startswith("accumulator.") else None)
        array = choose(memory.request).array if kind else None
        if array is None:
            continue
        energies[f"{kind}_read"] = array.cols * array.macro.read_pj
        energies[f"{kind}_write"] = array.cols * array.copies * array.macro.write_pj
    return energies


def ihp_energies(config: AcceleratorConfig, fit: EnergyFit | None = None) -> EventEnergies:
    """The per-event energies of ``config`` (``fit``: the packaged one)."""
    fit = fit or load_energy_fit()
    if fit is None:
        raise ConfigError(f"{FIT_FILE} is missing from tensorforge/dse/data; run "
                          "`python benchmarks/calibrate_energy.py` to make it")
    memory = memory_access_pj(config)
    logic = fit.logic_pj
    return EventEnergies(
        mac_pj=logic.get("macs", 0.0),
        spad_read_pj=memory["spad_read"],
        spad_write_pj=memory["spad_write"],
        acc_read_pj=memory["acc_read"],
        acc_write_pj=memory["acc_write"],
        forward_pj_per_byte=logic.get("forward_bytes", 0.0),
        dma_beat_pj=logic.get("dma_beats", 0.0),
        dram_pj_per_byte=DRAM_PJ_PER_BYTE,
        acc_write_logic_pj=logic.get("acc_line_writes", 0.0),
        source=f"{TECH}: memories from the macros' Liberty, logic fitted on workload-driven "
               f"power runs (RTL of {fit.rtl_commit})",
    )


def clock_power_w(config: AcceleratorConfig, clock_mhz: float,
                  fit: EnergyFit | None = None) -> float:
    """The power of ``config``'s running clock at ``clock_mhz`` with its data still."""
    fit = fit or load_energy_fit()
    if fit is None:
        return 0.0
    return fit.clock_pj_per_cycle(config) * 1e-12 * clock_mhz * 1e6


# --- fitting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerRun:
    """One workload-driven power run: the program's events, its cycles and clock, and the
    measured power of the netlist by kind (mW; ``logic`` includes ``clock``, the part drawn
    with the data still)."""

    name: str
    config: AcceleratorConfig
    events: dict[str, float]
    cycles: int
    clock_ns: float
    logic_mw: float
    clock_mw: float
    memory_mw: float
    leakage_mw: float

    @property
    def total_mw(self) -> float:
        return self.logic_mw + self.memory_mw + self.leakage_mw

    @property
    def event_logic_pj(self) -> float:
        """The logic's energy beyond the clock's over the run (mW x ns = pJ)."""
        return (self.logic_mw - self.clock_mw) * self.cycles * self.clock_ns


def _nonnegative_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares, columns scaled so the fit is well conditioned."""
    from sklearn.linear_model import LinearRegression

    scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
    return LinearRegression(positive=True, fit_intercept=False).fit(x / scale, y).coef_ / scale


def fit_energies(runs: list[PowerRun], *, data: str, rtl_commit: str) -> EnergyFit:
    """The logic's energy per event: non-negative least squares of each run's logic energy
    beyond the clock on its `LOGIC_EVENTS`; the clock's energy per cycle: the same on
    `clock_features` of each accelerator's measured clock power."""
    if not runs:
        raise ConfigError("no power runs to fit energies on")
    x = np.array([[float(r.events.get(e, 0.0)) for e in LOGIC_EVENTS] for r in runs])
    logic = _nonnegative_fit(x, np.array([r.event_logic_pj for r in runs]))
    clocks = {json.dumps(r.config.to_dict(), sort_keys=True): r for r in runs}
    features = [clock_features(r.config) for r in clocks.values()]
    names = list(features[0])
    clock = _nonnegative_fit(np.array([[f[n] for n in names] for f in features]),
                             np.array([r.clock_mw * r.clock_ns for r in clocks.values()]))
    return EnergyFit(logic_pj=dict(zip(LOGIC_EVENTS, map(float, logic), strict=True)),
                     clock_pj=dict(zip(names, map(float, clock), strict=True)),
                     clock_ns=runs[0].clock_ns, data=data, rtl_commit=rtl_commit)


def predicted_mw(config: AcceleratorConfig, events: dict[str, float], cycles: float,
                 clock_ns: float, fit: EnergyFit, leakage_mw: float) -> dict[str, float]:
    """The model's on-chip power for a program of ``events`` that takes ``cycles``: its events
    priced, the clock's energy per cycle, and ``leakage_mw`` (the area model's)."""
    split = ihp_energies(config, fit).split_pj(events)
    ns = cycles * clock_ns
    clock = fit.clock_pj_per_cycle(config) / clock_ns
    logic = split["logic"] / ns + clock
    memories = split["memories"] / ns
    return {"logic_mw": logic, "clock_mw": clock, "memory_mw": memories,
            "leakage_mw": leakage_mw, "total_mw": logic + memories + leakage_mw}
