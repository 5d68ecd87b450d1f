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
                    clock_pj={"pes": 0.2, "line_bits": 0.01, "one": 5.0}, clock_ns=10.0,
                    data="random", rtl_commit="test")
    config = AcceleratorConfig()
    energies = ihp_energies(config, fit)
    memory = memory_access_pj(config)
    assert energies.mac_pj == 1.5 and energies.dma_beat_pj == 3.0
    assert energies.acc_write_pj == memory["acc_write"]
    assert energies.acc_write_logic_pj == 6.0
    # 64 PEs, 4 banks x 64-bit lines + one 256-bit accumulator line
    assert fit.clock_pj_per_cycle(config) == pytest.approx(0.2 * 64 + 0.01 * (256 + 256) + 5.0)
