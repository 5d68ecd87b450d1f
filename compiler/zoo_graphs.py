"""The graphs behind the zoo's residual networks, as float torch modules with seeded weights.

A zoo model (`compiler.zoo`) lists its distinct layers with counts: enough for sweeps and MAC
totals, not for a whole-network program, whose residual additions need to know which tensor
each layer reads. For the models named in `GRAPHS` this module builds the standard
architecture as an ``nn.Module`` that `compiler.quantize.quantize_model` takes (convolutions
each followed by a ``BatchNorm2d``, which it folds; max and global average pooling; the
additions), so ``compile --workload resnet50`` (or ``mobilenet_v2``) quantizes and compiles
the real network.

``resnet50`` is ResNet-50 v1.5 as torchvision builds it (torchvision is not a dependency):
stem 7x7/s2 conv-bn-ReLU, 3x3/s2/p1 max pool, bottleneck blocks ``[3, 4, 6, 3]`` (1x1 ->
3x3 with the stage's stride -> 1x1 at 4x the width, a 1x1 conv-bn projection shortcut on each
stage's first block, the add, then ReLU), global average pool, fc 2048 -> 1000. ``blocks``
truncates it (``(3,)``: stem and the first stage, the head then reading 256 channels) and
``resolution`` scales the input, both for tests that must run on the functional simulator.

``mobilenet_v2`` is MobileNet V2 (width 1.0) as torchvision builds it, without the
classifier's dropout (an identity in eval mode): stem 3x3/s2 conv-bn-ReLU6, 17 inverted
residual blocks (1x1 expand conv-bn-ReLU6, 3x3 depthwise conv-bn-ReLU6, 1x1 linear project
conv-bn, plus the block input where stride and width stay), 1x1 conv-bn-ReLU6 to 1280,
global average pool, fc 1280 -> 1000. ``blocks`` keeps the first blocks.

Weights are seeded: convolutions Kaiming-normal (fan out of a group, ReLU gain), batch
norms an affine ``gamma ~ U(0.5, 1.5)``, ``beta ~ N(0, 0.1)`` and running statistics taken from
one training-mode pass over a seeded random batch (cumulative average), so every batch norm
folds a non-trivial scale and shift and the activations stay in a sensible range through
every block. The example input, also the calibration data, is a seeded ``N(0, 1)`` image.
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


def _conv_bn(inputs: int, outputs: int, kernel: int, stride: int = 1, groups: int = 1
             ) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups,
                                   bias=False),
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


class InvertedResidual(nn.Module):
    """MobileNet V2's block: 1x1 expand conv-bn-ReLU6 (left out at ratio 1), 3x3 depthwise
    conv-bn-ReLU6 (``stride``), 1x1 project conv-bn (linear), plus the block input where the
    shape stays."""

    def __init__(self, inputs: int, outputs: int, stride: int, ratio: int):
        super().__init__()
        hidden = inputs * ratio
        layers = [] if ratio == 1 else [_conv_bn(inputs, hidden, 1), nn.ReLU6()]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(),
                   _conv_bn(hidden, outputs, 1)]
        self.layers = nn.Sequential(*layers)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x):
        return x + self.layers(x) if self.residual else self.layers(x)


#: MobileNet V2's inverted residual stages (Sandler et al. 2018, Table 2): expansion ratio,
#: output channels, blocks, the first block's stride
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
MOBILENET_V2_BLOCKS = sum(stage[2] for stage in MOBILENET_V2_STAGES)


class MobileNetV2(nn.Module):
    """MobileNet V2 (width 1.0, torchvision's layers without the classifier's dropout): stem
    3x3/s2 conv-bn-ReLU6 to 32 channels, the first ``blocks`` inverted residual blocks, 1x1
    conv-bn-ReLU6 to 1280, global average pool, fc 1280 -> ``classes``."""

    def __init__(self, blocks: int = MOBILENET_V2_BLOCKS, classes: int = 1000):
        super().__init__()
        layers, inputs = [_conv_bn(3, 32, 3, 2), nn.ReLU6()], 32
        strides = [(ratio, width, stride if n == 0 else 1)
                   for ratio, width, count, stride in MOBILENET_V2_STAGES for n in range(count)]
        for ratio, width, stride in strides[:blocks]:
            layers.append(InvertedResidual(inputs, width, stride, ratio))
            inputs = width
        layers += [_conv_bn(inputs, 1280, 1), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def resnet50(seed: int = 0, resolution: int = 224, blocks: tuple[int, ...] = RESNET50_BLOCKS
             ) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """ResNet-50 with seeded weights and batch norm statistics (module docstring), in eval
    mode, and its seeded example input ``(1, 3, resolution, resolution)``."""
    if not blocks or len(blocks) > len(RESNET50_BLOCKS) or any(b < 1 for b in blocks):
        raise WorkloadError(f"blocks must be 1 to 4 positive stage depths, not {blocks}")
    return _seeded(ResNet50(blocks), seed, resolution)


def mobilenet_v2(seed: int = 0, resolution: int = 224, blocks: int = MOBILENET_V2_BLOCKS
                 ) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """MobileNet V2 with seeded weights and batch norm statistics (as `resnet50`), the first
    ``blocks`` of its 17 inverted residual blocks, and its seeded example input."""
    if not 0 <= blocks <= MOBILENET_V2_BLOCKS:
        raise WorkloadError(f"blocks must be 0 to {MOBILENET_V2_BLOCKS}, not {blocks}")
    return _seeded(MobileNetV2(blocks), seed, resolution)


def _seeded(net: nn.Module, seed: int, resolution: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """``net`` with seeded weights and batch norm statistics (module docstring), in eval
    mode, and its seeded example input ``(1, 3, resolution, resolution)``."""
    if resolution < 1:
        raise WorkloadError(f"the resolution must be a positive number of pixels, not "
                            f"{resolution}")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = (module.out_channels // module.groups * module.kernel_size[0]
                           * module.kernel_size[1])
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
GRAPHS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}


__all__ = ["GRAPHS", "MOBILENET_V2_BLOCKS", "RESNET50_BLOCKS", "MobileNetV2", "ResNet50",
           "mobilenet_v2", "resnet50"]
