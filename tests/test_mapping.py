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
