"""The workload language: parsing, errors with carets, shapes, and the int64 reference."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorforge.compiler.workload import parse_sizes, parse_workload
from tensorforge.errors import WorkloadError

CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"


def naive(workload, inputs):
    """Independent golden model: one Python loop over the whole iteration space."""
    sizes = workload.sizes
    shapes = workload.shapes
    out = np.zeros(shapes[workload.output.tensor], dtype=np.int64)
    names = list(sizes)
    for point in itertools.product(*(range(sizes[n]) for n in names)):
        at = dict(zip(names, point, strict=True))
        product = 1
        for access in workload.inputs:
            coord = tuple(
                sum(c * at[i] for i, c in dim.terms) + dim.constant for dim in access.dims
            )
            shape = shapes[access.tensor]
            if any(not 0 <= v < n for v, n in zip(coord, shape, strict=True)):
                product = 0
                break
            product *= int(inputs[access.tensor][coord])
        out[tuple(at[d.indices[0]] for d in workload.output.dims)] += product
    return out


def test_conv_fields():
    w = parse_workload(CONV, "k=64,c=64,x=56,y=56,r=3,s=3", name="conv")
    assert w.spatial_indices == ("k", "x", "y")
    assert w.reduction_indices == ("c", "r", "s")
    assert w.shapes == {"C": (64, 56, 56), "A": (64, 58, 58), "B": (64, 64, 3, 3)}
    assert w.macs == 64 * 64 * 56 * 56 * 9
    assert w.inputs[0].dims[1].coefs == {"x": 1, "r": 1}
    again = parse_workload(w.text, w.sizes_text, name="conv")
    assert again == w


def test_strided_shape_and_three_operands():
    w = parse_workload("C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]", "k=2,c=3,x=5,y=4,r=3,s=1")
    assert w.shapes["A"] == (3, 2 * 4 + 2 + 1, 2 * 3 + 0 + 1)
    m = parse_workload("D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "i=2,j=3,k=4,l=5")
    assert m.reduction_indices == ("k", "l") and m.macs == 120


def test_parse_sizes_and_shapes():
    assert parse_sizes("k=64, c=3,A=3x5x5") == {"k": 64, "c": 3, "A": (3, 5, 5)}


def test_padding_matches_torch_convention():
    rng = np.random.default_rng(7)
    w = parse_workload("C[x] += A[x+r-1] * B[r]", "x=5,r=3,A=5")
    a, b = rng.integers(-9, 9, 5), rng.integers(-9, 9, 3)
    padded = np.concatenate([[0], a, [0]])
    expected = [int(padded[x : x + 3] @ b) for x in range(5)]
    assert w.reference({"A": a, "B": b}).tolist() == expected


@pytest.mark.parametrize(
    ("text", "sizes", "column", "words"),
    [
        ("C[i] += A[i,k] * B[k", "i=2,k=2", 21, "expected"),
        ("C[i+1] += A[i] * B[i]", "i=2", 3, "not a plain index"),
        ("C[i] += A[x*r]", "i=1,x=1,r=1", 11, "not affine"),
        ("C[i] += A[i] $ B[i]", "i=1", 14, "unexpected character"),
        ("C[i] += A[i,k] * B[k]", "i=2", 13, "k has no size"),
        ("C[i] += C[i] * B[i]", "i=2", 9, "also an input"),
    ],
)
def test_errors_point_at_the_column(text, sizes, column, words):
    with pytest.raises(WorkloadError) as caught:
        parse_workload(text, sizes)
    message = str(caught.value)
    assert words in message and f"column {column}" in message
    lines = message.splitlines()
    assert lines[1].strip() == text
    assert lines[2].index("^") - lines[1].index(text[0]) == column - 1


@pytest.mark.parametrize(
    ("text", "sizes", "words"),
    [
        ("C[i] += A[i,k] * A[k]", "i=2,k=2", "used with 2 and 1 dimensions"),
        ("C[i] += A[i,k] * B[k]", "i=2,k=2,q=3", "q is not an index"),
        ("C[i] += A[i,k] * B[k]", "i=2,k=0", "positive"),
        ("C[i] += A[i,k] * B[k]", "i=2,k=2,A=3", "indexed with 2"),
        ("C[i,i] += A[i] * B[i]", "i=2", "twice"),
    ],
)
def test_inconsistent_sizes_are_rejected(text, sizes, words):
    with pytest.raises(WorkloadError, match=words):
        parse_workload(text, sizes)


def test_bad_size_text_has_caret():
    with pytest.raises(WorkloadError, match="column 5") as caught:
        parse_sizes("i=2,k=,q=3")
    assert caught.value.args[0].splitlines()[2].index("^") == 4 + 4


def test_reference_checks_inputs():
    w = parse_workload("C[i] += A[i,k] * B[k]", "i=2,k=3")
    with pytest.raises(WorkloadError, match="missing"):
        w.reference({"A": np.zeros((2, 3))})
    with pytest.raises(WorkloadError, match="shape"):
        w.reference({"A": np.zeros((2, 3)), "B": np.zeros(4)})


def test_scalar_output_and_gemm_reference():
    rng = np.random.default_rng(1)
    dot = parse_workload("C[] += A[k] * B[k]", "k=7")
    inputs = dot.random_inputs(rng)
    assert dot.reference(inputs).shape == ()
    assert int(dot.reference(inputs)) == int(inputs["A"] @ inputs["B"])
    gemm = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=3,j=4,k=5")
    inputs = gemm.random_inputs(rng, -3, 3)
    assert np.all(np.abs(inputs["A"]) <= 3)
    assert np.array_equal(gemm.reference(inputs), inputs["A"] @ inputs["B"])


TEMPLATES = [
    "C[k,x,y] += A[c,{s}*x+r{o},{s}*y+s{o}] * B[k,c,r,s]",
    "C[c,x,y] += A[c,{s}*x+r{o},y+s] * B[c,r,s]",
    "D[i,j] += A[i,k,l] * B[l,j] * C[k,j]",
    "C[i,j,k] += A[i,j,l] * B[l,k]",
    "C[i] += A[{s}*i+k{o}] * B[k]",
]


@settings(max_examples=40, deadline=None)
@given(
    template=st.sampled_from(TEMPLATES),
    stride=st.integers(1, 2),
    offset=st.integers(-1, 1),
    seed=st.integers(0, 2**31),
)
def test_reference_equals_naive_loops(template, stride, offset, seed):
    rng = np.random.default_rng(seed)
    text = template.format(s=stride, o=f"{offset:+d}" if offset else "")
    sizes = {i: int(rng.integers(1, 4)) for i in sorted(set(re.findall(r"\b[a-z]\b", text)))}
    workload = parse_workload(text, sizes)
    inputs = workload.random_inputs(rng)
    assert np.array_equal(workload.reference(inputs), naive(workload, inputs))
