"""The events a compiled program is priced by (`dse.program_events`) against the functional
simulator's own counts and against a hand-counted program."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.api import resolve_mapping
from tensorforge.compiler.codegen import generate
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_space import build_space
from tensorforge.dse.program_events import program_events
from tensorforge.isa import Buffer, Compute, Finish, Load, Store, expand
from tensorforge.sim.functional import run_program

CASES = [
    ("C[i,j] += A[i,k] * B[k,j]", "i=40,j=24,k=56", {}),
    ("O[n,h,w,k] += I[n,h+r,w+s,c] * W[r,s,c,k]", "n=1,h=6,w=6,k=16,r=3,s=3,c=8",
     {"array": {"rows": 4, "cols": 4}}),
    ("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16",
     {"array": {"rows": 4, "cols": 4, "interconnect": "full", "dataflow": "os"}}),
]


@pytest.mark.parametrize(("text", "sizes", "changes"), CASES)
def test_counts_agree_with_the_functional_simulator(text, sizes, changes):
    """MACs executed, accumulator lines read by MAC steps (the steps that do not overwrite)
    and DRAM bytes (plus 16 fetched per instruction) as the functional simulator counts them
    running the program."""
    workload = parse_workload(text, sizes)
    config = AcceleratorConfig.from_dict(changes)
    mapping = resolve_mapping(workload, config)
    program = generate(workload, mapping, config)
    step = build_space(workload, mapping.choice, config, mapping.groups).step
    events = program_events(program.instructions, config, step)

    image = program.pack_inputs(workload.random_inputs(np.random.default_rng(3)))
    stats = run_program(config, list(program.instructions), image)
    assert events["macs"] == stats.macs
    fetched = 16 * len(program.instructions)
    assert events["dram_bytes"] == fetched + stats.dram_bytes_read + stats.dram_bytes_written
    stores = sum(i.rows for i in expand(program.instructions, config.precision.in_bytes,
                                        config.precision.acc_bytes) if isinstance(i, Store))
    c_lines = config.blocks["C"].lines
    mac_reads = (stats.mac_steps - stats.overwrite_steps) * c_lines
    assert events["acc_line_reads"] == mac_reads + stores
    assert events["acc_line_writes"] == (stats.mac_steps + stats.zero_steps) * c_lines
    assert events["macs"] >= workload.macs


def test_a_hand_counted_program():
    """gemm 2x2 ws: one LOAD of 3 rows with a zero line before it, a MAC of 2 x 3 steps whose
    inner loop moves the stationary operand, overwriting on the C blocks it visits first, and a
    STORE of 2 rows, on a 64-bit bus."""
    config = AcceleratorConfig.from_dict({"array": {"rows": 2, "cols": 2}})
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=2,j=2,k=2")
    mapping = resolve_mapping(workload, config)
    step = build_space(workload, mapping.choice, config, mapping.groups).step
    assert step.stationary_role == "B"
    program = [
        Load(buffer=Buffer.SPAD, line=0, dram_addr=0, rows=3, row_len=2, stride=2, pad_before=1),
        Compute(outer=2, inner=3, b_inner=step.stationary_lines,
                acc_outer=config.blocks["C"].lines,
                overwrite=True),
        Store(line=0, dram_addr=4096, rows=2, row_len=2, stride=2),
        Finish(),
    ]
    events = program_events(program, config, step)
    steps = 6
    assert events["macs"] == steps * config.macs_per_step
    # every step streams its beats; the stationary block changes at every step (inner moves it)
    assert events["spad_line_reads"] == steps * step.beats + steps * step.stationary_lines
    assert events["spad_line_writes"] == 3 + 1
    # C moves with the outer loop only: the first inner step of each outer step overwrites
    c_lines = config.blocks["C"].lines
    assert events["acc_line_writes"] == steps * c_lines
    assert events["acc_line_reads"] == (steps - 2) * c_lines + 2
    # 3 rows of 2 int8 and 2 rows of 2 int32, each run contiguous in DRAM (stride = row), so
    # 6 bytes in one beat and 16 in two; 4 instructions of 16 B in 8 beats
    assert events["dram_bytes"] == 3 * 2 + 2 * 2 * 4 + 4 * 16
    assert events["dma_beats"] == 1 + 2 + 8
    hops = 2.0  # systolic: forwarded along a row of 2
    assert events["forward_bytes"] == steps * step.beats * config.spad_line_elems * hops


@pytest.mark.rtl
@pytest.mark.slow
def test_counts_agree_with_the_rtls_memory_ports():
    """The scratchpad and accumulator lines the program's events count are the accesses the
    RTL's memory ports made (counted by `register_activity` over the run), and the run is
    right. The 4x4 GEMM accelerator of tests/test_power_activity.py (one activity model)."""
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config = AcceleratorConfig.from_dict({
        "array": {"rows": 4, "cols": 4},
        "scratchpad": {"capacity": 2048, "banks": 4, "accumulator": 1024},
    })
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=12,j=10,k=9")
    mapping = resolve_mapping(workload, config)
    program = generate(workload, mapping, config)
    step = build_space(workload, mapping.choice, config, mapping.groups).step
    events = program_events(program.instructions, config, step)
    inputs = workload.random_inputs(np.random.default_rng(2))
    result, = run_programs_on_rtl(config, [RtlCase(workload, mapping, inputs, 2,
                                                   program=program)],
                                  RunOptions(register_activity=True, seed=2))
    assert result.match
    accesses = result.register_activity.accesses
    banks = [accesses[f"scratchpad.bank{b}"] for b in range(config.scratchpad.banks)]
    assert events["spad_line_reads"] == sum(sum(bank.reads) for bank in banks)
    assert events["spad_line_writes"] == sum(sum(bank.writes) for bank in banks)
    accumulator = accesses["accumulator.memory"]
    assert events["acc_line_reads"] == sum(accumulator.reads)
    assert events["acc_line_writes"] == sum(accumulator.writes)
