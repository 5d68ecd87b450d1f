"""The fast DRAM (Verilog, in the simulation top) against the reference (cocotbext-axi).

The same programs run through both models at several memories in one simulator process per
model (the two share one Verilator build: `tensorforge.sim.sim_top` selects the model at run
time). Outputs must be identical and equal to numpy; DRAM traffic identical; cycle counts
equal on a memory without pause generators, and otherwise within `_CYCLE_SLACK` (why: see
there). The error paths (a read past the end, a write outside the output region) must give
the same error from both.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.compiler.workload import parse_workload
from tensorforge.errors import SimulationError
from tensorforge.isa import Buffer, Finish, Load, Store
from tensorforge.memory import PRESETS, MemorySystem
from tensorforge.sim.fast_dram import hex_to_image, image_to_hex
from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS

# the RTL tests' shared 4x4 GEMM (the regression suite's first): one build for all
CONFIG = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
IDEAL = PRESETS["ideal"]
# The outstanding limits here do not bind (the DMA keeps at most 16 bursts in flight): the
# reference's limit is a queue depth with a lag, not the same rule (see `DramModel`), so the
# fast model's limit is checked against its own formula in `test_outstanding_limit_...`.
MEMORIES = {
    "ideal": IDEAL,
    "ddr3": PRESETS["ddr3"],
    "lpddr4": PRESETS["lpddr4"],
    "latency 7": IDEAL.with_overrides(latency=7),
    "half rate": IDEAL.with_overrides(bandwidth=4),  # half a beat per cycle on 64 bits
    "slow": IDEAL.with_overrides(latency=30, bandwidth=2),
}
WORKLOADS = [
    parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=12,j=10,k=9", name="gemm"),
    parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=12,k=20", name="gemm2"),
    parse_workload("C[i,j,l] += A[i,j,k] * B[k,l]", "i=3,j=4,k=5,l=6", name="ttm"),
]
SEED = 20261125


def _bursts(instructions) -> int:
    """At most how many AXI bursts a program makes: one per DRAM row of its LOADs and STOREs
    (these rows are far shorter than a burst and 4 KiB) plus its instruction fetch."""
    from tensorforge.isa import INSTRUCTION_BYTES
    from tensorforge.sim.axi_traffic import dram_rows

    rows = sum(len(list(dram_rows(CONFIG, ins))) for ins in instructions
               if isinstance(ins, Load | Store))
    fetch_burst = CONFIG.dma.max_burst * CONFIG.dma.bus_bytes
    return rows + -(-len(instructions) * INSTRUCTION_BYTES // fetch_burst) + 1


def _cycle_slack(memory: MemorySystem, bursts: int) -> int:
    """How many cycles the reference may take beyond the fast model.

    The reference's pause generators decide at one clock edge what the slave does at the
    next, so a burst whose data waited for its latency (or a response for its write latency)
    comes a cycle later than the memory's own timing, and the token bucket that paces beats
    below bus rate is sampled with the same lag: at most a cycle per burst, and a few for
    the program's start and end. Without latency or pacing no generator is installed, and
    the two models agree to the cycle.
    """
    if memory.latency == 0 and memory.beats_per_cycle(CONFIG.dma.bus_bytes) >= 1:
        return 0
    return bursts + 4


def test_image_hex_round_trip():
    rng = np.random.default_rng(SEED)
    for bus_bytes in (4, 8, 16):
        image = rng.integers(0, 256, size=1000 + bus_bytes, dtype=np.uint8).tobytes()
        size = -(-len(image) // bus_bytes) * bus_bytes + 64
        text = image_to_hex(image, bus_bytes, size).decode()
        lines = text.split()
        assert len(lines) == size // bus_bytes and all(len(x) == 2 * bus_bytes for x in lines)
        # byte 0 is the word's least significant byte
        assert int(lines[0], 16) == int.from_bytes(image[:bus_bytes], "little")
        assert hex_to_image("// a comment\n@0\n" + text, bus_bytes) == image.ljust(size, b"\0")


def test_an_unknown_dram_model_is_a_clear_error():
    from tensorforge.sim.rtl_run import RunOptions

    with pytest.raises(SimulationError, match="dram_model must be one of fast, reference, "
                                              "not 'fastest'"):
        RunOptions(dram_model="fastest")


def _run_both(cases, memory=None):
    from tensorforge.sim.rtl_run import RunOptions, run_programs_on_rtl

    options = {"seed": SEED} if memory is None else {"seed": SEED, "memory": memory}
    return [run_programs_on_rtl(CONFIG, cases, RunOptions(dram_model=model, **options))
            for model in ("fast", "reference")]


@pytest.mark.rtl
def test_compiled_programs_agree_on_every_memory():
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.sim.rtl_run import RtlCase

    programs = [generate(w, default_mapping(w, CONFIG), CONFIG) for w in WORKLOADS]
    cases = [RtlCase(workload, seed=SEED + index, memory=memory, program=program)
             for index, (workload, program) in enumerate(zip(WORKLOADS, programs, strict=True))
             for memory in MEMORIES.values()]
    names = [(w.name, name) for w in WORKLOADS for name in MEMORIES]
    fast, reference = _run_both(cases)
    for name, case, quick, slow in zip(names, cases, fast, reference, strict=True):
        what = f"{name} (seed {case.seed}): fast {quick.counters}, reference {slow.counters}"
        assert quick.match and slow.match, what
        assert np.array_equal(quick.output, slow.output), what
        assert quick.dram_bytes_read == slow.dram_bytes_read, what
        assert quick.dram_bytes_written == slow.dram_bytes_written, what
        slack = _cycle_slack(case.memory, _bursts(case.program.instructions))
        assert quick.cycles <= slow.cycles <= quick.cycles + slack, what


@pytest.mark.rtl
def test_isolated_loads_and_stores_agree():
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    # Unaligned STORE rows (start 4, 12) write partial beats: the byte strobes must agree.
    dram = bytes((index * 7 + 3) % 256 for index in range(1024))
    programs = []
    for memory in MEMORIES.values():
        programs += [
            RawProgram((Load(buffer=Buffer.SPAD, rows=12, row_len=4, stride=64), Finish()),
                       dram, memory=memory),
            RawProgram((Load(buffer=Buffer.ACC, rows=3, row_len=4, stride=40), Finish()),
                       dram, memory=memory),
            RawProgram((Load(rows=2, row_len=4), Store(rows=6, row_len=4, stride=8,
                                                        dram_addr=68), Finish()),
                       dram, writable=((64, 512),), memory=memory),
            RawProgram((Store(rows=3, row_len=3, stride=8, dram_addr=76), Finish()), dram,
                       writable=((64, 512),), memory=memory),
        ]
    fast, reference = (run_instructions_on_rtl(CONFIG, programs, RunOptions(dram_model=model))
                       for model in ("fast", "reference"))
    for program, (quick, after_quick), (slow, after_slow) in zip(programs, fast, reference,
                                                                 strict=True):
        what = (program.instructions, program.memory, quick, slow)
        assert after_quick == after_slow, what
        assert quick["bytes_read"] == slow["bytes_read"], what
        assert quick["bytes_written"] == slow["bytes_written"], what
        assert quick["cycles"] <= slow["cycles"] <= quick["cycles"] + _cycle_slack(
            program.memory, _bursts(program.instructions)), what


@pytest.mark.rtl
@pytest.mark.parametrize("model", ["fast", "reference"])
def test_a_read_past_the_end_sets_status_error(model):
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    # The DRAM is the image plus a 4 KiB guard: a LOAD 64 KiB further answers SLVERR.
    program = RawProgram((Load(rows=1, row_len=4, dram_addr=64 << 10), Finish()), bytes(64))
    with pytest.raises(SimulationError, match="STATUS.error is set"):
        run_instructions_on_rtl(CONFIG, [program], RunOptions(dram_model=model))


@pytest.mark.rtl
@pytest.mark.parametrize("model", ["fast", "reference"])
def test_a_write_outside_the_output_names_the_store(model):
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    # The second row (at 104) of the STORE leaves the writable range [64, 100); its first
    # beat is refused (8 B: the row's 16 B go out as two beats).
    program = RawProgram((Load(rows=1, row_len=4), Store(rows=2, row_len=4, stride=10,
                                                         dram_addr=64), Finish()),
                         bytes(256), writable=((64, 100),))
    with pytest.raises(SimulationError, match=r"wrote 8 B at 0x68, outside its output region "
                                              r"\[0x40, 0x64\): instruction #1 \(STORE"):
        run_instructions_on_rtl(CONFIG, [program], RunOptions(dram_model=model))


@pytest.mark.rtl
def test_outstanding_limit_serializes_bursts():
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    # 12 rows of one beat each, 64 B apart: 12 one-beat bursts. With latency L a burst holds
    # its slot at least L + 1 cycles (address to data); one slot serializes the rows, four
    # slots take at least a quarter of that and at most half of one slot's time, no limit
    # pays the latency about once.
    latency, rows = 20, 12
    load = (Load(buffer=Buffer.SPAD, rows=rows, row_len=4, stride=64), Finish())
    limits = (1, 4, None)
    programs = [RawProgram(load, bytes(1024),
                           memory=IDEAL.with_overrides(latency=latency, outstanding=limit or
                                                       "unlimited"))
                for limit in limits]
    one, four, unlimited = (counters["load_busy"] for counters, _ in run_instructions_on_rtl(
        CONFIG, programs, RunOptions(dram_model="fast")))
    what = (one, four, unlimited)
    assert one >= rows * (latency + 1), what
    assert rows / 4 * (latency + 1) <= four <= one / 2, what
    assert unlimited <= latency + 1 + rows + 8, what
