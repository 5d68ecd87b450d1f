"""Residual additions on the device (issue 18): ``z = clamp(requant(m_a*a + m_b*b))`` as a
pointwise layer over the channel-stacked skip and residual (`compiler.residual`), a ResNet
basic block as one program, checked against the numpy reference that never sees the
compiler (the functional simulator always, the 4x4 pipeline RTL under the ``rtl`` marker).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
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
from tensorforge.compiler.network import compile_network
from tensorforge.compiler.quantize import quantize_model
from tensorforge.compiler.residual import add_multipliers, add_weight
from tensorforge.errors import WorkloadError
from tensorforge.network_reference import add_output


class BasicBlock(nn.Module):
    """conv3x3+ReLU -> [conv3x3+ReLU -> conv3x3] + skip -> ReLU -> global avg pool ->
    linear (a ResNet basic block without batch norm, after a stem)."""

    def __init__(self, channels: int = 8, form: str = "iadd"):
        super().__init__()
        self.form = form
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, 5)

    def forward(self, x):
        x = F.relu(self.stem(x))
        out = self.conv2(torch.relu(self.conv1(x)))
        if self.form == "iadd":
            out += x
        elif self.form == "torch.add":
            out = torch.add(x, out)  # skip first
        else:
            out = out.add(x)
        return self.fc(torch.flatten(self.pool(F.relu(out)), 1))


def block(seed: int, form: str = "iadd") -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(seed)
    return BasicBlock(form=form).eval(), (torch.randn(1, 3, 8, 8),)


def test_multipliers_hold_the_scale_ratio_to_seven_bits():
    assert add_multipliers(0.02, 0.01) == (127, 64)  # 63.5 rounds to even
    assert add_multipliers(0.01, 0.03) == (42, 127)
    assert add_multipliers(1.0, 1e-6) == (127, 1)  # never 0
    weight = add_weight(3, (5, 7))
    np.testing.assert_array_equal(weight, [[5, 0, 0, 7, 0, 0], [0, 5, 0, 0, 7, 0],
                                           [0, 0, 5, 0, 0, 7]])


def test_add_layer_is_close_to_the_float_sum():
    """The integer add of two int8 tensors, dequantized, is within the ratio's rounding
    (the smaller operand's multiplier is off by at most half a step of ``s_large / 127``)
    plus one output step of the float sum, where the sum is inside the output range."""
    net, inputs = block(seed=3)
    network = quantize_model(net, inputs)
    add = next(layer for layer in network.layers if layer.kind == "add")
    assert add.inputs == ("stem", "conv2") and add.activation == "relu"
    rng = np.random.default_rng(0)
    skip, residual = rng.integers(-128, 128, (2, 8, 8, 8))
    s_a = next(x for x in network.layers if x.name == "stem").output_scale
    s_b = next(x for x in network.layers if x.name == "conv2").output_scale
    exact = np.maximum(s_a * skip + s_b * residual, 0)
    got = add_output(add, skip, residual) * add.output_scale
    ratio_error = 0.5 / 127 * max(s_a, s_b) * 128
    inside = exact < 127 * add.output_scale
    assert inside.mean() > 0.5
    assert np.abs(got - exact)[inside].max() <= ratio_error + add.output_scale
    # the device's block-diagonal weight computes the same accumulator
    stacked = np.concatenate([skip, residual]).reshape(16, -1)
    acc = (add.weight @ stacked).reshape(8, 8, 8)
    np.testing.assert_array_equal(add.params.apply(acc, 0, 32),
                                  add_output(add, skip, residual))


@pytest.mark.parametrize("form", ["iadd", "torch.add", "method"])
def test_basic_block_is_one_program_on_the_functional_simulator(form):
    net, inputs = block(seed=7, form=form)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=7)
    one_exact_program(result)
    assert any(line.startswith("add add") for line in result.layers)
    close_to_float(result)
    assert len(np.unique(result.output)) > 2


def test_the_skip_and_the_residual_share_one_region():
    """The stem's output lies where conv1 reads it and is the first half of the add's
    input; conv2 STOREs into the second half: no copy, no host op."""
    net, inputs = block(seed=7)
    program = compile_network(quantize_model(net, inputs), PIPELINE_4x4)
    (segment,) = program.segments
    names = [layer.name for layer in segment.layers]
    stem, conv1, conv2, add = (names.index(n) for n in ("stem", "conv1", "conv2", "add"))
    regions = segment.regions
    assert regions[stem]["C"] == regions[conv1]["A"] == regions[conv2]["C"] == regions[add]["A"]
    half = segment.layout(conv1, "A").nbytes
    assert segment.layout(add, "A").nbytes == 2 * half


@OTHER_ARRAYS
def test_basic_block_on_other_arrays(config):
    net, inputs = block(seed=2)
    result = simulate_model(net, inputs, config, backend="functional", seed=2)
    one_exact_program(result)


class TwoBlocks(nn.Module):
    """Two basic blocks in a row: the first add's output is the second block's skip."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(4))
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.relu(self.convs[1](F.relu(self.convs[0](x))) + x)
        x = F.relu(self.convs[3](F.relu(self.convs[2](x))) + x)
        return self.fc(x.mean((2, 3)))


def test_two_blocks_in_a_row_are_one_program():
    torch.manual_seed(1)
    result = simulate_model(TwoBlocks().eval(), (torch.randn(1, 3, 6, 6),), PIPELINE_4x4,
                            backend="functional", seed=1)
    one_exact_program(result)
    close_to_float(result)


class InputSkip(nn.Module):
    """A block whose skip is the network input: no device layer produces it."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))) + x)


def test_the_host_stacks_what_the_device_cannot_place():
    """Where the skip cannot share the add's region (the conv2d intrinsic's layouts; a skip
    that is the network input), the add starts a program whose input the host stacks from
    the two int8 tensors (``stack``): exact all the same."""
    net, inputs = block(seed=7)
    result = simulate_model(net, inputs, CONV2D_2x3, backend="functional", seed=7)
    assert result.match, (result.output, result.expected)
    assert "stack (add)" in result.host_ops
    torch.manual_seed(4)
    result = simulate_model(InputSkip().eval(), (torch.randn(1, 4, 6, 6),), PIPELINE_4x4,
                            backend="functional", seed=4)
    assert result.match, (result.output, result.expected)
    assert result.host_ops == ("stack (add)",) and len(result.instructions) == 2
    close_to_float(result)


class Concat(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = F.relu(self.a(x))
        return torch.cat([y, self.b(y)], dim=1)


class Projection(nn.Module):
    """A strided block whose shortcut is a 1x1 convolution of the block input."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.conv1 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.proj = nn.Conv2d(4, 8, 1, stride=2)

    def forward(self, x):
        x = F.relu(self.stem(x))
        return F.relu(self.conv2(F.relu(self.conv1(x))) + self.proj(x))


class AddConstant(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.a(x) + 1


def test_unsupported_graphs_are_named():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 6, 6),)
    with pytest.raises(WorkloadError, match=r"cat .*not supported.*residual additions"):
        quantize_model(Concat(), inputs)
    with pytest.raises(WorkloadError, match=r"add .*not supported"):
        quantize_model(AddConstant(), inputs)


@pytest.mark.parametrize("backend", ["functional", pytest.param("rtl", marks=pytest.mark.rtl)])
def test_projection_shortcut_is_one_program(backend):
    """The 1x1/s2 shortcut reads the block input where conv1 (3x3/s2) reads it (its padded
    region, `residual.reading_padded`); conv2, whose output only the add reads, STOREs into
    the stacked region's first half and the shortcut into its second."""
    torch.manual_seed(0)
    net, inputs = Projection().eval(), (torch.randn(1, 3, 8, 8),)
    network = quantize_model(net, inputs)
    proj = next(layer for layer in network.layers if layer.name == "proj")
    assert proj.inputs == ("stem",) and proj.workload.shapes["A"] == (4, 9, 9)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend=backend, seed=3)
    one_exact_program(result)
    close_to_float(result)


@pytest.mark.slow
@pytest.mark.rtl
def test_basic_block_on_the_rtl():
    net, inputs = block(seed=7)
    one_exact_rtl_run(simulate_model(net, inputs, PIPELINE_4x4, seed=7))
