"""`run_on_rtl` and its parts: cycle counts against independent counts, the DRAM model's
latency and bandwidth, errors that name the instruction, activity and power.

All RTL tests share one small accelerator (4x4 GEMM, the first configuration of the
regression suite, so its Verilator model is built once for both).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensorforge.compiler.workload import parse_workload
from tensorforge.errors import SimulationError
from tensorforge.isa import Buffer, Compute, Finish, Load, Store
from tensorforge.memory import MemorySystem
from tensorforge.sim.axi_traffic import bus_traffic, fetch_bytes
from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS

CONFIG = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=12,j=10,k=9", name="gemm")
# Timing tests start from the ideal memory and slow one thing down at a time.
IDEAL = MemorySystem.preset("ideal")
TIMINGS = [IDEAL, IDEAL.with_overrides(latency=7), IDEAL.with_overrides(bandwidth=4)]  # 4 B:
# half a beat per cycle on the 64-bit bus

# An isolated LOAD keeps the pipelined load unit busy for a fixed command cost plus every beat
# at the DRAM's rate (`LoadUnit.beats_per_cycle` at most): rows' bursts are issued while
# earlier rows' data returns (up to `dma.outstanding` bursts), so rows cost no fixed cycles
# of their own. LOAD_FIXED is the command's own cost (planning, the last line write, idle going
# high); measured, the DMA does not expose it yet. DRAM latency then adds at least one latency
# (the first burst) and at most one per burst (a DRAM that serves bursts one at a time).
LOAD_FIXED = 5


# ------------------------------------------------------------------ pure Python


def test_bus_traffic_counts_beats_and_fetch():
    # 4 rows of 4 int8 at odd addresses on a 64-bit bus: rows straddling a beat cost two.
    loads = [Load(rows=4, row_len=4, stride=6, dram_addr=3)]  # rows at 3, 9, 15, 21
    traffic = bus_traffic(CONFIG, [*loads, Finish()], base=64)
    assert traffic.read == (2 + 1 + 2 + 1) * 8 + 32
    assert fetch_bytes(CONFIG, 64, 2) == 32 and fetch_bytes(CONFIG, 48, 1) == 16
    stores = [Store(rows=2, row_len=4, stride=4, dram_addr=0)]  # 16 B rows, aligned
    assert bus_traffic(CONFIG, stores, base=0).written == 2 * 16


# ------------------------------------------------------------------ RTL


@pytest.mark.rtl
def test_one_compute_is_busy_for_the_documented_step_latency():
    from tensorforge.hw.compute_unit import step_latency
    from tensorforge.sim.rtl_run import RawProgram, run_instructions_on_rtl

    (counters, _), = run_instructions_on_rtl(CONFIG, [RawProgram((Compute(), Finish()))])
    # step_latency counts from the accepting edge to the first idle cycle; idle is low from
    # the cycle after that edge, so the busy counter sees one cycle fewer.
    assert counters["compute_busy"] == step_latency(CONFIG) - 1, counters
    assert counters["load_busy"] == counters["store_busy"] == counters["bank_conflicts"] == 0


@pytest.mark.rtl
def test_load_busy_follows_rows_beats_and_dram_latency():
    from tensorforge.sim.rtl_run import RawProgram, run_instructions_on_rtl

    dram = bytes(range(256)) * 2
    shapes = [(Buffer.SPAD, 1), (Buffer.SPAD, 4), (Buffer.SPAD, 12), (Buffer.ACC, 3)]
    cases = [(buffer, rows, timing) for buffer, rows in shapes for timing in TIMINGS]
    programs = [
        RawProgram((Load(buffer=buffer, rows=rows, row_len=4, stride=64), Finish()), dram,
                   memory=timing)
        for buffer, rows, timing in cases
    ]
    runs = run_instructions_on_rtl(CONFIG, programs)
    for (buffer, rows, timing), (counters, _) in zip(cases, runs, strict=True):
        line_bytes = CONFIG.acc_line_bytes if buffer is Buffer.ACC else CONFIG.spad_line_bytes
        beats = -(-line_bytes // CONFIG.dma.bus_bytes)  # aligned rows of one line each
        per_beat = 1 / timing.beats_per_cycle(CONFIG.dma.bus_bytes)
        assert rows <= CONFIG.dma.outstanding  # every row's burst can be in flight at once
        streaming = LOAD_FIXED + rows * beats * per_beat
        bursts = rows  # aligned rows of one line each: one burst per row
        busy = counters["load_busy"]
        if timing.latency:
            latency_paid = busy - streaming
            assert timing.latency <= latency_paid <= timing.latency * bursts, (
                buffer, rows, timing, counters)
        else:
            # The pause pattern that halves bandwidth may align with the first beat or not:
            # one cycle of slack for partial-rate DRAM, none for full rate.
            slack = 0 if per_beat == 1 else 1
            assert abs(busy - streaming) <= slack, (buffer, rows, timing, counters)
        assert counters["bytes_read"] == rows * beats * 8 + fetch_bytes(CONFIG, 512, 2)


@pytest.mark.rtl
def test_store_busy_follows_beats_not_rows():
    from tensorforge.hw.dma import StoreUnit
    from tensorforge.sim.rtl_run import RawProgram, run_instructions_on_rtl

    # An isolated STORE streams (`StoreUnit`): lines are read ahead, AW bursts go out ahead of
    # their W beats and B responses are awaited once, at the end. On an ideal DRAM it is busy
    # for `StoreUnit.fixed_cycles` plus one cycle per W beat; rows cost nothing of their own.
    # A DRAM's B latency is paid at least once and at most once per burst, plus one cycle
    # per burst for the reference model, whose pause generator acts a cycle late (these runs
    # use the fast model, `tests/test_fast_dram.py` holds the two together). A slower DRAM
    # cannot take beats faster than its bandwidth.
    dram = bytes([0xA5]) * 512
    shapes = [(1, 4, 0), (12, 4, 0), (9, 2, 0), (6, 4, 4), (3, 3, 12)]  # rows, row_len, start
    cases = [(shape, timing) for shape in shapes for timing in TIMINGS]
    stride = 8  # elements: rows 32 B apart, each row its own bursts
    programs = [
        RawProgram((Store(rows=rows, row_len=row_len, stride=stride, dram_addr=64 + start),
                    Finish()), dram, writable=((64, 512),), memory=timing)
        for (rows, row_len, start), timing in cases
    ]
    runs = run_instructions_on_rtl(CONFIG, programs)
    bus = CONFIG.dma.bus_bytes
    for ((rows, row_len, start), timing), (counters, after) in zip(cases, runs, strict=True):
        row_bytes = row_len * CONFIG.precision.acc_bytes
        beats = rows * -(-(start % bus + row_bytes) // bus)  # a row of 16 B: one burst each
        busy = counters["store_busy"]
        what = (rows, row_len, start, timing, counters)
        if timing.ideal:
            assert beats < busy <= StoreUnit.fixed_cycles + beats, what
        elif timing.latency:
            latency_paid = busy - beats
            assert timing.latency < latency_paid <= (
                StoreUnit.fixed_cycles + (timing.latency + 1) * rows), what
        else:
            assert busy >= beats / timing.beats_per_cycle(bus), what
        assert counters["bytes_written"] == beats * bus
        # The accumulator was never written: every row's bytes are zero now, the rest intact.
        expected = bytearray(dram)
        for row in range(rows):
            first = 64 + start + row * stride * CONFIG.precision.acc_bytes
            expected[first : first + row_bytes] = bytes(row_bytes)
        assert after == bytes(expected), what


@pytest.mark.rtl
def test_slow_dram_costs_cycles_not_correctness(tmp_path):
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    seed = 11
    fast, = run_programs_on_rtl(CONFIG, [RtlCase(GEMM, seed=seed)],
                                RunOptions(memory=IDEAL, test_dir=tmp_path / "fast", seed=seed))
    slow, = run_programs_on_rtl(CONFIG, [RtlCase(GEMM, seed=seed)], RunOptions(
        memory=IDEAL.with_overrides(latency=30, bandwidth=2), test_dir=tmp_path / "slow",
        seed=seed))
    assert fast.match and slow.match, f"seed {seed}"
    assert fast.traffic_consistent and slow.traffic_consistent
    # the load unit keeps bursts in flight across its LOADs (hw/load_unit.py): the latency is
    # paid at least once, and the quarter-rate DRAM (2 B/cycle on an 8 B bus) slows its beats
    assert slow.load_busy > fast.load_busy + 30
    assert slow.cycles > fast.cycles + 30
    assert fast.ideal_cycles == GEMM.macs / CONFIG.array.pes
    assert fast.utilization == pytest.approx(fast.ideal_cycles / fast.cycles)


@pytest.mark.rtl
def test_write_outside_the_output_region_names_the_store():
    from tensorforge.sim.rtl_run import RawProgram, run_instructions_on_rtl

    program = RawProgram((Load(rows=1, row_len=4), Store(rows=2, row_len=4, stride=4,
                                                         dram_addr=96), Finish()),
                         bytes(256), writable=((64, 100),))
    with pytest.raises(SimulationError, match=r"outside its output region.*instruction #1 "
                                              r"\(STORE"):
        run_instructions_on_rtl(CONFIG, [program])


@pytest.mark.rtl
def test_compiled_program_with_a_misdirected_store_fails_naming_it():
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.sim.rtl_run import RtlCase, run_programs_on_rtl

    program = generate(GEMM, default_mapping(GEMM, CONFIG), CONFIG)
    index = next(i for i, ins in enumerate(program.instructions) if isinstance(ins, Store))
    instructions = list(program.instructions)
    instructions[index] = dataclasses.replace(instructions[index], dram_addr=0)  # onto A
    broken = dataclasses.replace(program, instructions=tuple(instructions))
    with pytest.raises(SimulationError, match=rf"instruction #{index} \(STORE"):
        run_programs_on_rtl(CONFIG, [RtlCase(GEMM, program=broken)])


@pytest.mark.rtl
def test_a_program_that_never_finishes_is_stopped_and_named():
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    # The second COMPUTE pops a load->compute token that no LOAD pushes.
    program = RawProgram((Load(rows=1, row_len=4), Compute(pop_prev=True), Finish()))
    with pytest.raises(SimulationError, match=r"did not finish within 3000 cycles[\s\S]*"
                                              r"compute unit waits for a token: instruction #1"):
        run_instructions_on_rtl(CONFIG, [program], RunOptions(max_cycles=3000))


@pytest.mark.rtl
def test_zero_operands_toggle_the_read_data_less_than_random_ones():
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    zeros = {name: np.zeros(shape, dtype=np.int64) for name, shape in GEMM.shapes.items()
             if name in GEMM.input_names}
    cases = [RtlCase(GEMM, inputs=zeros), RtlCase(GEMM, seed=5)]
    quiet, busy = run_programs_on_rtl(CONFIG, cases, RunOptions(activity=True))
    assert quiet.match and busy.match
    assert quiet.activity.cycles == pytest.approx(quiet.cycles, abs=8)
    assert quiet.activity.toggles["m_axi__rdata"] < busy.activity.toggles["m_axi__rdata"] / 2
    assert quiet.activity.mean_rate < busy.activity.mean_rate


@pytest.mark.rtl
@pytest.mark.synth
@pytest.mark.slow
def test_zero_operands_draw_less_power_than_random_ones():
    from tensorforge.hw.accelerator import TOP_NAME
    from tensorforge.sim.activity import estimate_power
    from tensorforge.sim.rtl_run import (
        RtlCase,
        RunOptions,
        accelerator_verilog,
        run_programs_on_rtl,
    )

    zeros = {name: np.zeros(GEMM.shapes[name], dtype=np.int64) for name in GEMM.input_names}
    quiet, busy = run_programs_on_rtl(
        CONFIG, [RtlCase(GEMM, inputs=zeros), RtlCase(GEMM, seed=5)], RunOptions(activity=True))
    verilog = accelerator_verilog(CONFIG)
    low = estimate_power(verilog, TOP_NAME, quiet.activity, quiet.cycles)
    high = estimate_power(verilog, TOP_NAME, busy.activity, busy.cycles)
    assert low.area_um2 == high.area_um2 > 0
    assert 0 < low.power_mw < high.power_mw
    assert low.energy_uj == pytest.approx(low.power_mw * quiet.cycles * 10 * 1e-6)
