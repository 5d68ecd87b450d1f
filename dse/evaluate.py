"""How one hardware trial is measured: the pluggable per-layer evaluator and the hardware model.

The co-design loop needs two functions, and both are protocols so better ones can replace the
first-order versions here without touching the loop:

* a `LayerEvaluator` ``(workload, config, seed) -> LayerMetrics``: cycles and dynamic energy of
  one layer on one accelerator, with the mapping (software schedule) it chose. The analytical
  cost model and HASCO's software search (heuristic + Q-learning) plug in here;
  `tensorforge.dse.evaluate_first_order.FirstOrderEvaluator` is the default until then.
* an `AreaPowerModel` ``config -> HardwareCost``: area, static power, clock and peak power of the
  accelerator itself. `FirstOrderAreaPower` below is the default; synthesis-calibrated models
  replace it.

`aggregate` turns the layers of a workload (each with its repeat count) into one `Metrics`:
latency and energy are sums over layers times counts, power is energy over time plus the static
power, area is the hardware's.

Both protocols carry a ``version`` string: it is part of a sweep's identity, so a stored sweep
is never resumed with a different model than the one that produced its trials.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig, Interconnect
from tensorforge.dse.energy import EventEnergies, missing_events
from tensorforge.hashing import stable_hash
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LayerMetrics:
    """One layer on one accelerator: cycles, dynamic energy (pJ) and the chosen mapping.

    ``mapping`` is a JSON-able description of the schedule (tensorize choice, tile sizes, ...)
    for the report; ``details`` holds any further numbers an evaluator wants to keep.
    ``search_history`` is a software search's convergence, ``[evaluations, cycles, energy_pj]``
    at each new best (empty for an evaluator without a search): search methods that judge a
    design by how its mapping search went (UNICO) read it from the stored trial.
    """

    cycles: int
    energy_pj: float
    mapping: dict[str, Any] = field(default_factory=dict)
    details: dict[str, float] = field(default_factory=dict)
    search_history: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LayerMetrics:
        return cls(
            int(data["cycles"]),
            float(data["energy_pj"]),
            dict(data.get("mapping", {})),
            dict(data.get("details", {})),
            [list(row) for row in data.get("search_history", [])],
        )


@runtime_checkable
class LayerEvaluator(Protocol):
    """``(workload, config, seed) -> LayerMetrics``; must be picklable (worker processes)."""

    version: str

    def __call__(
        self, workload: Workload, config: AcceleratorConfig, seed: int
    ) -> LayerMetrics: ...


@dataclass(frozen=True)
class HardwareCost:
    """What the accelerator costs regardless of the workload.

    ``energies`` prices the events a layer evaluator counts in its technology
    (`tensorforge.dse.energy`); a model without them (the first-order one) leaves each layer's
    own ``energy_pj`` as the dynamic energy. ``clock_power_w`` is drawn while the clock runs
    with the data still (clock tree and flip-flop clock pins), like leakage for the whole run.
    """

    area_mm2: float
    static_power_w: float  # leakage, paid for the whole run time
    clock_mhz: float
    peak_power_w: float  # every PE and buffer busy every cycle: a bound, for reference points
    clock_power_w: float = 0.0
    energies: EventEnergies | None = None


@runtime_checkable
class AreaPowerModel(Protocol):
    """``config -> HardwareCost``; must be picklable."""

    version: str

    def __call__(self, config: AcceleratorConfig) -> HardwareCost: ...


@dataclass(frozen=True)
class Metrics:
    """One hardware trial over a whole workload; the objectives and constraints read these."""

    latency_cycles: int
    latency_ms: float
    energy_mj: float
    power_w: float
    area_mm2: float
    clock_mhz: float
    static_power_w: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def layer_energy_pj(layer: LayerMetrics, hardware: HardwareCost) -> float:
    """The layer's dynamic energy: its events priced by the hardware's technology where the
    hardware model has energies and the evaluator counted them, else the evaluator's own."""
    if hardware.energies is None or missing_events(layer.details):
        return layer.energy_pj
    return hardware.energies.dynamic_pj(layer.details)


def aggregate(layers: Sequence[tuple[LayerMetrics, int]], hardware: HardwareCost) -> Metrics:
    """Whole-workload metrics from ``(layer metrics, repeat count)`` pairs."""
    cycles = sum(layer.cycles * count for layer, count in layers)
    dynamic_pj = sum(layer_energy_pj(layer, hardware) * count for layer, count in layers)
    seconds = cycles / (hardware.clock_mhz * 1e6)
    static_j = (hardware.static_power_w + hardware.clock_power_w) * seconds
    energy_j = dynamic_pj * 1e-12 + static_j
    power_w = energy_j / seconds if seconds > 0 else hardware.static_power_w
    return Metrics(
        latency_cycles=int(cycles),
        latency_ms=seconds * 1e3,
        energy_mj=energy_j * 1e3,
        power_w=power_w,
        area_mm2=hardware.area_mm2,
        clock_mhz=hardware.clock_mhz,
        static_power_w=hardware.static_power_w,
    )


# --- the first-order technology model -----------------------------------------------------


@dataclass(frozen=True)
class Technology:
    """Per-operation energy (pJ) and per-unit area (um^2) of a 45 nm process.

    Energies and arithmetic areas are M. Horowitz, "Computing's energy problem (and what we can
    do about it)", ISSCC 2014, table of 45 nm, 0.9 V figures: 8-bit multiply 0.2 pJ / 282 um^2,
    32-bit add 0.1 pJ / 137 um^2, SRAM read of 64 bits 10 pJ (8 KB) to 100 pJ (1 MB), i.e.
    about 1.25 pJ/byte at 8 KiB growing with the square root of the array size, DRAM 1.3-2.6 nJ
    per 64-bit access (we take 160 pJ/byte, the low end, for an LPDDR-class part).
    The SRAM density (0.6 um^2/bit with periphery, 6T cell ~0.35 um^2 at 45 nm) and flip-flop
    area (~6 um^2/bit) are typical 45 nm library figures; leakage as a fixed share of area
    (20 mW/mm^2) and the clock penalties of broadcast and crossbar wiring are this model's
    assumptions, not measurements. Everything here is first order, to be replaced by the
    synthesis-calibrated cost model behind the same protocols.
    """

    mult8_pj: float = 0.2
    add32_pj: float = 0.1
    mult8_um2: float = 282.0
    add32_um2: float = 137.0
    flop_um2_per_bit: float = 6.0
    sram_pj_per_byte_8kib: float = 1.25
    sram_um2_per_bit: float = 0.6
    bank_overhead_um2: float = 10_000.0  # decoder, sense amplifiers, port logic per bank
    register_pj_per_byte: float = 0.03  # one pipeline-register hop of one byte
    dram_pj_per_byte: float = 160.0
    leakage_w_per_mm2: float = 0.02
    base_clock_mhz: float = 800.0
    dma_um2_per_bus_bit: float = 150.0
    control_um2: float = 50_000.0

    def mac_pj(self, in_bits: int, acc_bits: int) -> float:
        """Multiply (scaled with the square of the operand width) plus the accumulation add."""
        return self.mult8_pj * (in_bits / 8) ** 2 + self.add32_pj * acc_bits / 32

    def sram_pj_per_byte(self, array_bytes: float) -> float:
        """Read/write energy per byte of an SRAM array of ``array_bytes`` (square-root law)."""
        return self.sram_pj_per_byte_8kib * math.sqrt(max(array_bytes, 1024.0) / 8192.0)

    def movement_pj_per_byte(self, interconnect: Interconnect, pes: int) -> float:
        """Energy to move one operand byte to its PE through the interconnect."""
        match interconnect:
            case Interconnect.SYSTOLIC:
                return self.register_pj_per_byte  # one neighbour hop
            case Interconnect.NONE:
                return self.register_pj_per_byte * math.sqrt(pes)  # a wire across the array
            case Interconnect.FULL:
                return self.register_pj_per_byte * (1 + math.log2(pes))  # crossbar stages
        raise ValueError(f"unknown interconnect {interconnect!r}")


TECH_45NM = Technology()


@dataclass(frozen=True)
class FirstOrderAreaPower:
    """Area, leakage, clock and peak power summed from per-PE and per-KiB constants.

    See `Technology` for where the constants come from. The clock starts at the base frequency
    of a pipelined int8 MAC; a broadcast (``none``) array pays a buffer-tree delay growing with
    log2 of its PE count, a crossbar (``full``) one twice that, a systolic array none.
    """

    technology: Technology = TECH_45NM
    version: str = "first-order-area-power-1"

    def __call__(self, config: AcceleratorConfig) -> HardwareCost:
        tech, array = self.technology, config.array
        pes = array.pes
        in_bits, acc_bits = config.precision.in_bits, config.precision.acc_bits
        pe_um2 = tech.mult8_um2 * (in_bits / 8) ** 2 + tech.add32_um2 * acc_bits / 32
        pe_um2 += tech.flop_um2_per_bit * _pe_register_bits(array.interconnect, in_bits, acc_bits)
        pe_um2 += tech.flop_um2_per_bit * 8 * array.local_bytes  # local memory as a register file
        crossbar_um2 = 0.0
        if array.interconnect is Interconnect.FULL:
            crossbar_um2 = pes * math.log2(max(pes, 2)) * in_bits * tech.flop_um2_per_bit
        sram_bytes = config.scratchpad.capacity + config.scratchpad.accumulator
        sram_um2 = sram_bytes * 8 * tech.sram_um2_per_bit
        sram_um2 += tech.bank_overhead_um2 * (config.scratchpad.banks + 1)
        dma_um2 = tech.dma_um2_per_bus_bit * config.dma.bus_bits + 20.0 * config.dma.max_burst
        area_mm2 = (pes * pe_um2 + crossbar_um2 + sram_um2 + dma_um2 + tech.control_um2) * 1e-6
        static_w = tech.leakage_w_per_mm2 * area_mm2
        clock_mhz = tech.base_clock_mhz / (1 + _wire_delay_share(array.interconnect, pes))
        per_cycle_pj = pes * (
            tech.mac_pj(in_bits, acc_bits)
            + 2 * (in_bits / 8) * tech.movement_pj_per_byte(array.interconnect, pes)
        )
        bank_bytes = config.scratchpad.capacity / config.scratchpad.banks
        per_cycle_pj += (
            config.scratchpad.banks * config.spad_line_bytes * tech.sram_pj_per_byte(bank_bytes)
        )
        per_cycle_pj += config.dma.bus_bytes * tech.dram_pj_per_byte
        peak_w = per_cycle_pj * 1e-12 * clock_mhz * 1e6 + static_w
        return HardwareCost(area_mm2, static_w, clock_mhz, peak_w)


def _pe_register_bits(interconnect: Interconnect, in_bits: int, acc_bits: int) -> int:
    """Pipeline registers per PE: a systolic PE forwards both operands and its partial sum."""
    if interconnect is Interconnect.SYSTOLIC:
        return 2 * in_bits + acc_bits
    return in_bits + acc_bits  # operand latch and accumulator


def _wire_delay_share(interconnect: Interconnect, pes: int) -> float:
    """Extra clock period, as a share of the base period, spent on long wires."""
    levels = math.log2(max(pes, 2))
    if interconnect is Interconnect.NONE:
        return 0.04 * levels
    if interconnect is Interconnect.FULL:
        return 0.08 * levels
    return 0.0


def run_layer_job(
    evaluator: LayerEvaluator, workload: Workload, config: AcceleratorConfig, seed: int
) -> tuple[str, dict[str, Any] | str]:
    """One layer evaluation as a worker runs it: ``("ok", metrics dict)`` or ``("error", msg)``.

    An exception becomes data rather than propagating, so one bad layer fails its trial and
    the sweep carries on. It lives here, not in the co-design module, so a spawned worker
    imports only the light evaluation modules (no torch/botorch).
    """
    key = _layer_key(evaluator, workload, config, seed)
    if key is not None:
        stored = ResultStore().get(LAYER_KIND, key)
        if stored is not None:
            return "ok", stored.payload
    try:
        metrics = evaluator(workload, config, seed)
        if not isinstance(metrics, LayerMetrics):
            raise TypeError(f"the evaluator returned {type(metrics).__name__}, not LayerMetrics")
        if not (metrics.cycles > 0 and math.isfinite(metrics.energy_pj) and metrics.energy_pj >= 0):
            raise ValueError(
                f"the evaluator reported {metrics.cycles} cycles and {metrics.energy_pj} pJ; "
                "cycles must be positive and energy finite"
            )
    except Exception as error:  # noqa: BLE001 -- any evaluator failure is recorded the same way
        return "error", f"{type(error).__name__}: {error}"
    if key is not None:
        try:
            ResultStore().put(LAYER_KIND, key, metrics.to_dict(), inputs={
                "evaluator": evaluator.version, "workload": workload.text,
                "sizes": workload.sizes_text, "config": config.to_dict(), "seed": seed})
        except (OSError, sqlite3.Error) as error:  # the result stands; only its reuse is lost
            logger.warning("could not store a layer evaluation: %s", error)
    return "ok", metrics.to_dict()


#: The result store's table of layer evaluations by a `cacheable` evaluator.
LAYER_KIND = "layer_eval"


def _layer_key(evaluator: LayerEvaluator, workload: Workload, config: AcceleratorConfig,
               seed: int) -> str | None:
    """The store key of one layer evaluation, or None for an evaluator that does not declare
    its results a function of its ``version`` (``cacheable``): a software search on a large
    layer takes seconds to minutes, and sweeps under another hardware model, other
    constraints or another search method ask for the same layers on the same designs."""
    if not getattr(evaluator, "cacheable", False):
        return None
    return stable_hash(evaluator.version, workload.text, workload.sizes_text,
                       config.to_json(), seed)
