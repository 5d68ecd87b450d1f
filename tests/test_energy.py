"""Events priced by a technology (`dse.energy`, `dse.energy_ihp`) and the sweep's energy
(`evaluate.aggregate`) with them, against hand computations."""

from __future__ import annotations

import pytest

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.energy import EVENTS, EventEnergies
from tensorforge.dse.energy_ihp import EnergyFit, ihp_energies, memory_access_pj
from tensorforge.dse.evaluate import HardwareCost, LayerMetrics, aggregate

PRICES = EventEnergies(mac_pj=1.0, spad_read_pj=10.0, spad_write_pj=20.0, acc_read_pj=30.0,
                       acc_write_pj=40.0, forward_pj_per_byte=0.5, dma_beat_pj=2.0,
                       dram_pj_per_byte=100.0, acc_write_logic_pj=4.0)
EVENTS_ONE = {"macs": 1000, "spad_line_reads": 10, "spad_line_writes": 5, "acc_line_reads": 3,
              "acc_line_writes": 2, "forward_bytes": 100, "dma_beats": 7, "dram_bytes": 50}


def test_events_priced_by_kind():
    split = PRICES.split_pj(EVENTS_ONE)
    assert split["logic"] == 1000 + 50 + 14 + 8
    assert split["memories"] == 100 + 100 + 90 + 80
    assert split["dram"] == 5000
    assert PRICES.dynamic_pj(EVENTS_ONE) == sum(split.values())
    assert PRICES.dynamic_pj(EVENTS_ONE, on_chip=True) == split["logic"] + split["memories"]
    assert set(PRICES.per_event()) == set(EVENTS)


def test_aggregate_prices_events_with_the_hardware_and_charges_clock_and_leakage():
    """1e6 cycles at 100 MHz = 10 ms; leakage 1 mW + clock 2 mW over it = 30 uJ."""
    layer = LayerMetrics(cycles=500_000, energy_pj=1e9, details=dict(EVENTS_ONE))
    hardware = HardwareCost(area_mm2=1.0, static_power_w=1e-3, clock_mhz=100.0,
                            peak_power_w=1.0, clock_power_w=2e-3, energies=PRICES)
    metrics = aggregate([(layer, 2)], hardware)
    dynamic_j = 2 * PRICES.dynamic_pj(EVENTS_ONE) * 1e-12
    assert metrics.energy_mj == pytest.approx((dynamic_j + 3e-3 * 0.01) * 1e3)
    # without energies the layer's own figure stands (and no clock power was given)
    plain = aggregate([(layer, 2)], HardwareCost(1.0, 1e-3, 100.0, 1.0))
    assert plain.energy_mj == pytest.approx((2e9 * 1e-12 + 1e-3 * 0.01) * 1e3)


def test_an_evaluator_without_events_keeps_its_own_energy():
    layer = LayerMetrics(cycles=100, energy_pj=123.0, details={"macs": 5.0})
    hardware = HardwareCost(1.0, 0.0, 100.0, 1.0, energies=PRICES)
    assert aggregate([(layer, 1)], hardware).energy_mj == pytest.approx(123.0 * 1e-9)


def test_memory_energies_are_the_macros_of_the_flow():
    """Default 8x8: a scratchpad bank is 2048 lines of 64 bits with one read and one write
    port, built as 2 rows x 2 columns of RM_IHPSG13_2P_1024x32 (read 48.2666 pJ, write
    58.9183 pJ in its Liberty): a line read or written touches the 2 macros of one row."""
    energies = memory_access_pj(AcceleratorConfig())
    assert energies["spad_read"] == pytest.approx(2 * 48.2666)
    assert energies["spad_write"] == pytest.approx(2 * 58.9183)


def test_ihp_energies_take_logic_from_the_fit_and_memories_from_the_macros():
    fit = EnergyFit(logic_pj={"macs": 1.5, "forward_bytes": 0.1, "dma_beats": 3.0,
                              "acc_line_writes": 6.0},
                    clock_pj={"logic_um2": 0.001, "one": 5.0}, clock_ns=10.0,
                    data="random", rtl_commit="test")
    config = AcceleratorConfig()
    energies = ihp_energies(config, fit)
    memory = memory_access_pj(config)
    assert energies.mac_pj == 1.5 and energies.dma_beat_pj == 3.0
    assert energies.acc_write_pj == memory["acc_write"]
    assert energies.acc_write_logic_pj == 6.0
    # the clock grows with the standard-cell area: the area model's, less the macros'
    from tensorforge.dse.area_power import SynthesisAreaPower
    from tensorforge.dse.memory_shapes import memory_cost

    logic = SynthesisAreaPower()(config).area_mm2 * 1e6 - memory_cost(config).macro_area_um2
    assert fit.clock_pj_per_cycle(config) == pytest.approx(0.001 * logic + 5.0)


class _PricedModel:
    """A hardware model at 200 MHz with fixed energies, 1 mW leakage and 4 mW of clock."""

    version = "priced-test"

    def __call__(self, config):
        return HardwareCost(area_mm2=1.0, static_power_w=1e-3, clock_mhz=200.0,
                            peak_power_w=1.0, clock_power_w=4e-3, energies=PRICES)


def test_program_power_prices_the_programs_events_over_the_models_time():
    """At 10 ns (100 MHz, half the model's clock) the clock draws 2 mW; the events' energy is
    spread over the cycle model's cycles at that period."""
    from tensorforge.api import resolve_mapping
    from tensorforge.compiler.workload import parse_workload
    from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
    from tensorforge.dse.model_power import program_power
    from tensorforge.memory import DEFAULT_MEMORY

    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16")
    config = AcceleratorConfig.from_dict({"array": {"rows": 4, "cols": 4}})
    mapping = resolve_mapping(workload, config)
    result = program_power(workload, mapping, config, clock_ns=10.0,
                           hardware_model=_PricedModel())
    row = evaluate_mapping(workload, mapping, config, rtl_parameters(DEFAULT_MEMORY, config))
    span_ns = (row["cycles"] - row["host_cycles"]) * 10.0
    split = PRICES.split_pj({k: row[k] for k in EVENTS})
    power = result["power_mw"]
    assert power["clock_mw"] == pytest.approx(2.0)
    assert power["logic_mw"] == pytest.approx(split["logic"] / span_ns + 2.0)
    assert power["memory_mw"] == pytest.approx(split["memories"] / span_ns)
    assert power["total_mw"] == pytest.approx(power["logic_mw"] + power["memory_mw"] + 1.0)
    assert result["energy_uj"] == pytest.approx(power["total_mw"] * span_ns * 1e-6)
    assert result["dram_energy_uj"] == pytest.approx(split["dram"] * 1e-6)
    assert row["macs"] == workload.macs  # 16^3 fills the 4x4 array's blocks exactly


def test_an_energy_fit_of_other_rtl_is_stale():
    from tensorforge.sim.rtl_run import hardware_digest

    fit = EnergyFit(logic_pj={}, clock_pj={}, clock_ns=10.0, data="random", rtl_commit="x",
                    hardware_digest=hardware_digest())
    assert fit.stale_reasons() == []
    changed = EnergyFit(**{**fit.to_dict(), "hardware_digest": "0" * 16})
    assert changed.stale_reasons() == ["the RTL changed since the energy runs"]
