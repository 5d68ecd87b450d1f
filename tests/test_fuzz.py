"""The differential fuzzer (`tensorforge fuzz`): its draws, its verdicts, its CI sample on RTL.

The RTL test is the fixed 30-program sample of issue 16: seed `CI_SEED`, on the fuzzer's
pool, whose configurations the regression suite builds anyway (no extra Verilator build).
The pure-Python tests check that the fuzzer would notice a disagreement at all: a checker
that cannot fail proves nothing.
"""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.errors import ConfigError, SimulationError
from tensorforge.intrinsics import Intrinsic
from tensorforge.sim import fuzz
from tensorforge.sim.fuzz import (
    PASS,
    FuzzOutcome,
    check_batch,
    read_case_file,
    run_cases,
    write_case_file,
)
from tensorforge.sim.fuzz_cases import (
    KINDS,
    POOL,
    POOLS,
    SPACE_CONFIGS,
    SPACE_OVERRIDES,
    draw_case,
    draw_cases,
    pool_configs,
    space_pool,
)
from tensorforge.sim.rtl_matrix import all_configs

CI_SEED = 1616
CI_PROGRAMS = 30


def test_case_index_alone_decides_the_case():
    """Case i of a seed is the same whatever the campaign's size; another seed differs."""
    assert draw_cases(4, 5) == draw_cases(7, 5)[:4]
    assert draw_case(5, 3) == draw_cases(4, 5)[3]
    assert draw_cases(4, 5) != draw_cases(4, 6)


def test_draws_cover_the_pool_kinds_mappings_and_memories():
    cases = draw_cases(150, 3)
    assert set(POOL) <= set(all_configs())  # built by the regression suite
    assert {c.config.intrinsic for c in cases} == set(Intrinsic)
    assert {c.mapping.split(":")[0] for c in cases} == {"default", "random"}
    assert {c.kind for c in cases} == {k for kinds in KINDS.values() for k in kinds}
    assert len({c.memory for c in cases}) > 20
    for case in cases:
        assert case.kind in KINDS[case.config.intrinsic], case.describe()


def test_the_whole_pool_is_every_combination():
    assert set(POOLS["all"]) == set(all_configs())
    assert {c.config_name for c in draw_cases(30, 1, POOLS["all"])} <= set(all_configs())


def test_the_space_pool_draws_design_points_a_sweep_could_propose():
    """Seeded, distinct, buildable points of the default space, including the DMA settings
    the tables lack: bursts longer than the instruction fetch's queue (a964fef)."""
    pool = space_pool(1)
    assert pool == pool_configs("space", 1) and pool != space_pool(2)
    assert len(pool) == SPACE_CONFIGS == len({*map(repr, pool.values())})
    space = HardwareSpace(SPACE_OVERRIDES)
    for config in pool.values():
        assert space.to_config(HardwareSpace.point_of(config)) == config
        assert config.array.rows <= 4 and config.array.cols <= 4
    configs = [c for seed in range(4) for c in space_pool(seed).values()]
    assert any(_outruns_fetch_queue(c) for c in configs)
    assert not any(_outruns_fetch_queue(c) for c in all_configs().values())
    cases = draw_cases(12, 1, pool)
    assert cases[:5] == draw_cases(5, 1, pool_configs("space", 1))
    assert {c.config_name for c in cases} <= set(pool)


def test_the_repeat_pool_is_the_default_one_with_the_expander():
    """Same accelerators as the default pool but for controller.repeat; its drawn programs
    run on the functional simulator as numpy says, and some of them fold transfers."""
    import dataclasses

    from tensorforge.compiler.codegen import generate

    pool = pool_configs("repeat", 0)
    assert [name.removesuffix("+repeat") for name in pool] == list(POOLS["default"])
    table = all_configs()
    for name, config in pool.items():
        assert config.controller.repeat
        plain = dataclasses.replace(config, controller=table[name.removesuffix("+repeat")]
                                    .controller)
        assert plain == table[name.removesuffix("+repeat")]
    folded = 0
    for case in draw_cases(30, 5, pool):
        workload = case.workload()
        program = generate(workload, case.resolve_mapping(), case.config)
        folded += any(getattr(i, "repeat", 0) for i in program.instructions)
        inputs = case.inputs()
        np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))
    assert folded


def _outruns_fetch_queue(config) -> bool:
    """A burst longer than the fetch queue's beats: 16 chunks of max(16, bus bytes) bytes."""
    bus_bytes = config.dma.bus_bits // 8
    return config.dma.max_burst > 16 * max(16, bus_bytes) // bus_bytes


def test_compiler_and_functional_simulator_agree_with_numpy():
    """The stages before the RTL on drawn cases (the RTL sample below has fewer)."""
    for case in draw_cases(40, 11):
        front = fuzz._front(case)
        assert not isinstance(front, FuzzOutcome), (
            f"seed 11 {case.describe()}: {front.verdict} {front.detail}")


def test_a_wrong_output_is_a_mismatch_with_its_place(monkeypatch):
    from tensorforge.compiler.program import Program

    unpack = Program.unpack_output

    def off_by_one(self, dram):
        output = np.array(unpack(self, dram))
        output.flat[-1] += 1
        return output

    monkeypatch.setattr(Program, "unpack_output", off_by_one)
    outcome = fuzz._front(draw_case(2, 0))
    assert outcome.verdict == "functional-mismatch"
    assert "1 of" in outcome.detail and "differ from numpy" in outcome.detail


def test_a_stopped_batch_is_rerun_one_program_at_a_time(monkeypatch):
    """Only the program that stops the simulator is an rtl-error; its batch-mates pass."""
    import tensorforge.sim.rtl_run as rtl_run

    cases = [c for c in draw_cases(40, 4) if c.config_name == draw_case(4, 0).config_name][:3]
    bad = cases[1].seed

    def fake_run(config, rtl_cases, options=None):
        if any(c.seed == bad for c in rtl_cases):
            raise SimulationError("hung past its cycle limit")
        return [types.SimpleNamespace(output=c.workload.reference(c.inputs),
                                      traffic_consistent=True, cycles=10, instructions=3)
                for c in rtl_cases]

    monkeypatch.setattr(rtl_run, "run_programs_on_rtl", fake_run)
    verdicts = [o.verdict for o in check_batch(cases)]
    assert verdicts == [PASS, "rtl-error", PASS]


def test_case_file_round_trip(tmp_path):
    case = draw_case(8, 2)
    path = write_case_file(FuzzOutcome(case, "rtl-mismatch", "detail"), tmp_path)
    assert read_case_file(path) == case
    assert json.loads(path.read_text())["verdict"] == "rtl-mismatch"


def test_a_file_that_is_no_case_file_is_named(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ConfigError, match="notes.json is not a fuzz case file"):
        read_case_file(path)


def test_cli_rejects_a_non_positive_count(capsys):
    from tensorforge.cli import main

    with pytest.raises(SystemExit):
        main(["fuzz", "--programs", "0"])
    assert "must be a positive integer, not '0'" in capsys.readouterr().err


@pytest.mark.rtl
def test_ci_sample_agrees_on_rtl(tmp_path):
    """Issue 16's fixed 30-program sample; then one of its cases replayed through the CLI."""
    from tensorforge.cli import main

    outcomes = run_cases(draw_cases(CI_PROGRAMS, CI_SEED))
    failures = [f"{o.case.describe()}: {o.verdict} {o.detail}" for o in outcomes if not o.passed]
    assert not failures, f"seed {CI_SEED}: " + "\n".join(failures)
    path = write_case_file(outcomes[0], tmp_path)
    assert main(["fuzz", "--replay", str(path)]) == 0


@pytest.mark.rtl
def test_an_rtl_output_that_differs_is_a_mismatch():
    """The RTL stage can fail: the model runs on inputs numpy did not see (one flipped)."""
    import dataclasses

    front = fuzz._front(draw_case(CI_SEED, 0))
    name = sorted(front.inputs)[0]
    inputs = {**front.inputs, name: front.inputs[name].copy()}
    inputs[name].flat[0] = 1 - inputs[name].flat[0] if inputs[name].flat[0] != 0 else 5
    [outcome] = fuzz._rtl([dataclasses.replace(front, inputs=inputs)])
    assert outcome.verdict == "rtl-mismatch", (outcome.verdict, outcome.detail)
    assert "differ from numpy" in outcome.detail
