"""ResNet-50 as a graph (`compiler.zoo_graphs`): the torch module's layers are the zoo's layer
list, and the quantized network (residual additions, projection shortcuts, max pooling after
the stem) compiles to one program that the functional simulator runs bit-exact against the
integer reference (`tensorforge.network_reference`, which never calls the compiler)."""

from __future__ import annotations

import functools
import json
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
from tensorforge.compiler.zoo_graphs import ResNet50, resnet50
from tensorforge.errors import WorkloadError

CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
CONV_S2 = "C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]"
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
        found[({1: CONV, 2: CONV_S2}[stride],
               (("c", module.in_channels), ("k", module.out_channels), ("r", kernel),
                ("s", kernel), ("x", out), ("y", out)))] += 1

    hooks = [m.register_forward_hook(record) for m in net.modules()
             if isinstance(m, nn.Conv2d | nn.Linear)]
    with torch.no_grad():
        net.eval()(torch.zeros(1, 3, resolution, resolution))
    for hook in hooks:
        hook.remove()
    return found


def test_resnet50_graph_is_the_zoo_layer_list():
    """Every convolution and the fc layer of the graph, by workload and sizes, with the zoo's
    counts (the zoo lists them independently, from torchvision's architecture); the MAC total
    is the zoo's, fc included. The graph's other steps (max pool, adds, average pool) are not
    in the zoo's list and not in its MACs."""
    zoo = load_model("resnet50")
    listed = Counter()
    for layer in zoo.layers:
        listed[(layer.workload.text, tuple(sorted(layer.workload.sizes.items())))] += layer.count
    found = torch_layers(ResNet50())
    assert found == listed
    assert sum(math.prod(n for _, n in sizes) * count for (_, sizes), count in found.items()
               ) == zoo.macs == 4_089_184_256


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


def test_compile_resnet50_lists_segments_and_host_ops(monkeypatch, capsys):
    """`compile --workload resnet50` builds the graph (here truncated to one block, 16x16,
    through the `GRAPHS` table the command reads), quantizes it and checks it on the
    functional simulator; a layer-list model takes no --resolution."""
    monkeypatch.setitem(zoo_graphs.GRAPHS, "resnet50", functools.partial(resnet50, blocks=(1,)))
    flags = ["compile", "--workload", "resnet50", "--pe", "4x4", "--output-pipeline",
             "--resolution", "16"]
    assert main([*flags, "--check", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["check"]["equal"] and summary["host_ops"] == []
    (segment,) = summary["segments"]
    assert segment["layers"][:2] == ["stem_0", "maxpool"] and segment["layers"][-1] == "fc"
    assert "add" in segment["layers"] and "stages_0_0_downsample_0" in segment["layers"]
    assert main(flags) == 0
    assert "host ops: none" in capsys.readouterr().out
    assert main(["compile", "--workload", "dqn", "--pe", "4x4", "--output-pipeline",
                 "--resolution", "16"]) == 1
    assert "--resolution applies to resnet50" in capsys.readouterr().err


@pytest.mark.parametrize("blocks", [(), (3, 4, 6, 3, 2), (0,)])
def test_bad_truncations_are_refused(blocks):
    with pytest.raises(WorkloadError, match="blocks must be"):
        resnet50(blocks=blocks)
