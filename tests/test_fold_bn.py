"""Batch norm folded into the convolution before it (issue 18, `compiler.fold_bn`): the folded
graph against the original module in float (torch, eval mode), then conv -> bn -> ReLU
networks on the device, checked against the numpy integer reference that never sees the
compiler (the functional simulator always, the 4x4 pipeline RTL under the ``rtl`` marker).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from network_configs import PIPELINE_4x4, close_to_float, one_exact_program, one_exact_rtl_run
from torch import fx, nn

from tensorforge.api import simulate_model
from tensorforge.compiler.fold_bn import fold_batch_norms
from tensorforge.compiler.quantize import quantize_model
from tensorforge.errors import WorkloadError


def trained(module: nn.Module) -> nn.Module:
    """``module`` with every batch norm's statistics and affine parameters drawn away from
    their initial 0 / 1 (as training leaves them), in eval mode."""
    for norm in module.modules():
        if isinstance(norm, nn.BatchNorm2d):
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.3, 2.0)
            if norm.affine:
                norm.weight.data.uniform_(0.5, 1.5)
                norm.bias.data.uniform_(-0.3, 0.3)
    return module.eval()


class FunctionalNorm(nn.Module):
    """``F.batch_norm`` over module attributes, after a bias-free depthwise convolution."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.norm = nn.BatchNorm2d(4)

    def forward(self, x):
        y = F.batch_norm(self.conv(x), self.norm.running_mean, self.norm.running_var,
                         self.norm.weight, self.norm.bias, False, 0.1, self.norm.eps)
        return F.relu(y)


FOLDABLE = {
    "conv-bn-relu": lambda: nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6),
                                          nn.ReLU(), nn.Conv2d(6, 5, 1, stride=2),
                                          nn.BatchNorm2d(5)),
    "depthwise, no bias, no affine": lambda: nn.Sequential(
        nn.Conv2d(4, 4, 3, groups=4, bias=False), nn.BatchNorm2d(4, affine=False, eps=1e-3),
        nn.ReLU6()),
    "functional": FunctionalNorm,
}


@pytest.mark.parametrize("name", sorted(FOLDABLE))
def test_folded_graph_equals_the_module_in_float(name):
    torch.manual_seed(0)
    module = trained(FOLDABLE[name]())
    weights = {key: value.clone() for key, value in module.state_dict().items()}
    x = torch.randn(1, 4, 7, 7)
    folded = fold_batch_norms(fx.symbolic_trace(module))
    ops = {node.op for node in folded.graph.nodes}
    assert "get_attr" not in ops  # the functional form's statistics went with it
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert not any(node.target is F.batch_norm for node in folded.graph.nodes)
    with torch.no_grad():
        torch.testing.assert_close(folded(x), module(x), atol=1e-5, rtol=1e-5)
    # the caller's module is unchanged
    for key, value in module.state_dict().items():
        assert torch.equal(value, weights[key]), key


def test_the_fold_is_torchs():
    """The folded weight and bias equal torch's own ``fuse_conv_bn_eval``."""
    torch.manual_seed(1)
    module = trained(nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5)))
    folded = fold_batch_norms(fx.symbolic_trace(module)).get_submodule("0")
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(module[0], module[1])
    torch.testing.assert_close(folded.weight, fused.weight)
    torch.testing.assert_close(folded.bias, fused.bias)


def bn_cnn(seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """conv3x3-bn-ReLU (3 -> 8, 8x8) -> depthwise 3x3/s2-bn-ReLU6 -> pointwise-bn-ReLU ->
    global average pool -> linear (8 -> 5)."""
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU6(),
        nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    return trained(net), (torch.randn(1, 3, 8, 8),)


def test_conv_bn_relu_cnn_is_one_exact_program():
    net, inputs = bn_cnn(seed=5)
    network = quantize_model(net, inputs)
    assert [(layer.kind, layer.activation) for layer in network.layers] == [
        ("conv2d", "relu"), ("depthwise_conv2d", "relu6"), ("conv2d", "relu"),
        ("global_avg_pool", "none"), ("linear", "none")]  # each bn folded, its ReLU fused
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=5)
    one_exact_program(result)
    close_to_float(result)


def test_a_training_mode_module_runs_with_its_running_statistics():
    net, inputs = bn_cnn(seed=6)
    with torch.no_grad():
        eval_output = net(inputs[0])
    result = simulate_model(net.train(), inputs, PIPELINE_4x4, backend="functional", seed=6)
    assert not net.training  # simulate_model put it in eval mode
    torch.testing.assert_close(torch.tensor(result.float_output).reshape(eval_output.shape),
                               eval_output.double())
    one_exact_program(result)
    close_to_float(result)


class BatchNormBlock(nn.Module):
    """A ResNet basic block with batch norm after a conv-bn-ReLU stem:
    [conv3x3-bn-ReLU -> conv3x3-bn] + skip -> ReLU -> global average pool -> linear."""

    def __init__(self, channels: int = 8):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, 5)

    def forward(self, x):
        x = F.relu(self.bn0(self.stem(x)))
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(out), 1), 1))


def test_resnet_block_with_batch_norm_is_one_program():
    torch.manual_seed(7)
    net, inputs = trained(BatchNormBlock()), (torch.randn(1, 3, 8, 8),)
    network = quantize_model(net, inputs)
    assert [layer.kind for layer in network.layers] == [
        "conv2d", "conv2d", "conv2d", "add", "global_avg_pool", "linear"]
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=7)
    one_exact_program(result)
    close_to_float(result)


class NormOfInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.conv = nn.BatchNorm2d(3), nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.conv(self.norm(x))


class SharedConvOutput(nn.Module):
    """The convolution's output is read by the batch norm and by the addition."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm, self.out = nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.Conv2d(3, 2, 1)

    def forward(self, x):
        y = self.conv(x)
        return self.out(self.norm(y) + y)


class TrainingNorm(FunctionalNorm):
    def forward(self, x):
        return F.batch_norm(self.conv(x), self.norm.running_mean, self.norm.running_var,
                            training=True)


@pytest.mark.parametrize("module,match", [
    (NormOfInput, r"norm \(batch norm\) normalizes x, not a Conv2d's output"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.BatchNorm2d(4)),
     r"normalizes _1, not a Conv2d's output"),
    (SharedConvOutput, r"cannot be folded into conv: .*also used by add"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4, track_running_stats=False)),
     r"track_running_stats=True"),
    (TrainingNorm, r"training=False"),
], ids=["input", "after relu", "shared", "no running stats", "training"])
def test_unfoldable_batch_norms_are_named(module, match):
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3 if module is not TrainingNorm else 4, 6, 6),)
    with pytest.raises(WorkloadError, match=match):
        quantize_model(module(), inputs)


@pytest.mark.rtl
def test_conv_bn_relu_avg_pool_cnn_on_the_rtl():
    """conv3x3-bn-ReLU -> AvgPool2d(2) -> conv3x3-bn-ReLU -> AvgPool2d(3, 2, 1) -> linear."""
    torch.manual_seed(13)
    net = trained(nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AvgPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AvgPool2d(3, 2, 1), nn.Flatten(), nn.Linear(8 * 2 * 2, 5)))
    result = simulate_model(net, (torch.randn(1, 3, 8, 8),), PIPELINE_4x4, seed=13)
    one_exact_rtl_run(result)
    print(f"{sum(result.instructions)} instructions, {result.cycles} cycles, "
          f"{result.summary()['max_abs_error_vs_float']:.4f} from float")
