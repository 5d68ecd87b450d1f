"""The workload zoo: every entry parses, and model sizes agree with published MAC counts."""

from __future__ import annotations

import pytest

from tensorforge.compiler.zoo import (
    benchmark_cases,
    benchmark_kinds,
    list_models,
    load_model,
    load_workload,
)
from tensorforge.errors import WorkloadError

# Published multiply-accumulate counts (batch 1), independent of the zoo's tables.
PUBLISHED_MACS = {
    "resnet50": 4.1e9,  # He et al. 2016: 3.8 GFLOPs (multiply-adds) for v1; torchvision v1.5 4.1G
    "mobilenet_v1": 569e6,  # Howard et al. 2017, Table 1
    "mobilenet_v2": 300e6,  # Sandler et al. 2018, Table 4
    "xception": 8.4e9,  # Chollet 2017 (multiply-adds, via Keras' reported FLOPs)
    "bert_base": 11.2e9,  # 12 layers x (4 d^2 + 2 d ff) x 128 tokens + attention
    "vit_b16": 17.5e9,  # Dosovitskiy et al. 2021, Table 6 (17.5 GFLOPs)
}


def test_every_model_and_case_parses():
    assert {
        "resnet50",
        "mobilenet_v1",
        "mobilenet_v2",
        "xception",
        "dqn",
        "mlp",
        "transformer",
        "bert_base",
        "vit_b16",
        "unet",
    } <= set(list_models())
    for name in list_models():
        model = load_model(name)
        assert model.layers and all(layer.count >= 1 for layer in model.layers)
    assert set(benchmark_kinds()) == {"mttkrp", "ttm", "conv2d", "gemm", "gemv", "dot"}
    for kind in benchmark_kinds():
        assert len(benchmark_cases(kind)) == 10


@pytest.mark.parametrize(("name", "macs"), PUBLISHED_MACS.items())
def test_model_macs_match_published(name, macs):
    assert load_model(name).macs == pytest.approx(macs, rel=0.03)


@pytest.mark.parametrize(
    ("kind", "low", "high"),
    [
        ("mttkrp", 255e6, 5.9e9),
        ("ttm", 16e6, 8.6e9),
        ("conv2d", 87e6, 3.7e9),
        ("gemm", 16e3, 4.3e9),
    ],
)
def test_benchmarks_span_hasco_table1(kind, low, high):
    macs = [w.macs for w in benchmark_cases(kind)]
    assert macs == sorted(macs)
    assert macs[0] == pytest.approx(low, rel=0.06)
    assert macs[-1] == pytest.approx(high, rel=0.06)


def test_depthwise_and_dqn_layers():
    dw = load_model("mobilenet_v1").layer("dw1").workload
    assert dw.text == "C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]"
    k1 = load_model("dqn").layer("dqn_k1").workload
    assert k1.text == "C[k,x,y] += A[c,4*x+r,4*y+s] * B[k,c,r,s]"
    assert k1.shapes["A"] == (4, 84, 84)  # the Atari frame stack: 4 x 84 x 84


def test_lookup_errors_name_the_choices():
    with pytest.raises(WorkloadError, match="resnet50"):
        load_model("resnet51")
    with pytest.raises(WorkloadError, match="conv1"):
        load_workload("resnet50:nope")
    with pytest.raises(WorkloadError, match="mttkrp"):
        benchmark_cases("spmv")
    assert load_workload("gemm:0").macs == 16 * 32 * 32
