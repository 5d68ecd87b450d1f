"""PyTorch import: exact workloads, MACs and host ops of a small mixed model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tensorforge.compiler.torch_import import from_torch
from tensorforge.compiler.workload import parse_workload


class Mixed(nn.Module):
    """conv (stride 2, pad 1) -> relu -> depthwise -> grouped 1x1 -> linear -> attention."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.grouped = nn.Conv2d(8, 4, 1, groups=2)
        self.fc = nn.Linear(16, 5)

    def forward(self, image: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        features = self.grouped(self.dw(torch.relu(self.conv(image))))  # 1 x 4 x 4 x 4
        tokens = self.fc(features.flatten(2))  # 1 x 4 x 5
        scores = torch.softmax(tokens @ tokens.transpose(1, 2), dim=-1)  # 1 x 4 x 4
        return torch.matmul(scores[0], values)  # 4 x 7


@pytest.fixture(scope="module")
def imported():
    torch.manual_seed(0)
    return from_torch(Mixed(), (torch.randn(1, 3, 8, 8), torch.randn(4, 7)), name="mixed")


def test_workloads_are_exact(imported):
    expected = [
        (
            "conv",
            "conv2d",
            "C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]",
            "k=8,c=3,x=4,y=4,r=3,s=3,A=3x8x8",
        ),
        (
            "dw",
            "depthwise_conv2d",
            "C[c,x,y] += A[c,x+r-1,y+s-1] * B[c,r,s]",
            "c=8,x=4,y=4,r=3,s=3,A=8x4x4",
        ),
        (
            "grouped",
            "grouped_conv2d",
            "C[g,k,x,y] += A[g,c,x+r,y+s] * B[g,k,c,r,s]",
            "g=2,k=2,c=4,x=4,y=4,r=1,s=1,A=2x4x4x4",
        ),
        ("fc", "linear", "C[t,j] += A[0,t,k] * B[j,k]", "t=4,k=16,j=5"),
        ("matmul", "matmul", "C[i,j] += A[0,i,k] * B[0,k,j]", "i=4,k=5,j=4"),
        ("matmul_1", "matmul", "C[i,j] += A[i,k] * B[k,j]", "i=4,k=4,j=7"),
    ]
    assert [(layer.name, layer.kind) for layer in imported.layers] == [e[:2] for e in expected]
    for layer, (_, _, text, sizes) in zip(imported.layers, expected, strict=True):
        reference = parse_workload(text, sizes)
        assert layer.workload.text == reference.text
        assert layer.workload.sizes == reference.sizes
        assert layer.workload.shapes == reference.shapes
    assert [layer.bias for layer in imported.layers] == [True, False, True, True, False, False]
    macs = [8 * 3 * 16 * 9, 8 * 16 * 9, 2 * 2 * 4 * 16, 4 * 16 * 5, 4 * 5 * 4, 4 * 4 * 7]
    assert imported.macs == sum(macs)
    assert imported.to_model().macs == sum(macs)


def test_other_ops_run_on_the_host(imported):
    ops = [op.op for op in imported.host_ops]
    assert ops == ["relu", "flatten", "transpose", "softmax", "getitem"]


@pytest.mark.parametrize(
    ("conv", "height"),
    [
        (nn.Conv2d(3, 6, 3, stride=2, padding=1, bias=False), 9),
        (nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=4, bias=False), 7),
        (nn.Conv2d(4, 6, (3, 2), padding=(1, 0), groups=2, bias=False), 6),
    ],
)
def test_conv_reference_equals_torch(conv, height):
    rng = np.random.default_rng(3)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(rng.integers(-4, 5, conv.weight.shape)).double())
    conv = conv.double()
    image = torch.from_numpy(rng.integers(-8, 9, (1, conv.in_channels, height, height))).double()
    layer = from_torch(nn.Sequential(conv), (image,)).layers[0]
    expected = conv(image).detach().numpy()[0].round().astype(np.int64)
    g, weight = conv.groups, conv.weight.detach().numpy().astype(np.int64)
    if layer.kind == "conv2d":
        inputs = {"A": image.numpy()[0], "B": weight}
    elif layer.kind == "depthwise_conv2d":
        inputs = {"A": image.numpy()[0], "B": weight[:, 0]}
    else:
        a = image.numpy()[0].reshape(g, -1, height, height)
        inputs = {"A": a, "B": weight.reshape(g, -1, *weight.shape[1:])}
    got = layer.workload.reference(inputs).reshape(expected.shape)
    assert np.array_equal(got, expected)
