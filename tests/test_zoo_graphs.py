"""ResNet-50 as a graph (`compiler.zoo_graphs`): the torch module's layers are the zoo's layer
list, and the quantized network (residual additions, projection shortcuts, max pooling after
the stem) compiles to one program that the functional simulator runs bit-exact against the
integer reference (`tensorforge.network_reference`, which never calls the compiler)."""

from __future__ import annotations

import functools
import math
from collections import Counter

import pytest
import torch
from network_configs import PIPELINE_4x4, close_to_float, one_exact_program
from torch import nn

from tensorforge.api import simulate_model
from tensorforge.cli import main
from tensorforge.compiler import zoo_graphs
from tensorforge.compiler.zoo import load_model
from tensorforge.compiler.zoo_graphs import MobileNetV2, ResNet50, mobilenet_v2, resnet50
from tensorforge.errors import WorkloadError

CONV = {1: "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
        2: "C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]"}
DEPTHWISE = {1: "C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]",
             2: "C[c,x,y] += A[c,2*x+r,2*y+s] * B[c,r,s]"}
GEMM = "C[i,j] += A[i,k] * B[k,j]"


def torch_layers(net: nn.Module, resolution: int = 224) -> Counter:
    """Each Conv2d and Linear of ``net`` as the zoo writes it, ``(workload, sizes)``, with
    multiplicities; convolutions checked against the zoo's pre-padded input on the way."""
    found: Counter = Counter()

    def record(module, inputs, output):
        if isinstance(module, nn.Linear):
            found[(GEMM, (("i", 1), ("j", module.out_features),
                          ("k", module.in_features)))] += 1
            return
        (stride, _), (pad, _), (kernel, _) = module.stride, module.padding, module.kernel_size
        size, out = inputs[0].shape[-1], output.shape[-1]
        # the zoo's input holds the padded rows the windows reach, torch's last partial
        # stride step left out
        assert size + 2 * pad - stride < stride * (out - 1) + kernel <= size + 2 * pad
        window = (("r", kernel), ("s", kernel), ("x", out), ("y", out))
        if module.groups == 1:
            found[(CONV[stride], (("c", module.in_channels), ("k", module.out_channels),
                                  *window))] += 1
        else:
            assert module.groups == module.in_channels == module.out_channels
            found[(DEPTHWISE[stride], (("c", module.in_channels), *window))] += 1

    hooks = [m.register_forward_hook(record) for m in net.modules()
             if isinstance(m, nn.Conv2d | nn.Linear)]
    with torch.no_grad():
        net.eval()(torch.zeros(1, 3, resolution, resolution))
    for hook in hooks:
        hook.remove()
    return found


@pytest.mark.parametrize(("name", "net", "macs"), [
    ("resnet50", ResNet50, 4_089_184_256), ("mobilenet_v2", MobileNetV2, 300_774_272)])
def test_graph_is_the_zoo_layer_list(name, net, macs):
    """Every convolution and the fc layer of the graph, by workload and sizes, with the zoo's
    counts (the zoo lists them independently, from torchvision's architecture and the
    papers' tables); the MAC total is the zoo's, fc included. The graph's other steps (max
    pool, adds, average pool) are not in the zoo's list and not in its MACs."""
    zoo = load_model(name)
    listed = Counter()
    for layer in zoo.layers:
        listed[(layer.workload.text, tuple(sorted(layer.workload.sizes.items())))] += layer.count
    found = torch_layers(net())
    assert found == listed
    assert sum(math.prod(n for _, n in sizes) * count for (_, sizes), count in found.items()
               ) == zoo.macs == macs


def test_seeded_weights_and_folded_statistics():
    """The same seed builds the same network; the batch norms hold statistics away from the
    identity (so folding them changes the weights)."""
    net, (x,) = resnet50(seed=3, resolution=32, blocks=(1,))
    again, (y,) = resnet50(seed=3, resolution=32, blocks=(1,))
    assert torch.equal(x, y)
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(),
                                                   again.state_dict().values(), strict=True))
    norm = net.stem[1]
    assert not net.training and norm.running_var.std() > 0.01
    assert norm.running_mean.abs().max() > 0.01 and (norm.weight - 1).abs().max() > 0.1


def test_first_stage_is_one_exact_program():
    """Stem (7x7/s2 conv-bn-ReLU, 3x3/s2/p1 max pool), the first stage's three bottleneck
    blocks (a projection shortcut, then identity skips read in place), global average pool
    and fc, at 16x16 on the 4x4 pipeline: one program, nothing on the host, bit-exact."""
    net, inputs = resnet50(seed=0, resolution=16, blocks=(3,))
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=0)
    assert sum(line.split()[1] == "add" for line in result.layers) == 3
    one_exact_program(result)
    close_to_float(result)


def test_mobilenet_v2_blocks_are_one_exact_program():
    """MobileNet V2's stem and first four inverted residual blocks (the fourth adds its
    input: an add whose skip is a linear projection's output) with its head, at 16x16 on the
    4x4 pipeline: one program, nothing on the host, bit-exact."""
    net, inputs = mobilenet_v2(seed=0, resolution=16, blocks=4)
    result = simulate_model(net, inputs, PIPELINE_4x4, backend="functional", seed=0)
    assert sum(line.split()[1] == "add" for line in result.layers) == 1
    one_exact_program(result)


def test_compile_resnet50_lists_segments_and_host_ops(monkeypatch, capsys):
    """`compile --workload resnet50` builds the graph (here truncated to one block, 16x16,
    through the `GRAPHS` table the command reads), quantizes it and checks it on the
    functional simulator; a layer-list model takes no --resolution."""
    monkeypatch.setitem(zoo_graphs.GRAPHS, "resnet50", functools.partial(resnet50, blocks=(1,)))
    flags = ["compile", "--workload", "resnet50", "--pe", "4x4", "--output-pipeline",
             "--resolution", "16"]
    assert main([*flags, "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("segment 0: ") and len(lines) == 5  # one segment
    layers = lines[1].split("layers ")[1].split(", ")
    assert layers[:2] == ["stem_0", "maxpool"] and layers[-1] == "fc"
    assert "add" in layers and "stages_0_0_downsample_0" in layers
    assert lines[2] == "host ops: none"
    assert "result is equal to the numpy reference" in lines[3]
    assert main(["compile", "--workload", "dqn", "--pe", "4x4", "--output-pipeline",
                 "--resolution", "16"]) == 1
    assert "--resolution applies to resnet50" in capsys.readouterr().err


@pytest.mark.parametrize(("build", "blocks"), [
    (resnet50, ()), (resnet50, (3, 4, 6, 3, 2)), (resnet50, (0,)), (mobilenet_v2, 18),
    (mobilenet_v2, -1)])
def test_bad_truncations_are_refused(build, blocks):
    with pytest.raises(WorkloadError, match="blocks must be"):
        build(blocks=blocks)
    with pytest.raises(WorkloadError, match="resolution must be a positive"):
        build(resolution=0)
