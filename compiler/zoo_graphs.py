"""The graphs behind the zoo's residual networks, as float torch modules with seeded weights.

A zoo model (`compiler.zoo`) lists its distinct layers with counts: enough for sweeps and MAC
totals, not for a whole-network program, whose residual additions need to know which tensor
each layer reads. For the models named in `GRAPHS` this module builds the standard
architecture as an ``nn.Module`` that `compiler.quantize.quantize_model` takes (convolutions
each followed by a ``BatchNorm2d``, which it folds; max and global average pooling; the
additions), so ``compile --workload resnet50`` quantizes and compiles the real network.

``resnet50`` is ResNet-50 v1.5 as torchvision builds it (torchvision is not a dependency):
stem 7x7/s2 conv-bn-ReLU, 3x3/s2/p1 max pool, bottleneck blocks ``[3, 4, 6, 3]`` (1x1 ->
3x3 with the stage's stride -> 1x1 at 4x the width, a 1x1 conv-bn projection shortcut on each
stage's first block, the add, then ReLU), global average pool, fc 2048 -> 1000. ``blocks``
truncates it (``(3,)``: stem and the first stage, the head then reading 256 channels) and
``resolution`` scales the input, both for tests that must run on the functional simulator.

Weights are seeded: convolutions Kaiming-normal (fan out, ReLU gain) as torchvision's, batch
norms an affine ``gamma ~ U(0.5, 1.5)``, ``beta ~ N(0, 0.1)`` and running statistics taken from
one training-mode pass over a seeded random batch (cumulative average), so every batch norm
folds a non-trivial scale and shift and the activations stay in a sensible range through all
16 blocks. The example input, also the calibration data, is a seeded ``N(0, 1)`` image.
"""

from __future__ import annotations

import torch
from torch import nn

from tensorforge.errors import WorkloadError

#: ResNet-50's blocks per stage, and each stage's bottleneck width (its output is 4x that)
RESNET50_BLOCKS = (3, 4, 6, 3)
RESNET50_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4
_STATISTICS_BATCH = 2  # images of the training-mode pass that sets the running statistics


def _conv_bn(inputs: int, outputs: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm2d(outputs, momentum=None))


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (``stride``) -> 1x1 (``width * 4``), each conv-bn, plus the block input (or
    its 1x1/``stride`` conv-bn projection where the shape changes), then ReLU."""

    def __init__(self, inputs: int, width: int, stride: int):
        super().__init__()
        outputs = width * EXPANSION
        self.conv1 = _conv_bn(inputs, width, 1)
        self.conv2 = _conv_bn(width, width, 3, stride)
        self.conv3 = _conv_bn(width, outputs, 1)
        self.downsample = (_conv_bn(inputs, outputs, 1, stride)
                           if stride != 1 or inputs != outputs else None)
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.relu(self.conv1(x))
        out = self.relu(self.conv2(out))
        out = self.conv3(out)
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 v1.5 (module docstring), the first ``len(blocks)`` stages with ``blocks[i]``
    blocks each."""

    def __init__(self, blocks: tuple[int, ...] = RESNET50_BLOCKS, classes: int = 1000):
        super().__init__()
        self.stem = _conv_bn(3, 64, 7, 2)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, inputs = [], 64
        for stage, (count, width) in enumerate(zip(blocks, RESNET50_WIDTHS, strict=False)):
            layers = []
            for block in range(count):
                layers.append(Bottleneck(inputs, width, 2 if block == 0 and stage > 0 else 1))
                inputs = width * EXPANSION
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inputs, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.stem(x)))
        x = self.avgpool(self.stages(x))
        return self.fc(torch.flatten(x, 1))


def resnet50(seed: int = 0, resolution: int = 224, blocks: tuple[int, ...] = RESNET50_BLOCKS
             ) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """ResNet-50 with seeded weights and batch norm statistics (module docstring), in eval
    mode, and its seeded example input ``(1, 3, resolution, resolution)``."""
    if not blocks or len(blocks) > len(RESNET50_BLOCKS) or any(b < 1 for b in blocks):
        raise WorkloadError(f"blocks must be 1 to 4 positive stage depths, not {blocks}")
    if resolution < 1:
        raise WorkloadError(f"the resolution must be a positive number of pixels, not "
                            f"{resolution}")
    generator = torch.Generator().manual_seed(seed)
    net = ResNet50(blocks)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.out_channels * module.kernel_size[0] * module.kernel_size[1]
                module.weight.normal_(0, (2 / fan_out) ** 0.5, generator=generator)
            elif isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5, generator=generator)
                module.bias.normal_(0, 0.1, generator=generator)
            elif isinstance(module, nn.Linear):
                bound = module.in_features ** -0.5
                module.weight.uniform_(-bound, bound, generator=generator)
                module.bias.uniform_(-bound, bound, generator=generator)
        net.train()
        net(torch.randn(_STATISTICS_BATCH, 3, resolution, resolution, generator=generator))
    net.eval()
    return net, (torch.randn(1, 3, resolution, resolution, generator=generator),)


#: zoo model name -> its graph builder: ``(seed, resolution) -> (module, example inputs)``
GRAPHS = {"resnet50": resnet50}


__all__ = ["GRAPHS", "RESNET50_BLOCKS", "ResNet50", "resnet50"]
