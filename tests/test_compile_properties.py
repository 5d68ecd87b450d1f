"""Property: every kind x intrinsic x tensorize choice x random legal mapping is exact.

Random small shapes of each benchmark kind, compiled for each intrinsic that can implement
them, under every stage-0 tensorize choice the matcher enumerates and a random legal mapping,
must give the workload's numpy reference bit for bit on the functional simulator (which also
checks that the dependency tokens order every conflicting access).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import device_choices, library_mapping
from tensorforge.compiler.mapping import random_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig

KINDS = {
    "gemm": ("C[i,j] += A[i,k] * B[k,j]", "ijk"),
    "gemv": ("C[i] += A[i,k] * B[k]", "ik"),
    "dot": ("C[] += A[k] * B[k]", "k"),
    "conv": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "kcxyrs"),
    "conv_s2_pad": ("C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]", "kcxyrs"),
    "conv_s4": ("C[k,x,y] += A[c,4*x+r,4*y+s] * B[k,c,r,s]", "kcxyrs"),
    "depthwise": ("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "cxyrs"),
    "batched": ("C[b,i,j] += A[b,i,k] * B[b,k,j]", "bijk"),
    "ttm": ("C[i,j,k] += A[i,j,l] * B[l,k]", "ijkl"),
    "mttkrp": ("D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "ijkl"),
}
CONFIGS = {
    "gemm": AcceleratorConfig(array=ArrayConfig(rows=4, cols=4)),
    "gemv": AcceleratorConfig(intrinsic="gemv", array=ArrayConfig(rows=4, cols=2, dataflow="os")),
    "dot": AcceleratorConfig(intrinsic="dot", array=ArrayConfig(rows=2, cols=2, dataflow="os")),
    "conv2d": AcceleratorConfig(intrinsic="conv2d",
                                array=ArrayConfig(rows=2, cols=3, dataflow="os"),
                                scratchpad=ScratchpadConfig(capacity=4096, accumulator=4096)),
}


@st.composite
def workloads(draw):
    kind = draw(st.sampled_from(sorted(KINDS)))
    text, indices = KINDS[kind]
    sizes = {n: draw(st.integers(1, 4 if n in "rs" else 7)) for n in indices}
    if kind == "conv_s2_pad":
        extra = f",A={sizes['c']}x{2 * sizes['x']}x{2 * sizes['y'] + 1}"
    else:
        extra = ""
    return parse_workload(text, ",".join(f"{n}={v}" for n, v in sizes.items()) + extra)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(sorted(CONFIGS)), st.integers(0, 2**32 - 1))
def test_random_mappings_of_every_choice_are_exact(workload, intrinsic, seed):
    config = CONFIGS[intrinsic]
    rng = np.random.default_rng(seed)
    inputs = workload.random_inputs(rng)
    expected = workload.reference(inputs)
    for choice in device_choices(workload, config):
        mapping = random_mapping(workload, choice, config, rng)
        program = generate(workload, mapping, config)
        # buffers start from garbage: a program may read only lines it wrote itself
        result = program.run_functional(inputs, garbage=np.random.default_rng(seed))
        assert np.array_equal(result, expected), (seed, choice.describe(), mapping.to_json())


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_reduced_resnet50_layers_compile_exactly(seed):
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.compiler.zoo import load_model

    rng = np.random.default_rng(seed)
    config = CONFIGS["gemm"]
    layers = load_model("resnet50").layers
    layer = layers[int(rng.integers(len(layers)))]
    full = layer.workload
    # same text, channels and spatial sizes cut down so the simulator stays fast
    sizes = {n: (min(size, 5) if n in "xy" else min(size, 9)) for n, size in full.sizes.items()}
    workload = parse_workload(full.text, sizes)
    inputs = workload.random_inputs(rng)
    for mapper in (default_mapping, library_mapping):
        program = generate(workload, mapper(workload, config), config)
        result = program.run_functional(inputs, garbage=np.random.default_rng(seed))
        assert np.array_equal(result, workload.reference(inputs)), (
            layer.name, mapper.__name__, seed)
