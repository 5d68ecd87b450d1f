"""The instruction-level timeline (`dse/cost_trace.py`): hand-timed programs and properties.

Its agreement with the RTL is tested on the held-out CI sample (tests/test_fidelity.py); here
each mechanism is checked against a timing worked out by hand from its stated terms.
"""

from __future__ import annotations

import dataclasses

import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_model import CostParameters, rtl_parameters
from tensorforge.dse.cost_space import build_space
from tensorforge.dse.cost_trace import TraceTerms, trace_cycles
from tensorforge.dse.fidelity_cases import held_out_cases, latency_only
from tensorforge.isa import Buffer, Compute, Finish, Load, Store

CONFIG = AcceleratorConfig.from_dict({  # 8-byte bus: a 16-byte instruction is 2 beats
    "array": {"rows": 4, "cols": 4}, "scratchpad": {"capacity": 2048, "banks": 4,
                                                    "accumulator": 1024},
    "dma": {"bus_bits": 64, "max_burst": 16}})
TERMS = TraceTerms()


def _step():
    """The GEMM 4x4 step plan of CONFIG (any layer space of it has the same)."""
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.compiler.workload import parse_workload

    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=4,j=4,k=4")
    mapping = default_mapping(workload, CONFIG)
    return build_space(workload, mapping.choice, CONFIG, mapping.groups).step


def _cycles(program, latency: int = 0, terms: TraceTerms = TERMS) -> float:
    parameters = dataclasses.replace(CostParameters(), dram_latency_cycles=latency)
    return trace_cycles(program, CONFIG, _step(), parameters, terms)


@pytest.mark.parametrize("latency", [0, 16, 64])
def test_one_load_by_hand(latency):
    """FINISH aside, one LOAD of one 8-byte row: its chunk's 2 beats arrive read_return + L
    after the fetch's AR (cycle 1), it is dispatched fetch_to_dispatch after the last, its
    gate takes it dispatch_to_gate later and issues it 2 cycles after that (TOKENS,
    ISSUE); its AR goes out load_address later, its one beat comes L + read_return after
    that, it retires load_tail after the beat, and ``done`` rises done_cycles later."""
    t = TERMS
    fetched = 1 + latency + t.read_return + 1  # the chunk's second beat
    issue = fetched + t.fetch_to_dispatch + t.dispatch_to_gate + 2
    beat = issue + t.load_address + latency + t.read_return
    expected = beat + t.load_tail + t.done_cycles
    program = [Load(buffer=Buffer.SPAD, line=0, dram_addr=0, rows=1, row_len=4, stride=4),
               Finish()]
    assert _cycles(program, latency) == expected


def test_a_gate_holds_its_unit_while_a_command_waits_for_tokens():
    """Two STOREs behind a COMPUTE they wait for (pop_prev on the first): the second STORE
    cannot be issued before the first, and so not before the COMPUTE retires, however early
    it was dispatched; with the token dropped (no pop) both STOREs go first."""
    compute = Compute(outer=8, inner=8, push_next=True)
    waiting = [compute, Store(line=0, dram_addr=0, rows=1, row_len=4, stride=4, pop_prev=True),
               Store(line=1, dram_addr=64, rows=1, row_len=4, stride=4), Finish()]
    free = [compute, Store(line=0, dram_addr=0, rows=1, row_len=4, stride=4),
            Store(line=1, dram_addr=64, rows=1, row_len=4, stride=4), Finish()]
    log_waiting, log_free = [], []
    trace_cycles(waiting, CONFIG, _step(), CostParameters(), TERMS, log_waiting)
    trace_cycles(free, CONFIG, _step(), CostParameters(), TERMS, log_free)
    compute_retired = log_waiting[0][5]
    assert log_waiting[1][4] > compute_retired  # the first STORE waits for the token
    assert log_waiting[2][4] > log_waiting[1][4]  # the second behind it, in order
    assert log_free[2][4] < compute_retired  # without the token both go at once


def test_a_pop_waits_for_the_matching_push():
    """The COMPUTE pops the token of the second LOAD (the first pushes none): it is issued
    after that LOAD retires, not after the first."""
    program = [Load(buffer=Buffer.SPAD, line=0, dram_addr=0, rows=16, row_len=4, stride=4),
               Load(buffer=Buffer.SPAD, line=16, dram_addr=64, rows=4, row_len=4, stride=4,
                    push_next=True),
               Compute(pop_prev=True), Finish()]
    log = []
    trace_cycles(program, CONFIG, _step(), CostParameters(), TERMS, log)
    second_load_retired = log[1][5]
    assert log[2][4] > second_load_retired


def test_the_store_unit_takes_at_most_its_stores_in_flight():
    """Six one-row STOREs at 48 cycles of DRAM latency: the store unit holds at most
    `StoreUnit.stores_in_flight` (4) STOREs that have not retired (hw/store_unit.py), so the
    fifth is issued the cycle after the first retires and the sixth after the second, while
    the first four go a few cycles apart. On the RTL of the held-out program
    `gemm4x8-systolic-ws-5banks/mttkrp.../lat48` the fifth of its five STOREs sends its AW
    61 cycles after the first (its waveform), which the timeline missed by 10.2% before."""
    from tensorforge.hw.store_unit import StoreUnit

    program = [Store(line=k, dram_addr=64 * k, rows=1, row_len=4, stride=4) for k in range(6)]
    log = []
    trace_cycles([*program, Finish()], CONFIG, _step(),
                 dataclasses.replace(CostParameters(), dram_latency_cycles=48), TERMS, log)
    issued, retired = [e[4] for e in log], [e[5] for e in log]
    window = StoreUnit.stores_in_flight
    assert window == 4
    assert all(b - a < 10 for a, b in zip(issued[:window - 1], issued[1:window], strict=True))
    assert issued[window] - issued[window - 1] > 40  # about the DRAM latency
    for k in range(window, len(program)):
        assert issued[k] == retired[k - window] + 1


@pytest.mark.parametrize("case", held_out_cases()[:24:3], ids=lambda c: c.name)
def test_more_latency_or_fewer_bursts_in_flight_is_never_faster(case):
    """Properties of real programs: a slower DRAM never speeds a program up, and neither
    does a DMA with fewer bursts in flight."""
    workload, mapping = case.workload(), case.resolve_mapping()
    program = generate(workload, mapping, case.config).instructions
    step = build_space(workload, mapping.choice, case.config, mapping.groups).step
    cycles = [trace_cycles(program, case.config, step,
                           rtl_parameters(latency_only(latency), case.config))
              for latency in (0, 16, 48, 128)]
    assert cycles == sorted(cycles), cycles
    narrow = dataclasses.replace(case.config, dma=dataclasses.replace(case.config.dma,
                                                                      outstanding=1))
    parameters = rtl_parameters(latency_only(48), case.config)
    assert trace_cycles(program, narrow, step, parameters) >= trace_cycles(
        program, case.config, step, parameters)


def test_a_memory_that_accepts_fewer_bursts_limits_them_like_the_dma():
    """Bursts in flight are the fewer of what the DMA issues and the memory accepts: a
    program on a memory taking 2 at a time is timed as on a DMA of 2 (an RTL run of the
    8x8 GEMM 64^3 at 128 cycles and 4 accepted: 7,581 cycles; without this the timeline
    said 4,926, the DMA's 16 in flight)."""
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.compiler.workload import parse_workload
    from tensorforge.dse.fidelity import model_cycles
    from tensorforge.memory import MemorySystem

    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=24,j=16,k=32")
    mapping = default_mapping(workload, CONFIG, latency_only(64))
    two = dataclasses.replace(CONFIG, dma=dataclasses.replace(CONFIG.dma, outstanding=2))
    accepting_two = MemorySystem(latency=64, bandwidth=None, outstanding=2)
    limited = model_cycles(workload, mapping, CONFIG, accepting_two)
    assert limited == model_cycles(workload, mapping, two, latency_only(64))
    assert limited > model_cycles(workload, mapping, CONFIG, latency_only(64))
