"""Post-training quantization of a small float torch CNN to the output pipeline's integers.

`quantize_model` traces the module (``torch.fx``, through `from_torch` for the layers'
workloads), runs it once in float on the example inputs to calibrate, and returns a
`QuantizedNetwork`: the chain of steps the integer network runs.

How (TFLite's scheme, symmetric, every zero point 0):

* activations: one scale per tensor, ``max|x| / 127`` over the example input (the network's
  input, and each layer's output after its activation);
* weights: one scale per output channel, ``max|W[k]| / 127``, ``q = round(W / s)`` in
  -127..127;
* bias: int32 at the accumulator's scale, ``round(b / (s_in * s_w[k]))``;
* each layer's output: the accumulator through `tensorforge.requant` (bias, gemmlowp
  multiplier and rounding shift for ``s_in * s_w[k] / s_out``, clamp: ReLU at 0, ReLU6 at
  the quantized 6) to int8. An output scale so small that this factor reaches 1 is raised
  until it is below 1 (the pipeline takes factors in (0, 1)).

Before anything else, each ``BatchNorm2d`` (or ``F.batch_norm``) right after a ``Conv2d``
is folded into that convolution's weight and bias (`compiler.fold_bn`: running statistics,
the module is put in eval mode), so conv -> bn -> ReLU is one layer with a fused ReLU.

Pooling keeps its input's scale and runs on the device as layers of its own that read the
previous layer's int8 output (`compiler.pooling`), all depthwise workloads with all-ones
weights. Global average pooling sums each channel over the whole image and the output stage
multiplies by ``1 / pixels`` (gemmlowp multiplier and rounding shift); as a host step
(``pool_on_device=False``, or a 1x1 image) it is the integer sum divided by the pixel
count, rounded half away from zero. Average pooling (``AvgPool2d``, ``F.avg_pool2d``: any
kernel, stride and padding, the padding counted in the divisor as torch's default
``count_include_pad=True``) sums each window likewise and multiplies by ``1 / (kh*kw)`` (or
``1 / divisor_override``). Max pooling (``MaxPool2d``, ``F.max_pool2d``: any kernel and
stride, padding up to half the kernel, no dilation) is ``C[c,x,y] max= A[c,sx*x+r-p,sy*y+s-p]
* B[c,r,s]`` (MAX COMPUTEs, `tensorforge.isa`'s ``reduce``), stored through an identity
output stage (multiplier ``2**31 - 1``, shift 0), so the stored int8 values are the window
maxima themselves; requantization is monotone, so the max could as well be taken after the
producing layer's output stage. LOAD pads with zeros, which equals max pooling's -inf
padding only on input that cannot be negative: a padded max pool must follow a ReLU or
ReLU6 (otherwise a `WorkloadError`). ``ceil_mode=True`` is taken where it adds no partial
window. Flatten is a reshape.

A residual addition (``out + x``, ``out += x``, ``torch.add``, ``.add``) of the previous
layer's output (the residual) and an earlier device layer's output (the skip, which the
layer after its producer reads too) is a device layer over the two stacked
(`compiler.residual`): ``m_a * a + m_b * b`` with int8 multipliers holding the ratio of the
two scales, requantized from ``max(s_a, s_b) / 127`` to the output scale, a ReLU/ReLU6
right after it fused. A convolution or linear layer may also read an earlier output that
the layer after that output's producer reads first (a projection shortcut): its workload is
rewritten to read that reader's zero-padded region (`residual.reading_padded`), so one copy
serves both. The steps stay in program order; an add or a re-reader names what it reads
(``QuantLayer.inputs``).

Supported: a chain (each node reads the one before, except those) of
``Conv2d`` (any kernel, stride, padding, dilation; groups 1 or depthwise), each optionally
followed by a ``BatchNorm2d`` (folded), ``Linear``, ReLU / ReLU6 right after a layer
(module or function), max and average pooling, global average pooling
(``AdaptiveAvgPool2d(1)``, ``mean`` over the pixels), residual additions and flatten,
batch 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import fx, nn

from tensorforge.compiler.fold_bn import fold_batch_norms
from tensorforge.compiler.pooling import (
    global_pool_layer,
    is_global_pool,
    nonnegative,
    window_pool,
    window_pool_layer,
)
from tensorforge.compiler.residual import add_layer, is_add, rereading
from tensorforge.compiler.torch_import import ImportedLayer, from_torch, trace
from tensorforge.compiler.workload import Workload
from tensorforge.errors import WorkloadError
from tensorforge.requant import OutputParams, params_from_scales

QMAX = 127
_CHANNEL = {"conv2d": "k", "depthwise_conv2d": "c", "linear": "j"}
_RELUS = {nn.ReLU: "relu", nn.ReLU6: "relu6"}
_RELU_FUNCTIONS = {torch.relu: "relu", torch.nn.functional.relu: "relu", "relu": "relu",
                   torch.nn.functional.relu6: "relu6"}
_FLATTENS = {torch.flatten, "flatten", "view", "reshape", torch.reshape}


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class QuantLayer:
    """A device layer: int8 weights in the workload's B shape, per-channel output stage."""

    name: str  # the fx node name
    kind: str  # conv2d, depthwise_conv2d, linear, global_avg_pool, avg_pool, max_pool or add
    workload: Workload
    weight: np.ndarray  # int64 holding int8 values, the workload's B shape
    params: OutputParams | None  # None: the accumulator is stored (a workload's last stage)
    channel: str | None  # the output index the params run along (None: per-tensor)
    activation: str  # none, relu or relu6
    input_scale: float
    output_scale: float
    conv: tuple[int, int, int, int, int, int] | None  # stride, padding, dilation (h, w)
    kernel: tuple[int, int] | None = None  # max/avg_pool: the window (the weight is all ones)
    # add: the steps whose outputs it adds (skip, residual: the previous step); a re-reader
    # (a projection shortcut): the step whose output it reads; "" is the network input.
    # Empty: the layer reads the previous step's output.
    inputs: tuple[str, ...] = ()
    multipliers: tuple[int, int] | None = None  # add: (m_a, m_b), `compiler.residual`


@dataclass(frozen=True)
class HostStep:
    """An integer step between layers: ``global_avg_pool`` or ``flatten``."""

    name: str
    op: str


Step = QuantLayer | HostStep


@dataclass(frozen=True)
class QuantizedNetwork:
    name: str
    steps: tuple[Step, ...]
    input_scale: float
    output_scale: float
    input_shape: tuple[int, ...]  # without the batch axis

    @property
    def layers(self) -> tuple[QuantLayer, ...]:
        return tuple(s for s in self.steps if isinstance(s, QuantLayer))

    def quantize_input(self, x: torch.Tensor | np.ndarray) -> np.ndarray:
        """The int8 network input (int64 array, batch axis dropped)."""
        values = np.asarray(x.detach() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
        values = values.reshape(self.input_shape)
        return np.clip(np.round(values / self.input_scale), -QMAX - 1, QMAX).astype(np.int64)

    def dequantize_output(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(q, dtype=np.float64) * self.output_scale


def global_avg_pool(q: np.ndarray) -> np.ndarray:
    """``(C, H, W)`` int8 -> ``(C,)``: the mean, rounded half away from zero (exact integers)."""
    q = np.asarray(q, dtype=np.int64)
    count = q.shape[1] * q.shape[2]
    total = q.reshape(q.shape[0], -1).sum(axis=1)
    return np.sign(total) * ((2 * np.abs(total) + count) // (2 * count))


def quantize_model(module: nn.Module, example_inputs: Sequence[torch.Tensor],
                   name: str = "", pool_on_device: bool = True) -> QuantizedNetwork:
    """Quantize ``module`` post-training, calibrated on ``example_inputs`` (module docstring).

    ``pool_on_device`` makes global average pooling a device layer
    (`pooling.global_pool_layer`), else a host step."""
    if not isinstance(example_inputs, tuple | list) or len(example_inputs) != 1:
        raise WorkloadError("simulate_model takes example_inputs as a tuple of one tensor, as "
                            "torch.export does: (x,)")
    (x,) = example_inputs
    if x.dim() < 2 or x.shape[0] != 1:
        raise WorkloadError(f"the example input must have batch 1, not shape {tuple(x.shape)}")
    name = name or type(module).__name__
    module = fold_batch_norms(trace(module.eval(), name))
    imported = from_torch(module, (x,), name)
    graph = fx.symbolic_trace(module)
    values = _record(graph, x)
    modules = dict(graph.named_modules())
    layers = {layer.name: layer for layer in imported.layers}
    input_scale = _scale(x)
    scale, steps, previous = input_scale, [], None
    # the tensors a residual addition may read: fx node -> (step name, "" the input; scale)
    tensors = {n: ("", input_scale) for n in graph.graph.nodes if n.op == "placeholder"}
    nodes = [n for n in graph.graph.nodes if n.op not in ("placeholder", "output")]
    index = 0
    while index < len(nodes):
        node = nodes[index]
        if is_add(node):
            activation, last = "none", node
            if index + 1 < len(nodes) and _activation(nodes[index + 1], modules):
                last = nodes[index + 1]
                _check_chain(last, node)
                activation = _activation(last, modules)
                index += 1
            layer = add_layer(node, previous, tensors, steps, values, _scale(values[last]),
                              activation)
            steps.append(layer)
            scale, previous = layer.output_scale, last
            tensors[last] = (layer.name, scale)
            index += 1
            continue
        source = node.args[0] if node.args else None
        rereads = node.name in layers and source in tensors and source is not (
            previous if previous is not None else next(iter(tensors)))
        if not rereads:
            _check_chain(node, previous)
        target = modules.get(node.target) if node.op == "call_module" else None
        if node.name in layers:
            activation, last = "none", node
            if (index + 1 < len(nodes) and _activation(nodes[index + 1], modules)
                    and len(node.users) == 1):
                last = nodes[index + 1]
                _check_chain(last, node)
                activation = _activation(last, modules)
                index += 1
            layer = _layer(layers[node.name], target,
                           tensors[source][1] if rereads else scale, _scale(values[last]),
                           activation)
            if rereads:
                layer = rereading(layer, tensors[source][0], steps)
            steps.append(layer)
            scale, previous = layer.output_scale, last
            tensors[last] = (layer.name, scale)
        elif is_global_pool(node, target):
            shape = _input_shape(values, previous, x)
            steps.append(global_pool_layer(node.name, shape, scale) if pool_on_device and
                         shape[1] * shape[2] > 1 else HostStep(node.name, "global_avg_pool"))
            previous = node
            if isinstance(steps[-1], QuantLayer):
                tensors[node] = (node.name, scale)
        elif (pool := window_pool(node, target)) is not None:
            layer = window_pool_layer(node.name, pool, _input_shape(values, previous, x),
                                      tuple(values[node].shape[1:]), scale, nonnegative(steps))
            steps.append(layer)
            previous = node
            tensors[node] = (layer.name, scale)
        elif isinstance(target, nn.Flatten) or node.target in _FLATTENS:
            steps.append(HostStep(node.name, "flatten"))
            previous = node
        else:
            what = type(target).__name__ if target is not None else str(node.target)
            raise WorkloadError(
                f"{node.name} ({what}) is not supported by simulate_model: it runs chains of "
                "Conv2d (groups 1 or depthwise; a BatchNorm2d right after one is folded into "
                "it), Linear, ReLU/ReLU6 after a layer, max and average pooling, global "
                "average pooling, flatten and residual additions (x + f(x))")
        index += 1
    if not steps or not isinstance(steps[-1], QuantLayer):
        raise WorkloadError("the network must end with a Conv2d or Linear layer")
    return QuantizedNetwork(name, tuple(steps), input_scale, scale, tuple(x.shape[1:]))


def _record(graph: fx.GraphModule, x: torch.Tensor) -> dict[fx.Node, torch.Tensor]:
    """Every node's float value on ``x``."""
    values: dict[str, torch.Tensor] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            values[node.name] = result
            return result

    with torch.no_grad():
        Recorder(graph).run(x)
    return {node: values[node.name] for node in graph.graph.nodes if node.name in values}


def _input_shape(values: dict, previous: fx.Node | None, x: torch.Tensor) -> tuple[int, ...]:
    """The shape (batch axis dropped) of what the node after ``previous`` reads."""
    return tuple((values[previous] if previous is not None else x).shape[1:])


def _scale(t: torch.Tensor) -> float:
    top = float(t.detach().abs().max()) if t.numel() else 0.0
    return top / QMAX if top > 0 else 1.0


def _check_chain(node: fx.Node, previous: fx.Node | None) -> None:
    inputs = [a for a in node.args if isinstance(a, fx.Node)]
    if not inputs and any(isinstance(a, list | tuple) for a in node.args):
        return  # reads a list of tensors (a concatenation): the caller names the op
    wanted = previous.name if previous is not None else "the input"
    if not inputs or (previous is not None and inputs[0] is not previous) or (
            previous is None and inputs[0].op != "placeholder"):
        raise WorkloadError(f"{node.name} does not read {wanted}: simulate_model runs a chain "
                            "of layers whose only other reads are residual additions' skips "
                            "(no other branches)")


def _activation(node: fx.Node, modules: dict) -> str | None:
    if node.op == "call_module":
        return _RELUS.get(type(modules.get(node.target)))
    if node.op in ("call_function", "call_method"):
        return _RELU_FUNCTIONS.get(node.target)
    return None


def _layer(imported: ImportedLayer, target: nn.Module, input_scale: float, output_scale: float,
           activation: str) -> QuantLayer:
    if imported.kind not in _CHANNEL:
        raise WorkloadError(f"{imported.name}: {imported.kind} layers are not supported by "
                            "simulate_model (groups must be 1 or the channel count)")
    workload = imported.workload
    if len(workload.output.indices) != (1 if imported.kind == "linear" else 3):
        raise WorkloadError(f"{imported.name}: only batch 1 is supported")
    weight = target.weight.detach().double().numpy()
    per_channel = weight.reshape(weight.shape[0], -1)
    top = np.abs(per_channel).max(axis=1)
    weight_scales = np.where(top > 0, top / QMAX, 1.0)
    shape = (-1,) + (1,) * (weight.ndim - 1)
    q = np.clip(np.round(weight / weight_scales.reshape(shape)), -QMAX, QMAX).astype(np.int64)
    q = q.reshape(workload.shapes["B"])
    # the pipeline's factor s_in * s_w / s_out must stay below 1
    output_scale = max(output_scale, float(input_scale * weight_scales.max()) * (1 + 2 ** -20))
    bias = None if target.bias is None else target.bias.detach().double().numpy()
    params = params_from_scales(input_scale, weight_scales, output_scale, bias=bias,
                                activation=activation)
    conv = None
    if isinstance(target, nn.Conv2d):
        conv = (*target.stride, *target.padding, *target.dilation)
    return QuantLayer(imported.name, imported.kind, workload, q, params,
                      _CHANNEL[imported.kind], activation, input_scale, output_scale, conv)


__all__ = ["HostStep", "QuantLayer", "QuantizedNetwork", "global_avg_pool", "quantize_model"]
