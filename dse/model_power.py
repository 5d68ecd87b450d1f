"""What the cost model says one program draws: the figure `tensorforge simulate --power` puts
beside the power it measures on the netlist, and that a sweep's energy is made of.

The program's events (`program_events`) are priced by the hardware model's technology
(`HardwareCost.energies`), over the cycle model's time for the program on the device
(`evaluate_mapping`, without the host's re-layout of its inputs, which the RTL does not run),
plus the clock's energy per cycle and the leakage. The clock may differ from the hardware
model's own: the clock's power scales with the frequency, an event's energy does not.
"""

from __future__ import annotations

from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.energy import EVENTS
from tensorforge.dse.evaluate import AreaPowerModel
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem


def program_power(workload, mapping, config: AcceleratorConfig, *,
                  memory: MemorySystem = DEFAULT_MEMORY, clock_ns: float | None = None,
                  hardware_model: AreaPowerModel | None = None) -> dict[str, Any] | None:
    """The model's on-chip power (mW) and energy (uJ) of ``mapping``'s program at ``clock_ns``
    (None: the hardware model's clock), split as the measurement is; DRAM energy apart.
    None where the hardware model prices no events (the first-order one)."""
    from tensorforge.dse.codesign import _default_hardware_model
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters

    hardware_model = hardware_model or _default_hardware_model()
    hardware = hardware_model(config)
    if hardware.energies is None:
        return None
    row = evaluate_mapping(workload, mapping, config, rtl_parameters(memory, config))
    if not row["legal"]:
        return None
    period_ns = clock_ns if clock_ns is not None else 1e3 / hardware.clock_mhz
    device_cycles = row["cycles"] - row["host_cycles"]  # the run itself, as the RTL's
    span_ns = device_cycles * period_ns
    split = hardware.energies.split_pj({name: row[name] for name in EVENTS})
    clock_mw = hardware.clock_power_w * 1e3 * (1e3 / period_ns) / hardware.clock_mhz
    leakage_mw = hardware.static_power_w * 1e3
    power = {
        "logic_mw": split["logic"] / span_ns + clock_mw,
        "clock_mw": clock_mw,
        "memory_mw": split["memories"] / span_ns,
        "leakage_mw": leakage_mw,
    }
    power["total_mw"] = power["logic_mw"] + power["memory_mw"] + leakage_mw
    return {
        "model": getattr(hardware_model, "version", type(hardware_model).__name__),
        "technology": getattr(hardware_model, "tech", None),
        "clock_ns": period_ns,
        "cycles": device_cycles,
        "power_mw": power,
        "energy_uj": power["total_mw"] * span_ns * 1e-6,
        "dram_energy_uj": split["dram"] * 1e-6,
    }
