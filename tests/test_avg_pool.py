"""Average pooling on the device (issue 18, `compiler.pooling`): a depthwise convolution of
all-ones weights over each window, divided in the output stage, checked against torch's
``avg_pool2d`` (the rounding) and, in networks, against the numpy integer reference that
never sees the compiler (functional simulator).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from network_configs import PIPELINE_4x4, close_to_float, one_exact_program
from torch import nn

from tensorforge.api import simulate_model
from tensorforge.compiler.pooling import WindowPool, averaging_params, window_pool_layer
from tensorforge.compiler.quantize import quantize_model
from tensorforge.errors import WorkloadError
from tensorforge.network_reference import layer_output


@pytest.mark.parametrize("divisor", [2, 4, 6, 9, 16, 49])
def test_averaging_rounds_once_to_nearest(divisor):
    """Every sum an int8 window can hold, divided: within half a step of the exact mean, and
    exactly ``floor(sum / divisor + 1/2)`` away from ties."""
    sums = np.arange(-128 * divisor, 127 * divisor + 1)
    got = averaging_params(1, divisor).apply(sums[None], 0, 32)[0]
    assert np.abs(got - sums / divisor).max() <= 0.5
    ties = (2 * sums) % (2 * divisor) == divisor
    assert (got[~ties] == np.floor(sums[~ties] / divisor + 0.5)).all()


@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), (3, 1, 1), (2, 1, 0),
                                                   ((2, 3), (1, 2), (1, 0))])
def test_reference_average_pool_is_torchs_rounded(kernel, stride, padding):
    """The integer reference of an average pool layer equals torch's ``avg_pool2d`` of the
    same int8 tensor (zero padding counted) rounded to nearest (a tie either way)."""
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (3, 9, 8))
    want = F.avg_pool2d(torch.tensor(a, dtype=torch.float64)[None], kernel, stride,
                        padding)[0].numpy()

    def pair(v):
        return (v, v) if isinstance(v, int) else v

    pool = WindowPool("avg_pool", pair(kernel), pair(stride), pair(padding),
                      pair(kernel)[0] * pair(kernel)[1], False)
    layer = window_pool_layer("pool", pool, a.shape, (3, *want.shape[1:]), 1.0, False)
    got = layer_output(layer, a)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 0.5
    ties = np.isclose(want % 1, 0.5)
    assert (got[~ties] == np.round(want[~ties])).all()


class _Functional(nn.Module):
    """conv+ReLU -> F.avg_pool2d(3, 2, padding=1) -> conv -> F.avg_pool2d(2) -> linear."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, padding=1)
        self.b = nn.Conv2d(6, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.avg_pool2d(torch.relu(self.a(x)), 3, 2, padding=1)
        return self.fc(torch.flatten(F.avg_pool2d(self.b(x), 2), 1))


def _sequential(pool: nn.Module) -> nn.Module:
    """conv3x3+ReLU -> ``pool`` -> conv3x3 (no activation: negative input to the next pool)
    -> AvgPool2d(2) -> linear, on 3x8x8."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), pool,
        nn.Conv2d(8, 8, 3, padding=1), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 5))


AVERAGE_POOLED = {"2": lambda: _sequential(nn.AvgPool2d(2)),
                  "3/2/1": lambda: _sequential(nn.AvgPool2d(3, 2, 1)),
                  "functional": _Functional}


@pytest.mark.parametrize("pool", sorted(AVERAGE_POOLED))
def test_average_pooled_cnn_is_one_exact_program(pool):
    torch.manual_seed(11)
    net, inputs = AVERAGE_POOLED[pool](), (torch.randn(1, 3, 8, 8),)
    network = quantize_model(net, inputs)
    assert [layer.kind for layer in network.layers] == [
        "conv2d", "avg_pool", "conv2d", "avg_pool", "linear"]
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=11)
    one_exact_program(result)
    assert sum(" avg_pool [" in line for line in result.layers) == 2
    close_to_float(result)


def test_options_that_change_nothing_are_taken():
    """``ceil_mode`` where the windows tile the input, ``count_include_pad=False`` without
    padding, ``divisor_override`` (the output stage's divisor)."""
    torch.manual_seed(2)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                        nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
                        nn.AvgPool2d(2, divisor_override=3), nn.Flatten(), nn.Linear(16, 3))
    inputs = (torch.randn(1, 3, 8, 8),)
    pools = [layer for layer in quantize_model(net, inputs).layers if layer.kind == "avg_pool"]
    assert [int(p.params.multiplier[0]) for p in pools] == [round(2**31 / 4), round(2**31 / 3)]
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=2)
    one_exact_program(result)
    close_to_float(result)


@pytest.mark.parametrize("pool,match", [
    (nn.AvgPool2d(2, ceil_mode=True), "ceil_mode=True"),  # 7x7: a partial last window
    (nn.AvgPool2d(3, 2, 1, count_include_pad=False), "count_include_pad=True"),
], ids=["ceil", "count_include_pad"])
def test_options_the_device_does_not_run_are_named(pool, match):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 2), pool, nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    with pytest.raises(WorkloadError, match=match):
        quantize_model(net, (torch.randn(1, 3, 8, 8),))
