"""Whole-network programs (issue 18 item 4): a float torch CNN quantized post-training,
chained layer to layer through DRAM, run on the functional simulator (and the RTL, slow)
against a numpy integer reference that never sees the compiler, and close to the float
model's own output.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from network_configs import (
    OTHER_ARRAYS,
    CONV2D_2x3,
    PIPELINE_4x4,
    close_to_float,
    one_exact_program,
    one_exact_rtl_run,
)
from torch import nn

from tensorforge.api import simulate_model
from tensorforge.cli import main
from tensorforge.compiler.network import compile_network
from tensorforge.compiler.quantize import QMAX, quantize_model
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.errors import MappingError, WorkloadError
from tensorforge.isa import decode_program
from tensorforge.network_reference import conv2d
from tensorforge.sim.network_run import check_network


def small_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """conv3x3/s1+ReLU -> depthwise 3x3/s2+ReLU -> pointwise+ReLU -> global avg pool ->
    linear, on a 3x8x8 input."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.ReLU(),
        nn.Conv2d(8, 16, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return net, (torch.randn(1, 3, 8, 8),)


def test_small_cnn_on_the_functional_simulator():
    net, inputs = small_cnn(seed=7)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=7)
    assert result.match, (result.output, result.expected)
    assert result.cycles is None
    close_to_float(result)
    # one program: every layer (the pool too) reads its predecessor's output in place
    assert result.host_ops == ()
    assert len(result.instructions) == 1
    assert sum("previous layer's output" in line for line in result.layers) == 4
    assert len(np.unique(result.output)) > 5  # not all clamped


@OTHER_ARRAYS
def test_small_cnn_is_one_program_on_other_arrays(config):
    net, inputs = small_cnn(seed=7)
    result = simulate_model(net, inputs, config, backend="functional", seed=7)
    one_exact_program(result)


def test_pool_on_the_host_splits_the_program():
    net, inputs = small_cnn(seed=7)
    network = quantize_model(net, inputs, pool_on_device=False)
    program = compile_network(network, PIPELINE_4x4)
    with torch.no_grad():
        float_output = net(*inputs).numpy()
    result = check_network(program, inputs[0], float_output, "functional", seed=7)
    assert result.match
    close_to_float(result)
    assert result.host_ops == ("global_avg_pool (_6)", "flatten (_7)")
    assert len(result.instructions) == 2


NETWORKS = {
    "5x5 stride 2, 1x1 stride 2": lambda: nn.Sequential(
        nn.Conv2d(2, 5, 5, stride=2, padding=2), nn.ReLU6(),
        nn.Conv2d(5, 6, 1, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(6, 3)),
    "dilated, depthwise 5x5, no padding": lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3, dilation=2, padding=2, bias=False), nn.ReLU(),
        nn.Conv2d(4, 4, 5, groups=4, padding=2), nn.ReLU(), nn.Conv2d(4, 7, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 4)),
}


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_other_kernels_strides_and_activations(name):
    torch.manual_seed(3)
    net = NETWORKS[name]()
    inputs = (torch.randn(1, 2, 9, 9),)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=3)
    assert result.match, (result.output, result.expected)
    close_to_float(result)


class _Functional(nn.Module):
    """Functional activations, a flatten of a whole feature map into a linear layer."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, stride=2)
        self.b = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.fc = nn.Linear(6 * 3 * 3, 5)
        self.fc2 = nn.Linear(5, 4)

    def forward(self, x):
        x = torch.relu(self.b(nn.functional.relu(self.a(x))))
        x = nn.functional.relu6(self.fc(torch.flatten(x, 1)))
        return self.fc2(x)


class _MeanPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        return self.fc(self.a(x).relu().mean((2, 3)))


@pytest.mark.parametrize("module", [_Functional, _MeanPool])
def test_functional_forms_and_flatten_into_linear(module):
    torch.manual_seed(0)
    result = simulate_model(module(), (torch.randn(1, 3, 8, 8),), PIPELINE_4x4,
                            backend="functional")
    assert result.match, (result.output, result.expected)
    close_to_float(result)
    assert result.host_ops == ()  # the flatten reads the conv's output in place


def test_quantization_scheme():
    net, inputs = small_cnn(seed=1)
    network = quantize_model(net, inputs)
    kinds = [layer.kind for layer in network.layers]
    assert kinds == ["conv2d", "depthwise_conv2d", "conv2d", "global_avg_pool", "linear"]
    for layer in network.layers:
        flat = np.abs(layer.weight).reshape(layer.weight.shape[0], -1)
        if layer.kind == "global_avg_pool":
            assert (flat == 1).all()  # sums; the output stage divides by the 16 pixels
            assert layer.params.apply(np.array([[[16 * 5 + 8]]] * 16), 0, 32).ravel()[0] == 6
        else:  # per-output-channel scales use each channel's full range
            assert (flat.max(axis=1) == QMAX).all()
        # the requantization factor s_in * s_w / s_out is representable (below 1)
        assert (layer.params.multiplier > 0).all()
    relu = [layer.params.low.min() for layer in network.layers]
    assert relu == [0, 0, 0, -128, -128]
    q = network.quantize_input(inputs[0])
    assert q.min() >= -128 and q.max() == QMAX


def test_reference_convolution_is_torchs():
    """The integer reference's convolution against torch's, on small integers (exact in
    float64)."""
    rng = np.random.default_rng(5)
    a = rng.integers(-8, 8, (3, 7, 6))
    w = rng.integers(-8, 8, (4, 3, 3, 2))
    conv = (2, 1, 1, 0, 1, 2)  # stride, padding, dilation: (h, w) each
    want = torch.nn.functional.conv2d(torch.tensor(a[None], dtype=torch.float64),
                                      torch.tensor(w, dtype=torch.float64), stride=(2, 1),
                                      padding=(1, 0), dilation=(1, 2))[0].numpy()
    np.testing.assert_array_equal(conv2d(a, w, conv, depthwise=False), want)
    dw = rng.integers(-8, 8, (3, 3, 3))
    want = torch.nn.functional.conv2d(torch.tensor(a[None], dtype=torch.float64),
                                      torch.tensor(dw[:, None], dtype=torch.float64),
                                      padding=1, groups=3)[0].numpy()
    np.testing.assert_array_equal(conv2d(a, dw, (1, 1, 1, 1, 1, 1), depthwise=True), want)


def test_clear_errors():
    net, inputs = small_cnn(seed=1)
    with pytest.raises(MappingError, match="output pipeline"):
        compile_network(quantize_model(net, inputs), AcceleratorConfig(
            array=ArrayConfig(rows=4, cols=4)))
    with pytest.raises(WorkloadError, match="LPPool2d"):  # max, average pooling run
        quantize_model(nn.Sequential(nn.Conv2d(1, 2, 3), nn.LPPool2d(2, 2), nn.Flatten()),
                       (torch.randn(1, 1, 6, 6),))
    with pytest.raises(WorkloadError, match="tuple of one tensor"):
        quantize_model(net, inputs[0])


@pytest.mark.slow
@pytest.mark.rtl
def test_small_cnn_on_the_rtl():
    net, inputs = small_cnn(seed=7)
    one_exact_rtl_run(simulate_model(net, inputs, PIPELINE_4x4, seed=7))


def wide_depthwise_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """A 48-channel depthwise layer between pointwise ones: its channel is an outer loop, a
    3-line parameter block per channel, 144 lines, more than PIPELINE_4x4's 128."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(3, 48, 1), nn.ReLU(),
                        nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.ReLU6(),
                        nn.Conv2d(48, 8, 1))
    return net, (torch.randn(1, 3, 6, 6),)


@pytest.mark.parametrize("backend", ["functional", pytest.param("rtl", marks=pytest.mark.rtl)])
def test_wide_depthwise_layer_reloads_its_parameters(backend):
    """The depthwise layer's parameter blocks are LOADed per output tile, and the network is
    still one program, exact."""
    net, inputs = wide_depthwise_cnn(seed=5)
    program = compile_network(quantize_model(net, inputs), PIPELINE_4x4)
    (segment,) = program.segments
    transfers = [len(layer_program.params.transfers) for layer_program in segment.programs]
    assert transfers[0] == transfers[2] == 1 and transfers[1] > 1
    with torch.no_grad():
        float_output = net(*inputs).numpy()
    result = check_network(program, inputs[0], float_output, backend, seed=5)
    assert result.match, (result.output, result.expected)
    close_to_float(result)


def test_compile_a_zoo_model_as_one_program(tmp_path, capsys):
    """`compile --workload dqn`: both strided convolutions in one program (the first STOREs
    into the second's input region), checked on the functional simulator."""
    flags = ["compile", "--workload", "dqn", "--pe", "4x4", "--output-pipeline"]
    assert main([*flags, "--check", "--json", "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["check"]["equal"] and summary["host_ops"] == []
    (segment,) = summary["segments"]
    assert segment["layers"] == ["dqn_k1", "dqn_k2"]
    program = decode_program((tmp_path / "segment0.bin").read_bytes())
    assert len(program) == segment["instructions"]
    assert main(flags[:-1]) == 1
    assert "add --output-pipeline" in capsys.readouterr().err


def test_conv2d_intrinsic_chains_what_it_can_and_relays_the_rest():
    """On the conv2d intrinsic a convolution's output is channel-innermost and the depthwise
    choices read a pixel axis innermost: those links are host re-layouts, listed; the
    result is still exact."""
    net, inputs = small_cnn(seed=7)
    result = simulate_model(net, inputs, CONV2D_2x3, backend="functional", seed=7)
    assert result.match, (result.output, result.expected)
    assert result.host_ops and all(op.startswith("relayout") for op in result.host_ops)
    assert len(result.instructions) == len(result.host_ops) + 1


def test_a_layer_that_cannot_be_mapped_is_named():
    """A layer whose output-stage parameters leave no accumulator room: the error names it."""
    tiny = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4), output_pipeline=True,
                             scratchpad=ScratchpadConfig(capacity=2048, banks=4,
                                                         accumulator=256))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 40, 1))
    with pytest.raises(MappingError, match="^_0: .*parameter"):
        simulate_model(net, (torch.randn(1, 2, 4, 4),), tiny, backend="functional")
