"""The default mapper's estimate reads the memory system: burst slots, latency, and the choice
they lead to (checked against the code generator, the instruction-level timeline and RTL)."""

from __future__ import annotations

import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.mapping import Mapping, check_mapping
from tensorforge.compiler.mapping_estimate import BURST_ROUND_TRIP, TileBursts, UnitCosts
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_transfers import transfer_shape
from tensorforge.isa import Load, Store
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

IDEAL = MemorySystem.preset("ideal")
SLOW = MemorySystem(latency=128, bandwidth=None, outstanding=None)  # the DMA bounds bursts


def gemm_8x8(outstanding: int) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": "gemm",
        "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
        "scratchpad": {"capacity": "64KiB", "banks": 8, "accumulator": "16KiB"},
        "dma": {"bus_bits": 64, "max_burst": 16, "outstanding": outstanding},
    })


GEMM_64 = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")


def test_few_bursts_in_flight_pay_the_latency_per_burst():
    """64 one-beat bursts (rows that are not contiguous in DRAM): with 16 in flight and no
    latency the 64 lines stream at ``load_row`` each; with one in flight at 128 cycles every
    burst holds the only slot for the latency, the round trip and its beat."""
    fast = UnitCosts.of(gemm_8x8(16), IDEAL)
    slow = UnitCosts.of(gemm_8x8(1), SLOW)
    assert fast.transfer(64, fast.load_row, 8, 64, 64).busy == pytest.approx(
        64 * fast.load_row + 8)
    moved = slow.transfer(64, slow.load_row, 8, 64, 64)
    assert moved.busy == pytest.approx(64 * (128 + BURST_ROUND_TRIP + 1) + 8)
    assert moved.duration == pytest.approx(moved.busy + 128)
    # the same bytes in four full bursts hold the slot four times, not 64
    assert slow.transfer(64, slow.load_row, 8, 4, 64).busy == pytest.approx(
        4 * (128 + BURST_ROUND_TRIP + 16) + 8)


def test_unit_costs_take_the_tighter_burst_limit_and_the_bandwidth():
    costs = UnitCosts.of(gemm_8x8(16), MemorySystem(latency=64, bandwidth=4.0, outstanding=2))
    assert (costs.latency, costs.in_flight, costs.beat) == (64, 2, 2.0)  # 8 B beats at 4 B/cycle
    assert UnitCosts.of(gemm_8x8(4), IDEAL).in_flight == 4


def test_tile_bursts_are_what_the_code_generator_emits():
    """A one-tile mapping loads each operand once: its counted transfer is the program's."""
    config = gemm_8x8(16)
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=24,j=40,k=48")
    mapping = default_mapping(workload, config, IDEAL)
    whole = Mapping(mapping.choice, tuple(workload.sizes.items()), mapping.order)
    tiling = check_mapping(workload, whole, config)
    device = Lowering(workload, ()).device
    counted = TileBursts(device, whole.choice, config)
    program = generate(workload, whole, config)
    regions = {"A": program.operands[0], "B": program.operands[1], "C": program.output}
    for role, kind in (("A", Load), ("B", Load), ("C", Store)):
        region = regions[role]
        shapes = [transfer_shape(config, i) for i in program.instructions
                  if isinstance(i, kind) and region.base <= i.dram_addr < region.end]
        expected = (len(shapes), sum(len(s.bursts) for s in shapes),
                    sum(sum(s.bursts) for s in shapes))
        assert counted(role, tiling) == expected, role


def test_mapper_defaults_to_the_default_memory():
    config = gemm_8x8(1)
    assert default_mapping(GEMM_64, config) == default_mapping(GEMM_64, config, DEFAULT_MEMORY)


def test_at_high_latency_with_few_bursts_in_flight_the_mapper_shrinks_the_c_tile():
    """Hand-reasoned: with 4 bursts in flight at 128 cycles the store unit is the slowest
    (a C line is 4x an operand line, and each 16-beat burst holds a slot ~150 cycles), and
    it cannot start before the first C tile is computed, so a smaller C tile wins; at no
    latency the same DMA streams and compute sets the pace, so the larger tile of fewer
    reloads wins. The instruction-level timeline (checked against RTL) agrees the change is
    faster on the slow memory."""
    from tensorforge.dse.fidelity import model_cycles

    config = gemm_8x8(4)
    at_zero = default_mapping(GEMM_64, config, IDEAL)
    at_128 = default_mapping(GEMM_64, config, SLOW)

    def c_tile(mapping):
        tiles = dict(mapping.tiles)
        return tiles["i"] * tiles["j"]

    assert c_tile(at_128) < c_tile(at_zero)
    assert model_cycles(GEMM_64, at_128, config, SLOW) < model_cycles(
        GEMM_64, at_zero, config, SLOW)


@pytest.mark.rtl
def test_a_mapping_chosen_for_a_slow_memory_runs_correctly_on_rtl(random_seed):
    """The 4x4 accelerator of tests/test_rtl_run.py (its Verilator build is shared): at 128
    cycles and one burst in flight the mapper picks another tiling of the small GEMM than on
    the ideal memory; on that memory the RTL result still equals numpy."""
    from test_rtl_run import CONFIG as config
    from test_rtl_run import GEMM as workload

    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    memory = MemorySystem(latency=128, bandwidth=None, outstanding=1)
    chosen = default_mapping(workload, config, memory)
    assert chosen != default_mapping(workload, config, IDEAL)
    result, = run_programs_on_rtl(config, [RtlCase(workload, chosen, seed=random_seed)],
                                  RunOptions(memory=memory, seed=random_seed))
    assert result.match, f"{result.mismatch_count} elements differ (seed {random_seed})"
