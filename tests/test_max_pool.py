"""Max pooling on the device (issue 18): ``max=`` workloads, MAX COMPUTEs (`isa.Reduction`),
the quantizer's ``MaxPool2d`` layers, checked against numpy references that never see the
compiler (the functional simulator always, the 4x4 pipeline RTL under the ``rtl`` marker).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from network_configs import PIPELINE_4x4, close_to_float, one_exact_program
from torch import nn

from tensorforge.api import simulate_model
from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import best_mapping, choice_mappings, default_mapping
from tensorforge.compiler.matching import tensorize_choices
from tensorforge.compiler.quantize import quantize_model
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.errors import MappingError, SimulationError, WorkloadError
from tensorforge.isa import Compute, ComputeMode, Finish, Reduction, decode
from tensorforge.network_reference import max_pool2d
from tensorforge.requant import requantize
from tensorforge.sim.functional import FunctionalSimulator


def pool_workload(channels: int, size: int, kernel: int, stride: int, padding: int):
    """A ``kernel`` x ``kernel`` max pool over a ``channels`` x ``size`` x ``size`` image."""
    out = (size + 2 * padding - kernel) // stride + 1
    window = ("x" if stride == 1 else f"{stride}*x") + "+r" + (f"-{padding}" if padding else "")
    text = f"C[c,x,y] max= A[c,{window},{window.replace('x', 'y').replace('r', 's')}] * B[c,r,s]"
    return parse_workload(text, {"c": channels, "x": out, "y": out, "r": kernel, "s": kernel,
                                 "A": (channels, size, size)})


def windows_max(a: np.ndarray, kernel: int, stride: int, padding: int) -> np.ndarray:
    """Each window's maximum, loop by loop, padded positions never chosen."""
    channels, size, _ = a.shape
    out = (size + 2 * padding - kernel) // stride + 1
    result = np.empty((channels, out, out), dtype=np.int64)
    for c in range(channels):
        for x in range(out):
            for y in range(out):
                rows = range(max(0, x * stride - padding),
                             min(size, x * stride - padding + kernel))
                cols = range(max(0, y * stride - padding),
                             min(size, y * stride - padding + kernel))
                result[c, x, y] = max(a[c, i, j] for i in rows for j in cols)
    return result


def test_max_workload_text_reference_and_checks():
    workload = pool_workload(3, 7, 3, 2, 1)
    assert workload.reduction == "max"
    assert workload.text == "C[c,x,y] max= A[c,2*x+r-1,2*y+s-1] * B[c,r,s]"
    again = parse_workload(workload.text, workload.sizes_text)
    assert again == workload
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (3, 7, 7))
    ones = np.ones((3, 3, 3), dtype=np.int64)
    # zero padding (the workload's semantics) is -inf padding on non-negative input
    relu = np.maximum(a, 0)
    assert (workload.reference({"A": relu, "B": ones}) == windows_max(relu, 3, 2, 1)).all()
    # without padding negative values stay
    plain = pool_workload(3, 7, 3, 2, 0)
    assert (plain.reference({"A": a, "B": ones}) == windows_max(a, 3, 2, 0)).all()
    # sums are unchanged by the new field
    assert parse_workload("C[i] += A[i,k] * B[k]", "i=2,k=3").reduction == "sum"
    with pytest.raises(WorkloadError, match="exactly two inputs"):
        parse_workload("D[i] max= A[i,k] * B[k] * C[k]", "i=2,k=3")


def test_reference_max_pool_is_torchs():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (4, 9, 9))
    for kernel, stride, padding in [(2, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 1)]:
        expected = F.max_pool2d(torch.tensor(a, dtype=torch.float64)[None], kernel, stride,
                                padding)[0].numpy()
        assert (max_pool2d(a, (kernel, kernel), (stride, stride, padding, padding, 1, 1))
                == expected).all()


def test_max_compute_encoding():
    """``reduce`` is the last field, zero on every program that does not take a max."""
    plain = Compute(outer=3, overwrite=True)
    assert plain.encode() >> 126 == 0
    maximum = Compute(outer=3, overwrite=True, reduce=Reduction.MAX)
    assert maximum.encode() == plain.encode() | 1 << 126
    assert decode(maximum.encode()) == maximum
    assert "reduce=MAX" in maximum.describe() and "reduce" not in plain.describe()


def test_functional_simulator_takes_the_max_lane_by_lane():
    """An accumulating MAX step keeps the larger value, an overwriting one writes the
    product; an accelerator without the output pipeline refuses MAX."""
    simulator = FunctionalSimulator(PIPELINE_4x4)
    simulator.spad[0] = [5, -3, 0, 0]  # A (gemm 4x4: i along lines, k along the line)
    simulator.spad[4] = [1, 0, 0, 0]  # B row k = 0: column 0 takes A's k = 0
    simulator.acc[0:4] = -7
    simulator.acc[0, 0] = 9
    step = Compute(a_base=0, b_base=4, acc_base=0, reduce=Reduction.MAX)

    def run(*program):
        simulator.run([*program, Finish()], bytearray())

    run(step)
    assert simulator.acc[0, 0] == 9 and simulator.acc[0, 1] == 0  # max(9, 5), max(-7, 0)
    simulator.acc[0, 0] = 2
    run(step)
    assert simulator.acc[0, 0] == 5
    simulator.acc[0, 0] = 50
    run(replace(step, overwrite=True))
    assert simulator.acc[0, 0] == 5 and simulator.acc[1, 0] == 0
    plain = FunctionalSimulator(AcceleratorConfig(array=ArrayConfig(rows=4, cols=4)))
    with pytest.raises(SimulationError, match="output_pipeline"):
        plain.run([step, Finish()], bytearray())


@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 0), (3, 2, 1), (2, 2, 1),
                                                   (3, 1, 1)])
@pytest.mark.parametrize("mapper", [default_mapping, best_mapping])
def test_max_pool_layer_on_the_functional_simulator(kernel, stride, padding, mapper):
    """A max-pool layer on the 4x4 pipeline, buffers starting from garbage: unpadded pools
    see negative values too, padded ones take post-ReLU (non-negative) input."""
    rng = np.random.default_rng(kernel * 10 + stride + padding)
    workload = pool_workload(5, 9, kernel, stride, padding)
    program = generate(workload, mapper(workload, PIPELINE_4x4), PIPELINE_4x4)
    assert all(i.reduce is Reduction.MAX for i in program.instructions
               if isinstance(i, Compute) and i.mode is ComputeMode.MAC)
    assert not any(isinstance(i, Compute) and i.mode is ComputeMode.ZERO
                   for i in program.instructions)  # the first tap overwrites
    a = rng.integers(0 if padding else -128, 128, workload.shapes["A"])
    ones = np.ones(workload.shapes["B"], dtype=np.int64)
    got = program.run_functional({"A": a, "B": ones}, garbage=np.random.default_rng(2))
    assert (got == windows_max(a, kernel, stride, padding)).all()


def test_max_choices_pad_the_intrinsic_reduction():
    """Every choice of a max workload leaves the intrinsic's reduction index at size 1 (one
    product per step and output); dot, whose only index is the reduction, has none."""
    workload = pool_workload(4, 8, 2, 2, 0)
    for intrinsic, reduction in (("gemm", {"k"}), ("gemv", {"k"}), ("conv2d", {"c", "r", "s"})):
        choices = tensorize_choices(workload, intrinsic)
        assert choices and all(reduction <= set(c.padded) for c in choices), intrinsic
    assert tensorize_choices(workload, "dot") == []
    dot = AcceleratorConfig(intrinsic="dot", array=ArrayConfig(rows=1, cols=4, dataflow="os"),
                            output_pipeline=True)
    with pytest.raises(MappingError, match="gemm, gemv or conv2d"):
        default_mapping(workload, dot)


def test_max_needs_the_pipeline_a_handing_out_dataflow_and_overwrite():
    workload = pool_workload(4, 8, 2, 2, 0)
    mapping = default_mapping(workload, PIPELINE_4x4)
    plain = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4),
                              scratchpad=PIPELINE_4x4.scratchpad)
    with pytest.raises(MappingError, match="output_pipeline=True"):
        generate(workload, mapping, plain)
    with pytest.raises(MappingError, match="overwrite=True"):
        generate(workload, mapping, PIPELINE_4x4, overwrite=False)
    output_stationary = AcceleratorConfig(
        array=ArrayConfig(rows=4, cols=4, dataflow="os"), scratchpad=PIPELINE_4x4.scratchpad,
        output_pipeline=True)
    with pytest.raises(MappingError, match="use dataflow ws"):
        generate(workload, mapping, output_stationary)
    # the mappers find nothing to offer there, and say why
    assert choice_mappings(workload, output_stationary) == []
    assert choice_mappings(workload, plain) == []
    with pytest.raises(MappingError, match="use dataflow ws"):
        default_mapping(workload, output_stationary)


def test_identity_output_stage_keeps_every_int8_value():
    values = np.arange(-128, 128)
    assert (requantize(values, 0, (1 << 31) - 1, 0, 0, -128, 127, acc_bits=32)
            == values).all()


# ------------------------------------------------------------------ networks


class _Functional(nn.Module):
    """conv+ReLU -> F.max_pool2d(3, 2, padding=1) -> conv -> mean -> linear."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, padding=1)
        self.b = nn.Conv2d(6, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.a(x)), 3, 2, padding=1)
        return self.fc(self.b(x).mean(dim=(2, 3)))


def pooled_cnn(pool: str, seed: int = 11) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """conv3x3+ReLU -> max pool -> conv3x3+ReLU -> global average pool -> linear, 3x8x8."""
    torch.manual_seed(seed)
    if pool == "functional":
        return _Functional(), (torch.randn(1, 3, 8, 8),)
    pooling = {"2": nn.MaxPool2d(2), "3/2/1": nn.MaxPool2d(3, 2, 1)}[pool]
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), pooling,
        nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    return net, (torch.randn(1, 3, 8, 8),)


def _check_model(result) -> None:
    one_exact_program(result)
    assert any(" max_pool [" in line for line in result.layers)
    close_to_float(result)


@pytest.mark.parametrize("pool", ["2", "3/2/1", "functional"])
def test_pooled_cnn_on_the_functional_simulator(pool):
    net, inputs = pooled_cnn(pool)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=11)
    _check_model(result)


def test_padded_pool_needs_a_relu_before_it():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(3, 2, 1), nn.Flatten(),
                        nn.Linear(4 * 3 * 3, 2))
    with pytest.raises(WorkloadError, match="after a ReLU"):
        quantize_model(net, (torch.randn(1, 3, 8, 8),))
    unpadded = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(4 * 3 * 3, 2))
    result = simulate_model(unpadded, (torch.randn(1, 3, 8, 8),), PIPELINE_4x4,
                            backend="functional", seed=0)
    assert result.match
    with pytest.raises(WorkloadError, match="dilation"):
        quantize_model(nn.Sequential(nn.MaxPool2d(2, dilation=2), nn.Flatten(),
                                     nn.Linear(12, 2)), (torch.randn(1, 3, 6, 6),))


@pytest.mark.rtl
@pytest.mark.parametrize("pool", ["2", "3/2/1"])
def test_pooled_cnn_on_the_rtl(pool):
    net, inputs = pooled_cnn(pool)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="rtl", seed=11)
    _check_model(result)
    assert result.cycles
    print(f"pool {pool}: {sum(result.instructions)} instructions, "
          f"{result.cycles} cycles")
