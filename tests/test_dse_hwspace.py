"""The accelerator design space, scenarios and the first-order evaluator against hand counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import (
    TECH_45NM,
    FirstOrderAreaPower,
    HardwareCost,
    LayerMetrics,
    aggregate,
)
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator, tensorize_choices
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.scenarios import SCENARIOS, Scenario, scenario
from tensorforge.errors import ConfigError

GEMM = "C[i,j] += A[i,k] * B[k,j]"
CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"


def test_points_round_trip_through_configs() -> None:
    space = HardwareSpace()
    rng = np.random.default_rng(1)
    for point in space.space.sample(200, rng):  # the space is conditional: every draw builds
        config = space.to_config(point)
        assert HardwareSpace.point_of(config) == point
        assert AcceleratorConfig.from_dict(config.to_dict()) == config


def test_toml_prunes_like_hasco_listing_2(tmp_path) -> None:
    path = tmp_path / "space.toml"
    path.write_text(
        'intrinsic = "gemm"\nrows = 16\ncols = 16\nspad_kib = 256\nbanks = 4\n'
        "local_bytes = {choices = [0, 16]}\nmax_burst = {low = 4, high = 16, power_of_two = true}\n"
    )
    space = HardwareSpace.from_toml(path)
    assert set(space.free_variables()) == {
        "interconnect",
        "dataflow",
        "local_bytes",
        "acc_kib",
        "bus_bits",
        "max_burst",
    }
    for point in space.space.sample(20, np.random.default_rng(0)):
        config = space.to_config(point)
        assert (config.array.rows, config.array.cols, config.scratchpad.banks) == (16, 16, 4)
        assert config.scratchpad.capacity == 256 * 1024
        assert config.dma.max_burst in (4, 8, 16)
    assert space.cardinality == 3 * 3 * 2 * 3 * 3 * 3


def test_space_table_form_is_accepted(tmp_path) -> None:
    path = tmp_path / "space.toml"
    path.write_text("[space]\nrows = 8\ncols = 8\n")
    assert "rows" not in HardwareSpace.from_toml(path).free_variables()


def test_contradictory_point_raises_the_config_error() -> None:
    space = HardwareSpace({"intrinsic": "conv2d", "dataflow": "ws", "local_bytes": 0})
    point = space.space.sample(1, np.random.default_rng(0))[0]
    with pytest.raises(ConfigError, match="local_bytes"):
        space.to_config(point)


def test_empty_and_unknown_spaces_are_clear_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="empty.*rows"):
        HardwareSpace({"rows": {"choices": []}})
    with pytest.raises(ConfigError, match="empty"):
        HardwareSpace({"spad_kib": {"low": 64, "high": 32}})
    with pytest.raises(ConfigError, match="unknown design-space primitives.*known: intrinsic"):
        HardwareSpace({"pe_rows": 8})
    with pytest.raises(ConfigError, match="does not exist"):
        HardwareSpace.from_toml(tmp_path / "missing.toml")


def test_scenarios() -> None:
    assert [str(c) for c in SCENARIOS["edge"].constraints()] == ["power_w <= 2"]
    assert [str(c) for c in SCENARIOS["cloud"].constraints()] == ["power_w <= 20"]
    tighter = scenario("edge").with_bounds(power_w=1.5, latency_ms=10)
    assert [str(c) for c in tighter.constraints()] == ["power_w <= 1.5", "latency_ms <= 10"]
    assert Scenario().constraints() == ()
    with pytest.raises(ConfigError, match="cloud, edge"):
        scenario("datacenter")
    with pytest.raises(ConfigError, match="positive"):
        Scenario(power_w=-1)


def _gemm_config(rows: int = 8, cols: int = 8, **array: object) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict(
        {
            "intrinsic": "gemm",
            "array": {"rows": rows, "cols": cols, **array},
            "scratchpad": {"capacity": "128KiB", "banks": 8, "accumulator": "64KiB"},
        }
    )


def test_exact_fit_gemm_has_full_utilization_and_hand_counted_cycles() -> None:
    config = _gemm_config()
    workload = parse_workload(GEMM, "i=64,j=64,k=64")
    metrics = FirstOrderEvaluator()(workload, config, 0)
    steps = (64 // 8) ** 3  # intrinsic is 8x8x8
    assert metrics.mapping["utilization"] == 1.0
    # each step needs 8 cycles on 64 PEs (512 MACs); the model adds fill and DRAM on top
    assert metrics.cycles >= steps * 8
    assert metrics.cycles <= steps * 8 * 2
    # every input byte crosses DRAM at least once, the output once: 3 * 64*64 int8 bytes
    assert metrics.details["dram_bytes"] >= 3 * 64 * 64
    floor = 64**3 * TECH_45NM.mac_pj(8, 32) + metrics.details["dram_bytes"] * 160.0
    assert floor < metrics.energy_pj < 3 * floor


def test_padding_waste_follows_ceil_division() -> None:
    config = _gemm_config()
    workload = parse_workload(GEMM, "i=9,j=8,k=8")
    metrics = FirstOrderEvaluator()(workload, config, 0)
    assert metrics.mapping["utilization"] == pytest.approx(9 / 16)


def test_conv2d_window_must_map_onto_a_window() -> None:
    config = AcceleratorConfig.from_dict(
        {"intrinsic": "conv2d", "array": {"rows": 8, "cols": 8, "local_bytes": 16}}
    )
    conv = parse_workload(CONV, "k=16,c=16,x=8,y=8,r=3,s=3")
    for choice in tensorize_choices(conv, config):
        if "y" in choice and "s" in choice:
            assert {choice["y"], choice["s"]} in ({"x", "r"}, {"y", "s"})
    gemm = parse_workload(GEMM, "i=16,j=16,k=16")
    assert all(not ({"y", "s"} <= set(c)) for c in tensorize_choices(gemm, config))


def test_more_pes_are_faster_and_bigger_on_a_large_gemm() -> None:
    workload = parse_workload(GEMM, "i=256,j=256,k=256")
    small, large = _gemm_config(8, 8), _gemm_config(32, 32)
    evaluator, hardware = FirstOrderEvaluator(), FirstOrderAreaPower()
    assert evaluator(workload, large, 0).cycles < evaluator(workload, small, 0).cycles
    assert hardware(large).area_mm2 > hardware(small).area_mm2
    assert hardware(large).peak_power_w > hardware(small).peak_power_w


def test_aggregate_sums_layers_times_counts() -> None:
    hardware = HardwareCost(area_mm2=2.0, static_power_w=0.1, clock_mhz=500.0, peak_power_w=5)
    layers = [(LayerMetrics(1000, 2e6), 3), (LayerMetrics(500, 1e6), 2)]
    metrics = aggregate(layers, hardware)
    cycles = 1000 * 3 + 500 * 2
    seconds = cycles / 500e6
    energy_j = (2e6 * 3 + 1e6 * 2) * 1e-12 + 0.1 * seconds
    assert metrics.latency_cycles == cycles
    assert metrics.latency_ms == pytest.approx(seconds * 1e3)
    assert metrics.energy_mj == pytest.approx(energy_j * 1e3)
    assert metrics.power_w == pytest.approx(energy_j / seconds)
    assert metrics.area_mm2 == 2.0
    assert math.isfinite(metrics.power_w)
