"""Workload-driven power: what a design draws while it runs one program, from its registers.

`measure_power` runs a workload on the RTL with register activity on
(`tensorforge.sim.register_activity`: every flip-flop bit's toggles and every memory port's
accesses over the program's run), maps the registers onto the flip-flops of the synthesized
netlist by name (Yosys keeps the RTL path of a register on the net its flip-flop drives),
and has OpenSTA price the netlist with those rates (`tensorforge.fpga.netlist_power`).
Flip-flops no register maps to (Yosys' own, e.g. from retimed or merged logic) get the mean
rate of the matched ones, and the result says how many there were.

The power is split so that the parts add up to the total:

- ``logic_mw``: the standard cells' dynamic power (flip-flops with their clock pins,
  combinational logic, the nets they drive), OpenSTA's internal + switching power.
  ``clock_mw`` is the part of it a design draws with no data moving: the same netlist with
  every flip-flop and input quiet (the flip-flops' clock pins toggle all the same).
- ``memory_mw``: the SRAM macros' access power, from the run's counted accesses and the
  macros' read and write energies (a line access touches ``cols`` macros of one row; a write
  goes to every copy, a read to one). OpenSTA 2.0.17 files the macros with the standard
  cells, so the switching of their output nets is in ``logic_mw``.
- ``leakage_mw``: all leakage, OpenSTA's, the macros' included (from their Liberty files);
  ``memory_leakage_mw`` is the macros' part (of it, not beside it).

Energy of the run is each part x cycles x clock period. `measure_idle_power` does the same for
a design that is reset and clocked with no program: about ``leakage_mw + clock_mw``.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingType
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.fpga.technology import DEFAULT_TECH
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.sim.register_activity import RegisterActivity, group_by_scope

DATA_KINDS = ("random", "zeros")
_DIGITS = 4  # rates are rounded so equal runs share one OpenSTA result


@dataclass(frozen=True)
class PowerMeasurement:
    """The power of one run split into parts that add up (module docstring), its energy, and
    the run's raw activity.

    ``flop_toggles`` and ``flop_power_mw`` are per matched flip-flop, by the RTL name of the
    bit it holds (``compute.array.pe_0_0.acc[3]``); ``activity.accesses`` per memory (its
    Yosys name), ``memory_energy_pj`` per macro-mapped memory. ``match`` and ``counters``
    (the accelerator's performance counters) come from the program's run (None and {} for an
    idle one).
    """

    technology: str
    clock_ns: float
    cycles: int
    logic_mw: float
    clock_mw: float
    memory_mw: float
    leakage_mw: float
    memory_leakage_mw: float
    area_um2: float
    flops_annotated: int
    flops_total: int
    mean_flop_rate: float
    memory_energy_pj: dict[str, float]
    flop_toggles: dict[str, int] = field(repr=False)
    flop_power_mw: dict[str, float] = field(repr=False)
    activity: RegisterActivity = field(repr=False)
    match: bool | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def total_mw(self) -> float:
        return self.logic_mw + self.memory_mw + self.leakage_mw

    def energy_uj(self) -> dict[str, float]:
        """Energy of the run by part (mW x ns = 1e-12 J = 1e-6 uJ)."""
        scale = self.cycles * self.clock_ns * 1e-6
        return {"logic": self.logic_mw * scale, "clock": self.clock_mw * scale,
                "memory": self.memory_mw * scale, "leakage": self.leakage_mw * scale,
                "total": self.total_mw * scale}

    def component_toggles(self, depth: int = 2) -> dict[str, int]:
        """Flip-flop toggles summed per instance path cut to ``depth`` levels
        (`group_by_scope`: ``compute.array``, ``scratchpad``, ``(top)``; depth 3 splits the
        array into its PEs)."""
        return self.activity.by_scope(self.flop_toggles, depth)

    def component_flop_power_mw(self, depth: int = 2) -> dict[str, float]:
        """Flip-flop power (internal + switching of their outputs + leakage) per instance
        path cut to ``depth`` levels; the logic between flip-flops has no RTL names."""
        return group_by_scope(self.flop_power_mw, self.activity.scopes, depth)

    def to_dict(self) -> dict[str, Any]:
        return {
            "technology": self.technology,
            "clock_ns": self.clock_ns,
            "cycles": self.cycles,
            "logic_mw": self.logic_mw,
            "clock_mw": self.clock_mw,
            "memory_mw": self.memory_mw,
            "leakage_mw": self.leakage_mw,
            "memory_leakage_mw": self.memory_leakage_mw,
            "total_mw": self.total_mw,
            "energy_uj": self.energy_uj(),
            "area_um2": self.area_um2,
            "flops_annotated": self.flops_annotated,
            "flops_total": self.flops_total,
            "mean_flop_rate": self.mean_flop_rate,
            "memory_accesses": {k: v.to_dict() for k, v in self.activity.accesses.items()},
            "memory_energy_pj": self.memory_energy_pj,
            "component_toggles": self.component_toggles(),
        }


def input_rates(activity: RegisterActivity, ports: MappingType[str, int]) -> dict[str, float]:
    """Transitions per bit per cycle of each input port (``ports``: name -> width)."""
    rates = {}
    for name, width in ports.items():
        bits = [name] if width == 1 else [f"{name}[{bit}]" for bit in range(width)]
        total = sum(activity.toggles.get(bit, 0) for bit in bits)
        rates[name] = round(total / (max(1, activity.cycles) * width), _DIGITS)
    return rates


def memory_energy_pj(macros, activity: RegisterActivity) -> dict[str, float]:
    """Access energy of each macro-mapped memory over the run (see the module docstring).

    A technology whose macro is one block per memory (OSU's analytical one) has no ``cols``
    or ``copies``: one access is one block's."""
    energy = {}
    for macro in macros:
        counted = activity.accesses.get(macro["instance"])
        reads = sum(counted.reads) if counted else 0
        writes = sum(counted.writes) if counted else 0
        energy[macro["instance"]] = macro.get("cols", 1) * (
            writes * macro.get("copies", 1) * macro["write_pj"] + reads * macro["read_pj"])
    return energy


def annotate_flops(flops, activity: RegisterActivity
                   ) -> tuple[dict[str, float], dict[str, str], float]:
    """Each flip-flop's rate (transitions per cycle, by instance), the matched ones (instance
    -> the RTL bit it holds), and the mean rate the unmatched ones were given."""
    cycles = max(1, activity.cycles)
    matched = {flop.instance: flop.output_net for flop in flops
               if flop.output_net in activity.toggles}
    rates = {instance: activity.toggles[net] / cycles for instance, net in matched.items()}
    mean = sum(rates.values()) / len(rates) if rates else 0.0
    return ({flop.instance: round(rates.get(flop.instance, mean), _DIGITS) for flop in flops},
            matched, mean)


def power_of_activity(config: AcceleratorConfig, activity: RegisterActivity, *,
                      clock_ns: float = 10.0, tech: str = DEFAULT_TECH,
                      match: bool | None = None,
                      counters: MappingType[str, int] | None = None,
                      timeout_s: float = 1800.0) -> PowerMeasurement:
    """Price one run's `RegisterActivity` on the synthesized ``Accelerator(config)``;
    ``timeout_s`` bounds each synthesis and OpenSTA run."""
    from tensorforge.fpga.netlist_power import annotated_power, mapped_netlist
    from tensorforge.hw.accelerator import TOP_NAME
    from tensorforge.sim.activity import input_ports
    from tensorforge.sim.rtl_run import accelerator_verilog

    verilog = accelerator_verilog(config)
    # the netlist of the Verilog `generate` writes (no zero-filling `initial` blocks): the
    # one a user synthesizes, and `synth` of it leaves this netlist in the cache
    netlist = mapped_netlist(accelerator_verilog(config, zero_init=False), TOP_NAME, tech=tech,
                             clock_ns=clock_ns, timeout_s=timeout_s)
    cycles = max(1, activity.cycles)
    flop_rates, matched, mean = annotate_flops(netlist.flops, activity)
    ports = input_rates(activity, input_ports(verilog, TOP_NAME))
    power = annotated_power(netlist, flop_rates, ports, timeout_s=timeout_s)
    quiet = annotated_power(netlist, {}, {}, timeout_s=timeout_s)

    def dynamic(groups) -> float:
        return groups["Total"].internal + groups["Total"].switching

    energy = memory_energy_pj(netlist.macros, activity)
    names = {flop.instance: flop.output_net for flop in netlist.flops}
    return PowerMeasurement(
        technology=netlist.tech,
        clock_ns=clock_ns,
        cycles=activity.cycles,
        logic_mw=dynamic(power.groups),
        clock_mw=dynamic(quiet.groups),
        memory_mw=sum(energy.values()) / (cycles * clock_ns),
        leakage_mw=power.groups["Total"].leakage,
        memory_leakage_mw=sum(macro["leakage_mw"] for macro in netlist.macros),
        area_um2=netlist.area_um2,
        flops_annotated=len(matched),
        flops_total=len(netlist.flops),
        mean_flop_rate=mean,
        memory_energy_pj=energy,
        flop_toggles={net: activity.toggles[net] for net in matched.values()},
        flop_power_mw={names[instance]: total
                       for instance, total in power.flops.items() if instance in names},
        activity=activity,
        match=match,
        counters=dict(counters or {}),
    )


def operands(workload: Workload, data: str, seed: int) -> dict[str, np.ndarray]:
    """The workload's inputs: seeded random ones, or all zeros (a real run that moves none)."""
    if data not in DATA_KINDS:
        raise ConfigError(f"data must be one of {', '.join(DATA_KINDS)}, not {data!r}")
    if data == "random":
        return workload.random_inputs(np.random.default_rng(seed))
    return {name: np.zeros(workload.shapes[name], dtype=np.int64)
            for name in workload.input_names}


def measure_power(
    workload: Workload,
    config: AcceleratorConfig,
    mapping: Mapping | None = None,
    *,
    memory: MemorySystem = DEFAULT_MEMORY,
    seed: int = 0,
    clock_ns: float = 10.0,
    tech: str = DEFAULT_TECH,
    data: str = "random",
    inputs: MappingType[str, np.ndarray] | None = None,
) -> PowerMeasurement:
    """Run ``workload`` on the RTL of ``config`` (``mapping`` None: the default) with register
    activity and price it: power split, energy, and the raw activity (module docstring).

    ``data`` is ``"random"`` (seeded by ``seed``) or ``"zeros"``; ``inputs`` replaces both.
    ``match`` on the result says whether the run's output equalled numpy's.
    """
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    values = dict(inputs) if inputs is not None else operands(workload, data, seed)
    result, = run_programs_on_rtl(
        config, [RtlCase(workload, mapping, values, seed)],
        RunOptions(memory=memory, register_activity=True, seed=seed))
    return power_of_activity(config, result.register_activity, clock_ns=clock_ns, tech=tech,
                             match=result.match, counters=result.counters)


def measure_runs(
    config: AcceleratorConfig,
    cases,
    *,
    memory: MemorySystem = DEFAULT_MEMORY,
    clock_ns: float = 10.0,
    tech: str = DEFAULT_TECH,
    seed: int = 0,
) -> list[PowerMeasurement]:
    """`measure_power` for several programs on one design, in one simulator process (for
    fitting per-event energies on many runs: starting the simulator costs more than a small
    program). ``cases`` are `tensorforge.sim.rtl_run.RtlCase` s (their own inputs or seeds)."""
    from tensorforge.sim.rtl_run import RunOptions, run_programs_on_rtl

    results = run_programs_on_rtl(
        config, list(cases), RunOptions(memory=memory, register_activity=True, seed=seed))
    return [power_of_activity(config, result.register_activity, clock_ns=clock_ns, tech=tech,
                              match=result.match, counters=result.counters)
            for result in results]


def measure_idle_power(config: AcceleratorConfig, cycles: int = 1000, *,
                       clock_ns: float = 10.0, tech: str = DEFAULT_TECH) -> PowerMeasurement:
    """The power of ``Accelerator(config)`` reset and clocked for ``cycles`` with no program."""
    from tensorforge.sim.rtl_run import run_idle_on_rtl

    return power_of_activity(config, run_idle_on_rtl(config, cycles), clock_ns=clock_ns,
                             tech=tech)
