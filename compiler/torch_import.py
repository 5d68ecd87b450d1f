"""PyTorch import: the tensor workloads of a ``torch.nn.Module``, and what stays on the host.

`from_torch` traces the module with ``torch.fx`` (``symbolic_trace``) and propagates the example
inputs' shapes (``ShapeProp``). Convolutions (``nn.Conv2d``: stride, padding, dilation, groups),
linear layers (``nn.Linear``, any leading batch/sequence dimensions) and matrix products
(``torch.matmul``, ``torch.bmm``, ``@``, ``.matmul()``, ``.bmm()``) become workloads; every
other operation (activations, softmax, pooling, normalisation, additions, reshapes) is listed
by name as a host op, because the accelerator runs only multiply-accumulate intrinsics.

Tensor layouts follow PyTorch with batch dimensions of size 1 dropped from the output and read
at 0 from the inputs (so a ResNet conv imports exactly as the zoo writes it):

* convolution ``C[k,x,y] += A[c,S*x+D*r-P,S*y+D*s-P] * B[k,c,r,s]``; zero padding is the
  workload language's implicit padding, with ``A``'s true shape among the sizes;
* depthwise (``groups == in == out channels``) ``C[c,x,y] += A[c,...] * B[c,r,s]``, whose B is
  torch's weight without its unit axis;
* other grouped convolutions ``C[g,k,x,y] += A[g,c,...] * B[g,k,c,r,s]``: channels split into
  ``groups`` blocks (``input.view(G, C/G, H, W)``, ``weight.view(G, K/G, C/G, R, S)``);
* linear ``C[...,j] += A[...,k] * B[j,k]`` (torch stores the weight out x in), e.g.
  ``C[t,j] += A[0,t,k] * B[j,k]`` for a (1, T, K) input;
* matmul ``C[...,i,j] += A[...,i,k] * B[...,k,j]``, a batch axis of size 1 on one side being
  indexed by the constant 0 (broadcast).
Biases are added on the host (``ImportedLayer.bias``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import fx, nn
from torch.fx.passes.shape_prop import ShapeProp

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.compiler.zoo import Layer, Model
from tensorforge.errors import WorkloadError

_MATMULS = {torch.matmul, torch.bmm, operator.matmul, "matmul", "bmm"}


@dataclass(frozen=True)
class ImportedLayer:
    name: str  # the fx node name
    kind: str  # conv2d, depthwise_conv2d, grouped_conv2d, linear or matmul
    workload: Workload
    bias: bool = False


@dataclass(frozen=True)
class HostOp:
    name: str  # the fx node name
    op: str  # what it does: a module class, function or method name


@dataclass(frozen=True)
class ImportedModel:
    name: str
    layers: tuple[ImportedLayer, ...]
    host_ops: tuple[HostOp, ...]

    @property
    def macs(self) -> int:
        return sum(layer.workload.macs for layer in self.layers)

    def to_model(self) -> Model:
        """As a zoo `Model`, so imported networks go wherever zoo models go."""
        layers = tuple(Layer(layer.name, layer.workload) for layer in self.layers)
        return Model(self.name, f"imported from torch ({len(self.host_ops)} host ops)", layers)


def from_torch(
    module: nn.Module, example_inputs: Sequence[torch.Tensor], name: str = ""
) -> ImportedModel:
    """Trace ``module`` on ``example_inputs`` and return its workloads and host ops."""
    name = name or type(module).__name__
    graph = trace(module, name)
    ShapeProp(graph).propagate(*example_inputs)
    modules = dict(graph.named_modules())
    layers: list[ImportedLayer] = []
    host: list[HostOp] = []
    for node in graph.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        target = modules.get(node.target) if node.op == "call_module" else None
        label = f"{name}:{node.name}"
        if isinstance(target, nn.Conv2d):
            layers.append(_conv(label, node, target))
        elif isinstance(target, nn.Linear):
            layers.append(_linear(label, node, target))
        elif node.op in ("call_function", "call_method") and node.target in _MATMULS:
            layers.append(_matmul(label, node))
        else:
            host.append(HostOp(node.name, _op_name(node, target)))
    return ImportedModel(name, tuple(layers), tuple(host))


def trace(module: nn.Module, name: str) -> fx.GraphModule:
    """``module``'s ``torch.fx`` graph, or a `WorkloadError` saying what to change."""
    try:
        return fx.symbolic_trace(module)
    except Exception as error:  # fx raises many types for untraceable control flow
        raise WorkloadError(
            f"torch.fx cannot trace {name}: {error}; make the forward free of data-dependent "
            "control flow, or import its traceable submodules one at a time."
        ) from error


def _op_name(node: fx.Node, target: nn.Module | None) -> str:
    if target is not None:
        return type(target).__name__
    return node.target if isinstance(node.target, str) else node.target.__name__


def _shape(node: fx.Node) -> tuple[int, ...]:
    return tuple(node.meta["tensor_meta"].shape)


def _conv(label: str, node: fx.Node, conv: nn.Conv2d) -> ImportedLayer:
    batch, channels, height, width = _shape(node.args[0])
    _, out_channels, out_h, out_w = _shape(node)
    if isinstance(conv.padding, str) or conv.padding_mode != "zeros":
        padding = (0, 0) if conv.padding == "valid" else None
        if padding is None or conv.padding_mode != "zeros":
            raise WorkloadError(
                f"{label}: padding={conv.padding!r}, padding_mode={conv.padding_mode!r} is not "
                "imported; use integer zero padding (padding=1, padding_mode='zeros')."
            )
    else:
        padding = conv.padding
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    rows = window_expression(sh, "x", dh, "r", padding[0])
    cols = window_expression(sw, "y", dw, "s", padding[1])
    groups = conv.groups
    sizes = {"x": out_h, "y": out_w, "r": kh, "s": kw}
    if groups == 1:
        kind = "conv2d"
        text = f"C[k,x,y] += A[c,{rows},{cols}] * B[k,c,r,s]"
        sizes |= {"k": out_channels, "c": channels}
        a_shape = (channels, height, width)
    elif groups == channels == out_channels:
        kind = "depthwise_conv2d"
        text = f"C[c,x,y] += A[c,{rows},{cols}] * B[c,r,s]"
        sizes |= {"c": channels}
        a_shape = (channels, height, width)
    else:
        kind = "grouped_conv2d"
        text = f"C[g,k,x,y] += A[g,c,{rows},{cols}] * B[g,k,c,r,s]"
        sizes |= {"g": groups, "k": out_channels // groups, "c": channels // groups}
        a_shape = (groups, channels // groups, height, width)
    text, sizes = _batched(text, sizes, batch)
    a_shape = a_shape if batch == 1 else (batch, *a_shape)
    workload = parse_workload(text, {**sizes, "A": a_shape}, name=label)
    return ImportedLayer(node.name, kind, workload, conv.bias is not None)


def window_expression(stride: int, out: str, dilation: int, tap: str, pad: int) -> str:
    """One input coordinate of a sliding window, e.g. ``2*x+r-1`` (stride 2, padding 1)."""
    text = (f"{stride}*{out}" if stride != 1 else out) + "+"
    text += f"{dilation}*{tap}" if dilation != 1 else tap
    return text + (f"-{pad}" if pad else "")


def _batched(text: str, sizes: dict[str, int], batch: int) -> tuple[str, dict[str, int]]:
    """Give output and input a leading batch index ``n`` when the batch is not 1."""
    if batch == 1:
        return text, sizes
    text = text.replace("C[", "C[n,", 1).replace("A[", "A[n,", 1)
    return text, {**sizes, "n": batch}


def _lead_names(count: int) -> list[str]:
    return ["n"] if count == 1 else (["b", "t"] if count == 2 else [f"d{i}" for i in range(count)])


def _linear(label: str, node: fx.Node, linear: nn.Linear) -> ImportedLayer:
    shape = _shape(node.args[0])
    lead = _lead_names(len(shape) - 1)
    a_lead = _broadcast(shape[:-1], shape[:-1], lead)
    c_lead = [n for n in a_lead if n != "0"]
    text = f"C[{','.join([*c_lead, 'j'])}] += A[{','.join([*a_lead, 'k'])}] * B[j,k]"
    sizes = {n: shape[a] for a, n in enumerate(a_lead) if n != "0"}
    sizes |= {"k": linear.in_features, "j": linear.out_features}
    workload = parse_workload(text, sizes, name=label)
    return ImportedLayer(node.name, "linear", workload, linear.bias is not None)


def _matmul(label: str, node: fx.Node) -> ImportedLayer:
    left, right = (_shape(arg) for arg in node.args[:2])
    out = _shape(node)
    a_dims = ["i", "k"] if len(left) >= 2 else ["k"]
    b_dims = ["k", "j"] if len(right) >= 2 else ["k"]
    c_dims = (["i"] if len(left) >= 2 else []) + (["j"] if len(right) >= 2 else [])
    sizes = {"k": left[-1]} | ({"i": left[-2]} if len(left) >= 2 else {})
    sizes |= {"j": right[-1]} if len(right) >= 2 else {}
    batch = out[: len(out) - len(c_dims)]
    names = _lead_names(len(batch))
    a_batch, b_batch = left[: len(left) - len(a_dims)], right[: len(right) - len(b_dims)]
    a_lead = _broadcast(a_batch, batch, names)
    b_lead = _broadcast(b_batch, batch, names)
    kept = [n for n, size in zip(names, batch, strict=True) if size != 1]
    sizes |= {n: size for n, size in zip(names, batch, strict=True) if size != 1}
    access = ",".join
    text = (
        f"C[{access([*kept, *c_dims])}] += A[{access([*a_lead, *a_dims])}] * "
        f"B[{access([*b_lead, *b_dims])}]"
    )
    return ImportedLayer(node.name, "matmul", parse_workload(text, sizes, name=label))


def _broadcast(own: tuple[int, ...], batch: tuple[int, ...], names: list[str]) -> list[str]:
    """Index names for an operand's batch axes, aligned right; size-1 axes read element 0."""
    offset = len(batch) - len(own)
    return [names[offset + a] if size != 1 else "0" for a, size in enumerate(own)]
