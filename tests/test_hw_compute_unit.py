"""The COMPUTE unit: random COMPUTE programs against the numpy golden model.

Tiers: Amaranth's simulator (``amaranth_sim``) over the whole intrinsic x interconnect x
dataflow grid on one shape, with random stalls on every port; the documented one-step latency;
cocotb + Verilator (``rtl``) through ``tests/cocotb_benches/bench_compute_unit.py``; and an
elaboration smoke test that converts the unit to Verilog over the grid.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import verilog

from tensorforge.config import (
    AcceleratorConfig,
    ArrayConfig,
    Dataflow,
    Interconnect,
    ScratchpadConfig,
)
from tensorforge.hw.compute_unit import ComputeUnit, step_latency
from tensorforge.hw.dataflow_plan import design_grid, local_banks, plan_for
from tensorforge.intrinsics import Intrinsic
from tensorforge.isa import Compute, ComputeMode, Finish, Reduction
from tensorforge.sim.compute_unit_sim import run_compute_program
from tensorforge.sim.functional import FunctionalSimulator

BENCHES = Path(__file__).resolve().parent / "cocotb_benches"
SPAD_LINES, ACC_LINES = 96, 64


def _load_golden():
    spec = importlib.util.spec_from_file_location("compute_golden", BENCHES / "compute_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


golden = _load_golden()


def make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=3):
    return AcceleratorConfig(
        intrinsic=intrinsic,
        array=ArrayConfig(
            rows=rows,
            cols=cols,
            dataflow=dataflow,
            interconnect=interconnect,
            local_bytes=local_bytes,
        ),
        scratchpad=ScratchpadConfig(capacity=8192, banks=2, accumulator=16384),
    )


grid = design_grid


def run_program(config, program, spad, acc, seed, stall=0.0, latency=1, back_to_back=False,
                registered_control=False):
    """(acc, cycles) of ``program`` run one instruction at a time, or, ``back_to_back``,
    (acc, [cycles until idle after the last], retire pulses seen)."""
    run = run_compute_program(config, program, spad, acc, seed=seed, stall=stall,
                              latency=latency, back_to_back=back_to_back,
                              registered_control=registered_control)
    if back_to_back:
        return run.acc, run.cycles, run.retired
    return run.acc, run.cycles


def check_random_program(config, seed, count=4, stall=0.3):
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = golden.random_program(config, rng, count, SPAD_LINES, ACC_LINES)
    expected = acc.copy()
    for instruction in program:
        golden.execute(config, instruction, spad, expected)
    got, _ = run_program(config, program, spad, acc, seed, stall=stall)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, (
        f"seed {seed}: {len(bad)} wrong accumulator elements, first at {bad[0].tolist()}; "
        f"program:\n" + "\n".join(i.describe() for i in program)
    )


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols",
    list(grid([(2, 3)]))
    + [
        (Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 3, 5),
        (Intrinsic.GEMM, Dataflow.INPUT_STATIONARY, Interconnect.FULL, 3, 3),
    ],
)
def test_random_programs_match_golden(intrinsic, dataflow, interconnect, rows, cols):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    check_random_program(config, seed=rows * 31 + cols + len(intrinsic.value) * 7)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols",
    list(grid([(2, 3)]))
    + [(Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 3, 5)],
    ids=str,
)
@pytest.mark.parametrize("local_bytes", [0, 3])
def test_back_to_back_programs_match_golden(intrinsic, dataflow, interconnect, rows, cols,
                                            local_bytes):
    """Each instruction is offered while the last one drains; every one retires, in order."""
    if intrinsic is Intrinsic.CONV2D and dataflow is Dataflow.WEIGHT_STATIONARY:
        local_bytes = 3  # its taps need three bytes
    config = make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes)
    seed = rows * 17 + cols + len(intrinsic.value) * 5 + local_bytes
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = golden.random_program(config, rng, 6, SPAD_LINES, ACC_LINES)
    expected = acc.copy()
    for instruction in program:
        golden.execute(config, instruction, spad, expected)
    got, _, retired = run_program(config, program, spad, acc, seed, stall=0.3, back_to_back=True)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, (
        f"seed {seed}: {len(bad)} wrong accumulator elements; program:\n"
        + "\n".join(i.describe() for i in program)
    )
    assert retired == len(program)


@pytest.mark.amaranth_sim
def test_back_to_back_instructions_overlap_the_drain():
    """Six 4-step GEMM instructions offered back to back: their beats follow each other (at
    most 2 cycles between instructions), so all six take one instruction's fill and drain
    beyond their beats; one after another each pays its own. Same result."""
    config = make_config(
        Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4, local_bytes=0
    )
    rng = np.random.default_rng(21)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES * 4, ACC_LINES)
    program = [
        Compute(outer=2, inner=2, a_base=16 * k, a_inner=4, b_base=256 + 8 * k, b_outer=4,
                acc_base=0, acc_outer=8, acc_inner=4)
        for k in range(6)
    ]
    expected = acc.copy()
    for instruction in program:
        golden.execute(config, instruction, spad, expected)
    alone, cycles = run_program(config, program, spad, acc, seed=21)
    together, (total,), retired = run_program(config, program, spad, acc, seed=21,
                                              back_to_back=True)
    assert (alone == expected).all() and (together == expected).all() and retired == 6
    beats = 6 * 2 * 2 * 4
    assert total <= beats + step_latency(config) + 5 * 2, (total, cycles)
    assert sum(cycles) == 6 * step_latency(config) + 6 * (4 - 1) * 4, cycles


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols",
    list(grid([(2, 3)], (Interconnect.SYSTOLIC, Interconnect.NONE))),
)
def test_one_step_takes_step_latency(intrinsic, dataflow, interconnect, rows, cols):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    rng = np.random.default_rng(5)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    _, cycles = run_program(config, [Compute(mode=ComputeMode.MAC)], spad, acc, seed=5)
    assert cycles == [step_latency(config)]


@pytest.mark.amaranth_sim
def test_gemm_ws_systolic_keeps_one_beat_per_cycle():
    """8 weight blocks x 8 A blocks: weights stay while b_inner == 0 and reload in the shadow
    bank, so the 512 beats take barely more than 512 cycles."""
    config = make_config(Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4)
    rng = np.random.default_rng(11)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES * 2, ACC_LINES)
    program = [
        Compute(
            outer=8, inner=8, a_base=0, a_inner=4, b_base=64, b_outer=4, acc_base=0, acc_inner=4
        )
    ]
    expected = acc.copy()
    golden.execute(config, program[0], spad, expected)
    got, cycles = run_program(config, program, spad, acc, seed=11)
    assert (got == expected).all()
    beats = 8 * 8 * 4
    assert cycles[0] <= beats + step_latency(config), cycles


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("registered_control", [False, True])
def test_gemm_ws_systolic_two_banks_keep_one_beat_per_cycle_when_weights_change_every_step(
        registered_control):
    """The weight block changes with every step (k inner): with only two banks, the next block
    is written behind the last beat that reads the bank, so the beats still go one per cycle
    (also with the ``ecp5`` control, whose room flags come a cycle early)."""
    config = make_config(
        Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4, local_bytes=0
    )
    rng = np.random.default_rng(12)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES * 2, ACC_LINES)
    program = [
        Compute(outer=4, inner=8, a_base=0, a_outer=4, a_inner=16, b_base=64, b_outer=0,
                b_inner=4, acc_base=0, acc_outer=4, acc_inner=0)
    ]
    expected = acc.copy()
    golden.execute(config, program[0], spad, expected)
    got, cycles = run_program(config, program, spad, acc, seed=12,
                              registered_control=registered_control)
    assert (got == expected).all()
    assert cycles[0] <= 4 * 8 * 4 + step_latency(config), cycles


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols", list(grid([(2, 3)])), ids=str
)
@pytest.mark.parametrize("stall", [0.0, 0.3])
@pytest.mark.parametrize("registered_control", [False, True])
def test_two_banks_with_blocks_changing_every_step_match_golden(
    intrinsic, dataflow, interconnect, rows, cols, stall, registered_control
):
    """Every step names new A and B blocks, on the fewest PE store banks (two). Also with the
    ``ecp5`` control, whose stationary walker requests from registered flags (last line, room
    in its queues a cycle early): a block is loaded every step, so its queues fill."""
    taps = 3 if intrinsic is Intrinsic.CONV2D and dataflow is Dataflow.WEIGHT_STATIONARY else 0
    config = make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=taps)
    assert local_banks(config, plan_for(config)) == 2
    blocks = config.blocks
    a_lines, b_lines, c_lines = (blocks[name].lines for name in "ABC")
    program = [
        Compute(outer=2, inner=3, a_base=1, a_outer=3 * a_lines, a_inner=a_lines, b_base=2,
                b_outer=3 * b_lines, b_inner=b_lines, acc_base=0, acc_outer=c_lines,
                acc_inner=0),
        Compute(outer=3, inner=2, a_base=0, a_outer=0, a_inner=a_lines, b_base=5,
                b_outer=2 * b_lines, b_inner=b_lines, acc_base=c_lines, acc_outer=0,
                acc_inner=c_lines),
    ]
    rng = np.random.default_rng(rows * 10 + cols)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    expected = acc.copy()
    for instruction in program:
        golden.execute(config, instruction, spad, expected)
    got, _ = run_program(config, program, spad, acc, seed=3, stall=stall,
                         registered_control=registered_control)
    assert (got == expected).all()


def _reference(config, program, spad, acc) -> np.ndarray:
    """The accumulator after ``program``, by the ISA's functional simulator."""
    simulator = FunctionalSimulator(config)
    simulator.spad[: len(spad)] = spad
    simulator.acc[: len(acc)] = acc
    simulator.run([*program, Finish()], bytearray())
    return simulator.acc[: len(acc)]


def _check_against_reference(config, program, spad, acc, seed, back_to_back,
                             registered_control=False) -> None:
    """``program`` under stalls leaves the accumulator the functional simulator does."""
    expected = _reference(config, program, spad, acc)
    got, *_ = run_program(config, program, spad, acc, seed, stall=0.3,
                          back_to_back=back_to_back, registered_control=registered_control)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, (
        f"seed {seed}: {len(bad)} wrong accumulator elements; program:\n"
        + "\n".join(i.describe() for i in program)
    )


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("intrinsic,dataflow,interconnect,rows,cols", list(grid([(2, 3)])),
                         ids=str)
@pytest.mark.parametrize("back_to_back", [False, True])
def test_overwrite_writes_first_visits_without_old_lines(intrinsic, dataflow, interconnect,
                                                         rows, cols, back_to_back):
    """Random programs with the ``overwrite`` bit where it is legal, under stalls: the
    accumulator equals the functional simulator's (first visits take the array's result,
    the rest add to it; under ``os`` a group overwrites when its first step does)."""
    taps = 3 if intrinsic is Intrinsic.CONV2D and dataflow is Dataflow.WEIGHT_STATIONARY else 0
    config = make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=taps)
    seed = rows * 13 + cols + len(intrinsic.value) * 3 + back_to_back
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = []
    while not any(ins.overwrite for ins in program):  # some draws allow it nowhere
        program = golden.with_overwrite(config, golden.random_program(config, rng, 6, SPAD_LINES,
                                                                ACC_LINES), rng)
    _check_against_reference(config, program, spad, acc, seed, back_to_back)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("intrinsic,dataflow,interconnect,rows,cols", [
    (Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4),
    (Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.NONE, 2, 3),
    (Intrinsic.GEMM, Dataflow.INPUT_STATIONARY, Interconnect.FULL, 3, 3),
    (Intrinsic.GEMV, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 2, 3),
], ids=str)
@pytest.mark.parametrize("back_to_back", [False, True])
def test_max_reduction_keeps_the_larger_lane(intrinsic, dataflow, interconnect, rows, cols,
                                             back_to_back):
    """The output pipeline's MAX path (`isa.Reduction.MAX`): random programs, overwrite where
    legal, each MAC instruction ADD or MAX at random, under stalls, equal the functional
    simulator's accumulator (an overwriting MAX step writes the array's lines; the others
    keep the larger of each lane and its old value, signed)."""
    config = replace(make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=0),
                     output_pipeline=True)
    seed = rows * 17 + cols + len(intrinsic.value) + back_to_back
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = []
    while not any(ins.reduce and ins.overwrite for ins in program):
        program = golden.with_overwrite(config, golden.random_program(config, rng, 6, SPAD_LINES,
                                                                ACC_LINES), rng)
        program = [replace(ins, reduce=Reduction(int(rng.random() < 0.7)))
                   if ins.mode is ComputeMode.MAC else ins for ins in program]
    _check_against_reference(config, program, spad, acc, seed, back_to_back)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("registered_control", [False, True])
def test_accumulate_right_after_an_overwrite_of_the_same_block_waits_for_it(seed,
                                                                            registered_control):
    """An overwriting step, then steps accumulating into the same C block, under stalls: the
    accumulating step's array lines can come out before its old lines are queued (its read
    waits for the overwrite's write); the writer must wait for them, not take the previous
    entry's flag (this hung or wrote wrong lines on 2x8 ws arrays). Also with the ``ecp5``
    control, whose C reads leave a cycle later and whose queue head is a register."""
    config = make_config(Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.NONE, 2, 8)
    lines = config.blocks["C"].lines
    program = [Compute(outer=3, inner=3, acc_base=40, a_base=49, b_base=55, acc_outer=lines,
                       acc_inner=0, a_outer=4, a_inner=1, b_outer=4, overwrite=True),
               Compute(outer=3, inner=3, acc_base=47, a_base=49, b_base=55, a_outer=4,
                       a_inner=1, b_outer=4, overwrite=True)]
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    expected = acc.copy()
    for instruction in program:
        golden.execute(config, instruction, spad, expected)
    got, _ = run_program(config, program, spad, acc, seed, stall=0.3,
                         registered_control=registered_control)
    assert (got == expected).all()


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("intrinsic,rows,cols", [(Intrinsic.GEMV, 2, 3), (Intrinsic.GEMM, 2, 2)],
                         ids=str)
@pytest.mark.parametrize("stall,latency", [(0.0, 1), (0.3, 1), (0.3, 3)])
def test_registered_control_reads_a_line_only_after_its_pending_write(intrinsic, rows, cols,
                                                                      stall, latency):
    """Every step accumulates into the C lines the step before queued for writing (C strides
    0), back to back across instructions, some overwriting: on a one-line C block the next
    step's line is the very line pushed in the cycle before. The ``ecp5`` control decides each
    read's hazard a cycle early, from registers; a missed one reads the old value, and the
    accumulator differs from the functional simulator's."""
    config = make_config(intrinsic, Dataflow.WEIGHT_STATIONARY, Interconnect.NONE, rows, cols,
                         local_bytes=0)
    rng = np.random.default_rng(rows * 7 + cols + latency + int(10 * stall))
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = [replace(ins, mode=ComputeMode.MAC, outer=max(ins.outer, 2), inner=3,
                       acc_base=5 + (i % 2), acc_outer=0, acc_inner=0, overwrite=i == 2)
               for i, ins in enumerate(golden.random_program(config, rng, 4, SPAD_LINES // 2,
                                                             ACC_LINES))]
    expected = _reference(config, program, spad, acc)
    got, _, retired = run_program(config, program, spad, acc, seed=3, stall=stall,
                                  latency=latency, back_to_back=True, registered_control=True)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, (
        f"{len(bad)} wrong accumulator elements; program:\n"
        + "\n".join(i.describe() for i in program))
    assert retired == len(program)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols,output_pipeline",
    [(*case, False) for case in grid([(2, 3)])]
    # MAX needs each product once at the writer: not under os (the compiler rejects it)
    + [(*case, True) for case in grid([(2, 3)]) if case[1] is not Dataflow.OUTPUT_STATIONARY],
    ids=str,
)
def test_registered_control_matches_the_reference(intrinsic, dataflow, interconnect, rows, cols,
                                                  output_pipeline):
    """The ``ecp5`` target's control (``registered_control``: the writer's queue head in
    registers, the C reads through a skid buffer, the stationary walker deciding from
    registers) on the generic array: random programs back to back, ZERO and overwrite where
    legal (and MAX with the output pipeline), under stalls on every port, leave the
    accumulator the functional simulator does, and every instruction retires."""
    taps = 3 if intrinsic is Intrinsic.CONV2D and dataflow is Dataflow.WEIGHT_STATIONARY else 0
    config = replace(make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=taps),
                     output_pipeline=output_pipeline)
    seed = rows * 19 + cols + len(intrinsic.value) * 7 + len(dataflow.value) + output_pipeline
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    program = golden.with_overwrite(
        config, golden.random_program(config, rng, 8, SPAD_LINES, ACC_LINES), rng)
    if output_pipeline:
        program = [replace(ins, reduce=Reduction(int(rng.random() < 0.5)))
                   if ins.mode is ComputeMode.MAC else ins for ins in program]
    expected = _reference(config, program, spad, acc)
    got, _, retired = run_program(config, program, spad, acc, seed, stall=0.3,
                                  back_to_back=True, registered_control=True)
    bad = np.argwhere(got != expected)
    assert bad.size == 0, (
        f"seed {seed}: {len(bad)} wrong accumulator elements; program:\n"
        + "\n".join(i.describe() for i in program))
    assert retired == len(program)


def _block_patterns(config) -> list[Compute]:
    """Steps whose operand blocks alternate between two (inner stride one block, outer 0),
    stay for the inner loop (inner stride 0), or change every step, A and B alike, so the
    stationary walker sees hits on either bank, misses and chained loads back to back."""
    blocks = config.blocks
    a, b, c = (blocks[name].lines for name in "ABC")
    return [
        Compute(outer=3, inner=4, a_base=1, a_outer=0, a_inner=a, b_base=3, b_outer=0,
                b_inner=b, acc_base=0, acc_outer=c, acc_inner=0),  # alternate: X Y X Y
        Compute(outer=3, inner=3, a_base=2, a_outer=a, a_inner=0, b_base=4, b_outer=b,
                b_inner=0, acc_base=c, acc_outer=0, acc_inner=c),  # reuse along inner
        Compute(outer=2, inner=3, a_base=0, a_outer=3 * a, a_inner=a, b_base=5,
                b_outer=3 * b, b_inner=b, acc_base=0, acc_outer=c, acc_inner=0),  # new each
        Compute(outer=4, inner=2, a_base=1, a_outer=0, a_inner=2 * a, b_base=3, b_outer=0,
                b_inner=2 * b, acc_base=2 * c, acc_outer=0, acc_inner=0),  # alternate again
    ]


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("intrinsic,dataflow,interconnect,rows,cols", list(grid([(2, 3)])),
                         ids=str)
@pytest.mark.parametrize("back_to_back", [False, True])
def test_registered_control_walkers_on_alternating_and_reused_blocks(
        intrinsic, dataflow, interconnect, rows, cols, back_to_back):
    """The ``ecp5`` stationary walker decides from a registered tag match (of the step it
    holds next cycle) and chains a load at a block's last request from a registered flag; its
    stream walker requests from registered flags. Steps that alternate between two blocks,
    reuse one, or change it every step, under random stalls on every port, leave the
    accumulator the functional simulator does."""
    taps = 3 if intrinsic is Intrinsic.CONV2D and dataflow is Dataflow.WEIGHT_STATIONARY else 0
    config = make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=taps)
    seed = rows * 23 + cols + len(intrinsic.value) * 3 + len(dataflow.value) + back_to_back
    rng = np.random.default_rng(seed)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES, ACC_LINES)
    _check_against_reference(config, _block_patterns(config), spad, acc, seed, back_to_back,
                             registered_control=True)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("intrinsic,dataflow,interconnect,rows,cols", [
    (Intrinsic.DOT, Dataflow.OUTPUT_STATIONARY, Interconnect.NONE, 4, 4),
    (Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, 4, 4),
], ids=str)
def test_registered_control_reuses_a_block_every_cycle(intrinsic, dataflow, interconnect, rows,
                                                       cols):
    """A stationary block reused for 16 steps in a row: the ``ecp5`` walker decides a reuse
    every cycle (its registered match follows the walk), so even one-beat steps (``dot``
    under ``os``) keep one beat per cycle: at most a few cycles more than the generic unit,
    with the same result."""
    config = make_config(intrinsic, dataflow, interconnect, rows, cols, local_bytes=0)
    blocks = config.blocks
    a, b, c = (blocks[name].lines for name in "ABC")
    stationary_a = plan_for(config).stationary.name == "A"
    reused = ({"a_outer": a, "a_inner": 0, "b_outer": 16 * b, "b_inner": b} if stationary_a
              else {"a_outer": 16 * a, "a_inner": a, "b_outer": b, "b_inner": 0})
    program = [Compute(outer=3, inner=16, a_base=0, b_base=48, acc_base=0, acc_outer=c,
                       acc_inner=0, **reused)]
    rng = np.random.default_rng(5)
    spad, acc = golden.random_memories(config, rng, SPAD_LINES * 2, ACC_LINES)
    expected = _reference(config, program, spad, acc)
    runs = {rc: run_program(config, program, spad, acc, seed=5, registered_control=rc)
            for rc in (False, True)}
    for got, _ in runs.values():
        assert (got == expected).all()
    steps = 3 * 16
    assert runs[True][1][0] <= runs[False][1][0] + 4, (runs, steps)


@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols",
    list(grid([(3, 5)])) + list(grid([(4, 4)], (Interconnect.SYSTOLIC,))),
)
def test_compute_unit_converts_to_verilog(intrinsic, dataflow, interconnect, rows, cols):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    text = verilog.convert(ComputeUnit(config), name="compute_unit", emit_src=False)
    assert "module compute_unit" in text


@functools.cache
def compute_model(config: AcceleratorConfig):
    from tensorforge.sim.rtl_harness import build_model

    return build_model(ComputeUnit(config), top="compute_unit")


def run_random_programs_on_rtl(config: AcceleratorConfig, tmp_path: Path, seed: int,
                               instructions: int) -> None:
    """The cocotb bench's random COMPUTE programs on the unit's Verilator model, with random
    stalls on every port; the bench checks them against the golden model."""
    compute_model(config).run(
        BENCHES / "bench_compute_unit.py",
        test_dir=tmp_path,
        seed=seed,
        config={"accelerator": config.to_dict(), "instructions": instructions, "stall": 0.3},
    )


RTL_GRID = list(grid([(2, 3)])) + [
    (Intrinsic.GEMM, Dataflow.WEIGHT_STATIONARY, Interconnect.SYSTOLIC, rows, cols)
    for rows, cols in [(4, 4), (2, 8), (3, 5)]
]


@pytest.mark.rtl
@pytest.mark.parametrize("intrinsic,dataflow,interconnect,rows,cols", RTL_GRID)
def test_rtl_random_programs_match_numpy(intrinsic, dataflow, interconnect, rows, cols, tmp_path):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    run_random_programs_on_rtl(config, tmp_path, seed=rows * 1000 + cols, instructions=6)


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize(
    "intrinsic,dataflow,interconnect,rows,cols", list(grid([(4, 4), (2, 8), (3, 5)]))
)
def test_rtl_random_programs_big_grid(intrinsic, dataflow, interconnect, rows, cols, tmp_path):
    config = make_config(intrinsic, dataflow, interconnect, rows, cols)
    run_random_programs_on_rtl(config, tmp_path, seed=rows * 7 + cols, instructions=10)
