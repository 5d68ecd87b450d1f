"""Two-step matching: HASCO Figure 4, MTTKRP on GEMV, counts by hand, and every choice executed."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from tensorforge.compiler.matching import (
    intrinsic_workload,
    tensorize_choices,
    why_illegal,
)
from tensorforge.compiler.tst import build_tst, stages
from tensorforge.compiler.workload import parse_workload

# The intrinsic texts, written out here so the tests do not depend on tensorforge.intrinsics.
DOT = "C[o] += A[k] * B[k]"
GEMV = "C[i] += A[i,k] * B[k]"
GEMM = "C[i,j] += A[i,k] * B[k,j]"
CONV2D = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
INTRINSICS = {"dot": DOT, "gemv": GEMV, "gemm": GEMM, "conv2d": CONV2D}


def intrinsic(name):
    text = INTRINSICS[name]
    return parse_workload(text, dict.fromkeys(re.findall(r"\b[a-z]\b", text), 2), name=name)


def evaluate(coord_dims, at):
    return tuple(sum(c * at[i] for i, c in d.terms) + d.constant for d in coord_dims)


def run_choice(stage, intr, choice, inputs):
    """Execute ``choice`` literally: gather intrinsic operands per outer point, run, scatter.

    Independent of the matcher's reasoning: it only uses the index and operand mappings, and
    fails if one intrinsic element would need two different workload elements.
    """
    sizes = stage.sizes
    mapping = choice.index_map
    intr_sizes = {i: sizes[mapping[i]] if i in mapping else 1 for i in intr.indices}
    local = parse_workload(intr.text, intr_sizes)
    outer = [i for i in stage.indices if i not in mapping.values()]
    shapes = stage.shapes
    out = np.zeros(shapes[stage.output.tensor], dtype=np.int64)
    accesses = dict(choice.operands)
    for point in itertools.product(*(range(sizes[i]) for i in outer)):
        fixed = dict(zip(outer, point, strict=True))
        arrays = {}
        for access in local.inputs:
            target = accesses[access.tensor]
            array = np.zeros(local.shapes[access.tensor], dtype=np.int64)
            source: dict[tuple, tuple] = {}
            names = access.indices
            for values in itertools.product(*(range(intr_sizes[n]) for n in names)):
                at_i = dict(zip(names, values, strict=True))
                at_w = {**fixed, **{mapping[n]: v for n, v in at_i.items() if n in mapping}}
                u, w = evaluate(access.dims, at_i), evaluate(target.dims, at_w)
                assert source.setdefault(u, w) == w, "one intrinsic element, two workload ones"
                shape = shapes[target.tensor]
                if all(0 <= a < n for a, n in zip(w, shape, strict=True)):
                    array[u] = inputs[target.tensor][w]
            arrays[access.tensor] = array
        result = local.reference(arrays)
        names = local.output.indices
        for values in itertools.product(*(range(intr_sizes[n]) for n in names)):
            at_i = dict(zip(names, values, strict=True))
            at_w = {**fixed, **{mapping[n]: v for n, v in at_i.items() if n in mapping}}
            out[evaluate(accesses[local.output.tensor].dims, at_w)] += result[values]
    return out


def test_intrinsic_workloads_come_from_the_lead_module():
    for name, text in INTRINSICS.items():
        assert intrinsic_workload(name).text == parse_workload(text, intrinsic(name).sizes).text


# ---- HASCO Figure 4: GEMM L = M x N with a GEMV intrinsic


GEMM_W = parse_workload("L[i,j] += M[i,k] * N[k,j]", "i=3,j=4,k=5", name="gemm")


def test_figure4_choices():
    gemv = intrinsic("gemv")
    # 1: columns of N are the vectors.
    assert why_illegal(GEMM_W, gemv, {"A": "M", "B": "N"}, {"i": "i", "k": "k"}) is None
    # 2: rows of N as the vectors: the reduction k would run along N's j -- wrong results.
    reason = why_illegal(GEMM_W, gemv, {"A": "M", "B": "N"}, {"i": "i", "k": "j"})
    assert reason is not None and "k" in reason
    # 3: rows of M as vectors, N transposed as the matrix.
    assert why_illegal(GEMM_W, gemv, {"A": "N", "B": "M"}, {"i": "j", "k": "k"}) is None
    choices = tensorize_choices(GEMM_W, gemv)
    found = {(tuple(c.operand_map.items()), c.indices) for c in choices}
    assert found == {
        ((("C", "L"), ("A", "M"), ("B", "N")), (("i", "i"), ("k", "k"))),
        ((("C", "L"), ("A", "N"), ("B", "M")), (("i", "j"), ("k", "k"))),
    }
    third = next(c for c in choices if c.operand_map["A"] == "N")
    assert third.transposed == ("A",)
    # 4: tiling M and N is choice 1 with i and k split, not a new choice: run it in tiles.
    first = next(c for c in choices if c.operand_map["A"] == "M")
    rng = np.random.default_rng(4)
    inputs = GEMM_W.random_inputs(rng)
    m, n = inputs["M"], inputs["N"]
    tiled = np.zeros((3, 4), dtype=np.int64)
    for j, i0, k0 in itertools.product(range(4), range(0, 3, 2), range(0, 5, 2)):
        tiled[i0 : i0 + 2, j] += m[i0 : i0 + 2, k0 : k0 + 2] @ n[k0 : k0 + 2, j]
    assert first.outer == ("j",)
    assert np.array_equal(tiled, GEMM_W.reference(inputs))


def test_gemm_on_gemm_is_identity_and_transposed_swap():
    choices = tensorize_choices(GEMM_W, intrinsic("gemm"))
    # By hand: k must go to k (the only reduction); i must go to an index of the output and of
    # A's partner only: i (A=M) or j (A=N, the swap computing L^T = N^T M^T).
    assert [(c.operand_map["A"], c.index_map) for c in choices] == [
        ("M", {"i": "i", "j": "j", "k": "k"}),
        ("N", {"i": "j", "j": "i", "k": "k"}),
    ]
    assert all(c.complete and c.outer == () for c in choices)


CONV_W = parse_workload(
    "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=2,c=2,x=2,y=3,r=2,s=2", name="conv"
)


def test_structure_matching_rejects_indices_sharing_a_dimension():
    gemm = intrinsic("gemm")
    # HASCO's example: i->y and k->s put y and s, which meet at y+s's add node, on one GEMM.
    reason = why_illegal(CONV_W, gemm, {"A": "A", "B": "B"}, {"i": "y", "j": "k", "k": "s"})
    assert "add" in reason
    assert why_illegal(CONV_W, gemm, {"A": "A", "B": "B"}, {"i": "x", "j": "k", "k": "s"}) is None


def test_gemm_on_conv_count_by_hand():
    choices = tensorize_choices(CONV_W, intrinsic("gemm"))
    # i/j: one of x,y (with A) and k (with B); k: c, r or s but not the partner of the picked
    # x/y. Two operand orders: 2 x (3 - 1) x 2 = 8.
    got = {
        (c.operand_map["A"], c.index_map["i"], c.index_map["j"], c.index_map["k"]) for c in choices
    }
    expected = set()
    for image, partner in (("x", "r"), ("y", "s")):
        for red in "crs":
            if red != partner:
                expected |= {("A", image, "k", red), ("B", "k", image, red)}
    assert got == expected


STRIDED = parse_workload("C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]", "k=2,c=2,x=2,y=2,r=2,s=2")
DEPTHWISE = parse_workload("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=2,x=2,y=2,r=2,s=2")


def test_conv2d_on_conv_and_on_stride_two_only_padded():
    choices = tensorize_choices(CONV_W, intrinsic("conv2d"))
    assert sorted(c.index_map["x"] for c in choices) == ["x", "y"]  # identity, x/y transposed
    assert not any(c.padded for c in choices)
    padded = tensorize_choices(STRIDED, intrinsic("conv2d"))
    assert padded and all(c.padded for c in padded)
    for choice in padded:  # no window slides over a stride-2 dimension
        for pair in (("x", "r"), ("y", "s")):
            assert set(pair) & set(choice.padded), choice.describe()
    reason = why_illegal(
        STRIDED, intrinsic("conv2d"), {"A": "A", "B": "B"}, {i: i for i in "kcxyrs"}
    )
    assert "coefficient 2" in reason
    assert len(tensorize_choices(STRIDED, intrinsic("gemm"))) == 8


def test_dot_matches_any_reduction():
    assert len(tensorize_choices(GEMM_W, intrinsic("dot"))) == 2
    assert len(tensorize_choices(CONV_W, intrinsic("dot"))) == 6  # c, r, s x two orders
    outer = parse_workload("C[i,j] += A[i] * B[j]", "i=2,j=2")
    assert tensorize_choices(outer, intrinsic("dot")) == []


def test_mttkrp_gemv_four_loops_gemm_three():
    mttkrp = parse_workload(
        "D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "i=2,j=3,k=2,l=2", name="mttkrp"
    )

    def best_cover(choices):
        by_stage = [
            [set(c.index_map.values()) for c in choices if c.stage == s] + [set()] for s in range(2)
        ]
        return max(len(a | b) for a, b in itertools.product(*by_stage))

    gemv = tensorize_choices(mttkrp, intrinsic("gemv"))
    gemm = tensorize_choices(mttkrp, intrinsic("gemm"))
    assert {c.stage for c in gemv} == {0, 1}
    # only the A x B stage is a GEMM; the other has j in all three tensors: it pads GEMM's j
    assert {c.stage for c in gemm if not c.padded} == {0}
    assert {c.padded for c in gemm if c.stage == 1} == {("i",), ("j",)}  # or i, operands swapped
    assert best_cover(gemv) == 4  # i, k, l and j
    assert best_cover([c for c in gemm if not c.padded]) == 3  # i/k, l and j
    assert not any(c.complete for c in gemv + gemm)


CASES = [
    (GEMM_W, "dot"),
    (GEMM_W, "gemv"),
    (GEMM_W, "gemm"),
    (CONV_W, "dot"),
    (CONV_W, "gemv"),
    (CONV_W, "gemm"),
    (CONV_W, "conv2d"),
    (
        parse_workload("C[k,x,y] += A[c,2*x+r-1,y+s] * B[k,c,r,s]", "k=2,c=2,x=2,y=2,r=2,s=2"),
        "gemm",
    ),
    (parse_workload("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=2,x=2,y=2,r=2,s=2"), "gemv"),
    (parse_workload("C[i,j,k] += A[i,j,l] * B[l,k]", "i=2,j=2,k=2,l=3"), "gemm"),
    # padded choices: no workload index for some intrinsic index, or no sliding window
    (DEPTHWISE, "gemm"),
    (DEPTHWISE, "conv2d"),
    (STRIDED, "conv2d"),
    (GEMM_W, "conv2d"),
]


def test_padding_is_the_least_wasteful_fallback():
    """Padded choices appear only where nothing matches in full, and pad the fewest PEs."""
    assert not any(c.padded for c in tensorize_choices(GEMM_W, intrinsic("gemm")))
    assert {c.padded for c in tensorize_choices(DEPTHWISE, intrinsic("gemm"))} == {
        ("i",), ("j",)}
    sized = parse_workload(CONV2D, "k=4,c=4,x=1,y=4,r=1,s=3", name="conv2d")
    # a matrix product on CONV2D pads the window (s: 3 PEs' worth, x and r are 1 wide)
    assert {c.padded for c in tensorize_choices(GEMM_W, sized)} == {("x", "r", "s")}


@pytest.mark.parametrize(("workload", "name"), CASES)
def test_every_choice_computes_the_workload(workload, name):
    rng = np.random.default_rng(11)
    choices = tensorize_choices(workload, intrinsic(name))
    assert choices
    inputs = workload.random_inputs(rng, -5, 5)
    for choice in choices:
        assert np.array_equal(
            run_choice(workload, intrinsic(name), choice, inputs), workload.reference(inputs)
        ), choice.describe()


def test_mttkrp_stage_choices_compute_their_stage():
    mttkrp = parse_workload("D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "i=2,j=3,k=2,l=2")
    rng = np.random.default_rng(5)
    parts = stages(mttkrp)
    for choice in tensorize_choices(mttkrp, intrinsic("gemv")):
        stage = parts[choice.stage]
        inputs = stage.random_inputs(rng, -5, 5)
        got = run_choice(stage, intrinsic("gemv"), choice, inputs)
        assert np.array_equal(got, stage.reference(inputs)), choice.describe()


def test_describe_and_tst_render():
    choice = tensorize_choices(GEMM_W, intrinsic("gemv"))[1]
    assert choice.describe() == "gemv: i->j k->k | C=L[i,j] A=N[k,j]^T B=M[i,k] | outer loops: i"
    text = build_tst(CONV_W).render()
    assert "add" in text and text.splitlines()[0] == "accumulate +="


def test_cli_lists_choices_as_json(capsys):
    import json

    from tensorforge.cli import main

    argv = ["choices", "--workload", "L[i,j] += M[i,k] * N[k,j]", "--sizes", "i=4,j=4,k=4"]
    assert main([*argv, "--intrinsic", "gemv", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["indices"] for row in rows] == [{"i": "i", "k": "k"}, {"i": "j", "k": "k"}]
    assert rows[1]["transposed"] == ["A"] and rows[1]["outer"] == ["i"]
    assert rows[0]["padded"] == []
    depthwise = ["choices", "--workload", "C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "--sizes",
                 "c=2,x=4,y=4,r=3,s=3", "--intrinsic", "gemm", "--json"]
    assert main(depthwise) == 0
    assert {tuple(row["padded"]) for row in json.loads(capsys.readouterr().out)} == {
        ("i",), ("j",)}
    assert main(["choices", "--workload", "C[i] += A[i*k]", "--intrinsic", "dot"]) == 1
    assert "^" in capsys.readouterr().err
