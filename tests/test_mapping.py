"""Schedule primitives, Mapping legality, JSON round trips and random mappings."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.compiler.mapping import (
    Mapping,
    check_mapping,
    fuse,
    loop_nest,
    random_mapping,
    reorder,
    split,
    tensorize,
)
from tensorforge.compiler.matching import tensorize_choices
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.errors import MappingError

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=32,j=24,k=40")
CONFIG = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
CHOICE = next(c for c in tensorize_choices(GEMM, "gemm") if c.index_map["i"] == "i")


def test_primitives_transform_the_nest():
    nest = split(loop_nest(GEMM), "k", 16)
    assert [(loop.name, loop.extent) for loop in nest.loops] == [
        ("i", 32), ("j", 24), ("k.o", 3), ("k.i", 16)]
    nest = split(nest, "i", 8)
    nest = reorder(nest, ("k.o", "i.o", "i.i", "j", "k.i"))
    nest = fuse(nest, "k.o", "i.o")
    assert nest.loops[0].extent == 12 and nest.loops[0].indices == ("k", "i")
    nest = tensorize(nest, "i.i", CHOICE)
    assert nest.tensorized == 1
    assert "# tensorized sub-workload:" in nest.render()


@pytest.mark.parametrize("call, message", [
    (lambda n: split(n, "q", 2), "no loop named"),
    (lambda n: split(n, "k", 41), "factor of k must be 1..40"),
    (lambda n: reorder(n, ("i", "j")), "not a permutation"),
    (lambda n: fuse(n, "i", "k"), "must directly follow"),
    (lambda n: tensorize(n, "k", CHOICE), r"needs \['i', 'j'\]"),
])
def test_primitives_check_their_arguments(call, message):
    with pytest.raises(MappingError, match=message):
        call(loop_nest(GEMM))


def test_mapping_expands_to_primitives_and_round_trips_json():
    mapping = Mapping(CHOICE, (("i", 8), ("j", 24), ("k", 16)), ("i", "j", "k"))
    kinds = [p[0] for p in mapping.primitives(GEMM)]
    assert kinds == ["split", "split", "reorder", "tensorize"]
    nest = mapping.loop_nest(GEMM)
    assert nest.names()[: nest.tensorized] == ("i.o", "k.o")
    assert Mapping.from_json(mapping.to_json(), GEMM) == mapping


def test_capacity_errors_say_by_how_much():
    small = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4),
                              scratchpad=ScratchpadConfig(capacity=1024, accumulator=1024))
    mapping = Mapping(CHOICE, (("i", 32), ("j", 24), ("k", 40)), ("i", "j", "k"))
    with pytest.raises(MappingError, match=r"do not fit the scratchpad: .*\(\d+ too many"):
        check_mapping(GEMM, mapping, small)


def test_tiles_must_be_block_multiples_and_order_output_first():
    with pytest.raises(MappingError, match="multiple of its intrinsic block 4"):
        check_mapping(GEMM, Mapping(CHOICE, (("i", 6), ("j", 8), ("k", 8)), ("i", "j", "k")),
                      CONFIG)
    with pytest.raises(MappingError, match="reduction loop k"):
        check_mapping(GEMM, Mapping(CHOICE, (("i", 8), ("j", 8), ("k", 8)), ("k", "i", "j")),
                      CONFIG)


def test_unknown_choice_in_json_is_rejected():
    text = Mapping(CHOICE, (("i", 8), ("j", 8), ("k", 8)), ("i", "j", "k")).to_json()
    with pytest.raises(MappingError, match="not a legal choice"):
        Mapping.from_json(text.replace('"i": "i"', '"i": "k"'), GEMM)


@pytest.mark.parametrize("seed", range(5))
def test_random_mappings_are_legal(seed):
    rng = np.random.default_rng(seed)
    for choice in tensorize_choices(GEMM, "gemm"):
        mapping = random_mapping(GEMM, choice, CONFIG, rng)
        check_mapping(GEMM, mapping, CONFIG)


# ---------------------------------------------------------------------- default mapping


GEMM_8x8_WS = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "32KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 128, "max_burst": 16}})
GEMM_64 = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")


@pytest.mark.parametrize("memory", ["ideal", "ddr3"])
def test_one_tile_estimate_is_load_then_compute_then_store(memory):
    """With one tile nothing overlaps: the estimate is the plain sum of the units' work,
    counted by hand from the costs (8 LOADs of 64 rows per operand, 64 x 8 MAC steps of 8
    beats, 8 MAC instructions, a stationary change every 8 steps, a ZERO of the 512 C lines,
    512 C rows stored), plus the DRAM latency twice: the first data and the last write
    response (DDR3's 16 bursts in flight keep its 32 cycles off every other burst)."""
    from tensorforge.compiler.mappers import UnitCosts, estimate_cycles
    from tensorforge.compiler.tiling import build_tiling
    from tensorforge.memory import MemorySystem

    system = MemorySystem.preset(memory)

    choice = next(c for c in tensorize_choices(GEMM_64, "gemm") if c.index_map["i"] == "i")
    tiling = build_tiling(GEMM_64, choice, {"i": 64, "j": 64, "k": 64}, GEMM_8x8_WS)
    costs = UnitCosts.of(GEMM_8x8_WS)
    load = 512 * costs.load_row + 8 * costs.load_instruction
    compute = (512 * costs.step + 8 * costs.instruction + 64 * costs.stationary + costs.zero
               + 512 * costs.zero_line)
    store = 512 * costs.store_row
    expected = 2 * load + compute + store + 2 * system.latency
    assert estimate_cycles(GEMM_64, tiling, ("i", "j", "k"), GEMM_8x8_WS,
                           system) == pytest.approx(expected)


def test_default_mapping_double_buffers_a_compute_bound_gemm():
    """The default tiles the 64^3 GEMM so tile steps overlap (several steps, operands in two
    halves), instead of one tile that loads, computes and stores in turn; its estimate is
    below the one-tile mapping's and above the compute alone."""
    from tensorforge.compiler.mappers import default_mapping, estimate_cycles

    mapping = default_mapping(GEMM_64, GEMM_8x8_WS)
    tiling = check_mapping(GEMM_64, mapping, GEMM_8x8_WS)
    steps = int(np.prod([tiling.count(n) for n in "ijk"]))
    assert steps > 1 and 2 in dict(tiling.slots).values()
    one = Mapping(mapping.choice, (("i", 64), ("j", 64), ("k", 64)), ("i", "j", "k"))
    one_tiling = check_mapping(GEMM_64, one, GEMM_8x8_WS)
    chosen = estimate_cycles(GEMM_64, tiling, mapping.order, GEMM_8x8_WS)
    assert 64 * 64 * 64 / 64 < chosen < estimate_cycles(GEMM_64, one_tiling, one.order,
                                                        GEMM_8x8_WS)


def test_default_mapping_of_a_convolution_may_use_im2col():
    """A 14x14 image pads to 16 along a block of 8; fused with the other row (196 pixels) it
    pads to 200, so the default lowers the 3x3 convolution by im2col."""
    from tensorforge.compiler.mappers import default_mapping

    conv = parse_workload("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]",
                          "k=32,c=32,x=14,y=14,r=3,s=3")
    mapping = default_mapping(conv, GEMM_8x8_WS)
    assert mapping.groups and ("x", "y") in mapping.groups
    check_mapping(conv, mapping, GEMM_8x8_WS)
