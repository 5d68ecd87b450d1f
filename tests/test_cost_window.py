"""The cost models of the activation window (``scratchpad.activations``): the timeline
prices a LOAD or STORE there as the on-chip memory answers it (`dse/cost_trace.py`), the
events count no DRAM byte for it, and the area model prices the memory as scratchpad SRAM.
Its agreement with the RTL on whole networks: tests/test_network_on_chip.py (rtl)."""

from __future__ import annotations

import dataclasses

import pytest

from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig, ScratchpadConfig
from tensorforge.dse.area_power import SynthesisAreaPower, osu018_model
from tensorforge.dse.cost_dma import WINDOW_READ_DELAY
from tensorforge.dse.cost_model import CostParameters
from tensorforge.dse.cost_trace import TraceTerms, trace_cycles
from tensorforge.dse.memory_shapes import memory_cost
from tensorforge.dse.program_events import program_events
from tensorforge.isa import Buffer, Compute, ComputeMode, Finish, Load, Store

CONFIG = AcceleratorConfig.from_dict({  # 8-byte bus: a 16-byte instruction is 2 beats
    "array": {"rows": 4, "cols": 4},
    "scratchpad": {"capacity": 2048, "banks": 4, "accumulator": 1024, "activations": 4096},
    "dma": {"bus_bits": 64, "max_burst": 16}})
TERMS = TraceTerms()


def _step():
    from test_cost_trace import _step as step

    return step()


def _cycles(program, latency: int, log: list | None = None) -> float:
    parameters = dataclasses.replace(CostParameters(), dram_latency_cycles=latency)
    return trace_cycles(program, CONFIG, _step(), parameters, TERMS, log)


@pytest.mark.parametrize("latency", [0, 16, 64])
def test_one_window_load_by_hand(latency):
    """`test_cost_trace.test_one_load_by_hand` with the row in the window: the fetch still
    waits for DRAM, the LOAD's beat only WINDOW_READ_DELAY (2: the block RAM's read and the
    R register) after its AR, whatever the DRAM latency."""
    t = TERMS
    fetched = 1 + latency + t.read_return + 1
    issue = fetched + t.fetch_to_dispatch + t.dispatch_to_gate + 2
    beat = issue + t.load_address + WINDOW_READ_DELAY
    program = [Load(buffer=Buffer.SPAD, line=0, dram_addr=ACTIVATION_BASE, rows=1, row_len=4,
                    stride=4), Finish()]
    assert WINDOW_READ_DELAY == 2
    assert _cycles(program, latency) == beat + t.load_tail + t.done_cycles


def _round_trip(address: int) -> list:
    """Four one-row STOREs, then four LOADs of those rows, token-ordered."""
    stores = [Store(line=k, dram_addr=address + 64 * k, rows=1, row_len=4, stride=4)
              for k in range(4)]
    stores[-1] = dataclasses.replace(stores[-1], push_prev=True)
    loads = [Load(line=4 * k, dram_addr=address + 64 * k, rows=1, row_len=4, stride=4)
             for k in range(4)]
    loads[0] = dataclasses.replace(loads[0], pop_next=True)
    relay = Compute(mode=ComputeMode.ZERO, acc_base=8, pop_next=True, push_prev=True)
    return [*stores, relay, *loads, Finish()]


def test_window_traffic_does_not_wait_for_dram():
    """The same transfers through DRAM take longer the slower it is; through the window the
    program's cycles grow only with the fetch's (its own chunks, behind the latency)."""
    through_dram = [_cycles(_round_trip(0), latency) for latency in (16, 128)]
    on_chip = [_cycles(_round_trip(ACTIVATION_BASE), latency) for latency in (16, 128)]
    assert on_chip[0] < through_dram[0] and on_chip[1] < through_dram[1]
    assert on_chip[1] - on_chip[0] == 112  # the fetch's one wait
    assert through_dram[1] - through_dram[0] >= 3 * 112


def test_window_bursts_go_one_at_a_time():
    """The memory takes a read burst with the last beat of the one before (`AxiMemory`):
    four one-beat LOADs' beats lie WINDOW_READ_DELAY apart or more, while DRAM at no latency
    overlaps their addresses."""
    loads = [Load(line=4 * k, dram_addr=ACTIVATION_BASE + 64 * k, rows=1, row_len=4, stride=4)
             for k in range(4)]
    log: list = []
    _cycles([*loads, Finish()], 0, log)
    retired = [entry[5] for entry in log]
    assert all(b - a >= WINDOW_READ_DELAY for a, b in zip(retired, retired[1:], strict=False))


def test_window_transfers_are_not_dram_bytes():
    """A raw window STORE of 4 int32 rows (64 bytes) and a LOAD of 4 int8 rows (16 bytes):
    no DRAM byte but the fetch's; the window's bytes priced as scratchpad lines of 4 bytes."""
    program = [Store(line=0, dram_addr=ACTIVATION_BASE, rows=4, row_len=4, stride=4,
                     push_prev=True),
               Compute(mode=ComputeMode.ZERO, acc_base=8, pop_next=True, push_prev=True),
               Load(line=0, dram_addr=ACTIVATION_BASE, rows=4, row_len=4, stride=4,
                    pop_next=True), Finish()]
    events = program_events(program, CONFIG, _step())
    assert events["dram_bytes"] == 16 * len(program)  # the instructions fetched
    assert CONFIG.spad_line_bytes == 4
    # the STORE writes 64 / 4 lines' worth of the window; the LOAD reads 16 / 4 and writes
    # its 4 scratchpad lines as before
    assert events["spad_line_reads"] == 16 / 4 and events["spad_line_writes"] == 64 / 4 + 4
    plain = [dataclasses.replace(i, dram_addr=0) if isinstance(i, Load | Store) else i
             for i in program]
    assert program_events(plain, CONFIG, _step())["dram_bytes"] == 16 * len(program) + 64 + 16


@pytest.mark.parametrize("model", [SynthesisAreaPower(), osu018_model()], ids=["ihp", "osu"])
def test_window_memory_is_priced_as_scratchpad_sram(model):
    """No window, no line in the breakdown; with one, its area grows with its bytes, and on
    IHP it is the macros the flow would pick for its shape."""
    def config(nbytes: int) -> AcceleratorConfig:
        return AcceleratorConfig(output_pipeline=True,
                                 scratchpad=ScratchpadConfig(activations=nbytes))

    assert "activations" not in model.breakdown(config(0))
    small, large = (model.breakdown(config(n))["activations"] for n in (16384, 65536))
    assert 0 < small["area_um2"] < large["area_um2"]
    assert model(config(65536)).area_mm2 == pytest.approx(
        model(config(0)).area_mm2 + large["area_um2"] * 1e-6)
    if model.tech == "ihp-sg13g2":
        assert large["area_um2"] == memory_cost(config(65536), "activations.").macro_area_um2
