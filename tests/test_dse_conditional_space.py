"""The conditional hardware space: nothing any optimizer proposes fails `AcceleratorConfig`."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dse_optimizers import FAST_OPTIONS, one_thread  # noqa: F401 (one_thread: a fixture)

from tensorforge.config import DATAFLOWS, MAX_ACC_LINES, MAX_SPAD_LINES, Dataflow
from tensorforge.dse.hwspace import DEFAULT_SPACE, HardwareSpace
from tensorforge.dse.optimizers import OPTIMIZERS, make_optimizer
from tensorforge.dse.problem import Problem
from tensorforge.errors import ConfigError
from tensorforge.intrinsics import Intrinsic

#: The optimizer tests' small pools (a run is seconds); poros draws batches of 8.
FAST_OPTIONS = {**FAST_OPTIONS, "poros": {"batch": 8}}


def builds(space: HardwareSpace, point: dict) -> bool:
    try:
        space.to_config(point)
    except ConfigError:
        return False
    return True


def toy_objectives(space: HardwareSpace, points: list[dict]) -> np.ndarray:
    """Latency falls and area grows with the PEs and buffers: enough to steer the learners."""
    rows = []
    for point in points:
        config = space.to_config(point)
        memory = config.scratchpad.capacity + config.scratchpad.accumulator
        rows.append([1e6 / config.array.pes + 1e5 / config.dma.bus_bits,
                     config.array.pes + memory / 4096])
    return np.array(rows, dtype=float)


def test_the_default_space_searches_the_new_primitives():
    space = HardwareSpace()
    free = set(space.free_variables())
    assert {"acc_kib", "bus_bits", "intrinsic", "dataflow"} <= free
    values = {v.name: set(v.values) for v in space.space.variables}
    assert values["intrinsic"] == set(Intrinsic)
    assert values["dataflow"] == set(Dataflow)


@pytest.mark.parametrize("method", sorted(OPTIMIZERS))
def test_every_point_every_optimizer_asks_for_builds(method):
    space = HardwareSpace()
    problem = Problem(space.space, ("latency", "area"), reference_point=(1e6, 1e4))
    optimizer = make_optimizer(method, problem, seed=3, **FAST_OPTIONS.get(method, {}))
    asked = 0
    for _ in range(4):
        points = optimizer.ask(4)
        assert points
        hardware = [{k: v for k, v in p.items() if k in space.spec} for p in points]
        assert all(builds(space, p) for p in hardware), hardware
        optimizer.tell(points, toy_objectives(space, hardware))
        asked += len(points)
    assert asked == 16


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_repair_mends_any_grid_point_and_keeps_valid_ones(data):
    space = HardwareSpace()
    genome = np.array([[data.draw(st.integers(0, int(size) - 1)) for size in space.space.sizes]])
    repaired = space.space.repair(genome)
    point, = space.space.decode(repaired)
    config = space.to_config(point)  # raises if the repair left it unbuildable
    assert config.array.dataflow in DATAFLOWS[config.intrinsic]
    assert config.spad_lines <= MAX_SPAD_LINES and config.acc_lines <= MAX_ACC_LINES
    original, = space.space.decode(genome)
    if builds(space, original):
        np.testing.assert_array_equal(repaired, genome)
    np.testing.assert_array_equal(space.space.repair(repaired), repaired)  # idempotent


def test_repair_changes_only_what_it_must():
    """A 512 KiB scratchpad on 8x8 GEMM (65,536 lines of 8 B) drops to the 128 KiB the ISA
    addresses (16,384 lines); input-stationary on 8x32 becomes square; DOT's dataflow is os."""
    space = HardwareSpace()
    base = {name: space.space.variables[i].values[0] for i, name in enumerate(space.spec)}
    base |= {"intrinsic": "gemm", "rows": 8, "cols": 8, "dataflow": "ws", "spad_kib": 512,
             "acc_kib": 32, "banks": 4}
    repair = space.space._repair
    assert repair.repair_point(base) == base | {"spad_kib": 128}
    wide = base | {"spad_kib": 64, "cols": 32, "dataflow": "is"}
    assert repair.repair_point(wide) == wide | {"cols": 8}
    dot = base | {"spad_kib": 64, "intrinsic": "dot", "dataflow": "is"}
    assert repair.repair_point(dot) == dot | {"dataflow": "os"}


def test_an_unmendable_pruned_space_is_left_alone_and_the_space_pickles():
    """Input-stationary fixed, rows and cols fixed apart: nothing may change, so the point is
    returned as drawn and fails in to_config as before."""
    space = HardwareSpace({"intrinsic": "gemm", "dataflow": "is", "rows": 8, "cols": 16})
    point, = space.space.sample(1, np.random.default_rng(0))
    assert point["dataflow"] == "is" and not builds(space, point)
    clone = pickle.loads(pickle.dumps(space))
    assert clone.space.repair(space.space.encode([point])).tolist() == space.space.encode(
        [point]).tolist()


def test_small_enumerated_spaces_sample_only_valid_points():
    space = HardwareSpace({"intrinsic": {"choices": ["gemm", "dot"]}, "rows": 8,
                           "cols": {"choices": [8, 16]}, "dataflow": {"choices": ["ws", "is"]},
                           "interconnect": "systolic", "local_bytes": 0, "banks": 4,
                           "acc_kib": 32, "bus_bits": 64, "max_burst": 16,
                           "spad_kib": {"choices": [64, 512]}})
    drawn = space.space.decode(space.space.sample_unseen(100, np.random.default_rng(0), set()))
    assert all(builds(space, p) for p in drawn)
    # gemm ws/is on 8x8, ws on 8x16 (is needs a square array); dot: no ws or is schedule;
    # 512 KiB is more lines than the ISA addresses for an 8-wide GEMM (8 B lines)
    assert len(drawn) == 3 and {p["spad_kib"] for p in drawn} == {64}
    assert DEFAULT_SPACE["intrinsic"]["choices"] == ["gemm", "conv2d", "gemv", "dot"]
