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

Global average pooling keeps its input's scale. On the device (the default) it is a layer:
a depthwise convolution of all-ones weights over the whole image sums each channel, and the
output stage multiplies the sum by ``1 / pixels`` (gemmlowp multiplier and rounding shift).
As a host step (``pool_on_device=False``, or a 1x1 image) it is the integer sum divided by
the pixel count, rounded half away from zero. Flatten is a reshape.

Max pooling (``MaxPool2d``, ``F.max_pool2d``: any kernel and stride, padding up to half the
kernel, no dilation or ceil mode) keeps its input's scale and is always a device layer of
its own that reads the previous layer's int8 output: ``C[c,x,y] max= A[c,sx*x+r-p,sy*y+s-p]
* B[c,r,s]`` with all-ones ``B`` (MAX COMPUTEs, `tensorforge.isa`'s ``reduce``), stored
through an identity output stage (multiplier ``2**31 - 1``, shift 0, no clamp beyond int8),
so the stored int8 values are the window maxima themselves. Requantization is monotone, so
the max could as well be taken after the producing layer's output stage; a separate layer
is simpler than fusing it into the convolution. LOAD pads with zeros, which equals max
pooling's -inf padding only on input that cannot be negative: a padded pool must follow a
ReLU or ReLU6 (otherwise a `WorkloadError`).

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
``Conv2d`` (any kernel, stride, padding, dilation; groups 1 or depthwise), ``Linear``,
ReLU / ReLU6 right after a layer (module or function), max pooling, global average pooling
(``AdaptiveAvgPool2d(1)``, ``mean`` over the pixels), residual additions and flatten,
batch 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import fx, nn

from tensorforge.compiler.residual import add_layer, is_add, rereading
from tensorforge.compiler.torch_import import ImportedLayer, from_torch, window_expression
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.errors import WorkloadError
from tensorforge.requant import OutputParams, params_from_scales, quantize_multiplier

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
    kind: str  # conv2d, depthwise_conv2d, linear, global_avg_pool or max_pool
    workload: Workload
    weight: np.ndarray  # int64 holding int8 values, the workload's B shape
    params: OutputParams | None  # None: the accumulator is stored (a workload's last stage)
    channel: str | None  # the output index the params run along (None: per-tensor)
    activation: str  # none, relu or relu6
    input_scale: float
    output_scale: float
    conv: tuple[int, int, int, int, int, int] | None  # stride, padding, dilation (h, w)
    kernel: tuple[int, int] | None = None  # max_pool: the window (the weight is all ones)
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

    ``pool_on_device`` makes global average pooling a device layer (`_pool`), else a host
    step."""
    if not isinstance(example_inputs, tuple | list) or len(example_inputs) != 1:
        raise WorkloadError("simulate_model takes example_inputs as a tuple of one tensor, as "
                            "torch.export does: (x,)")
    (x,) = example_inputs
    if x.dim() < 2 or x.shape[0] != 1:
        raise WorkloadError(f"the example input must have batch 1, not shape {tuple(x.shape)}")
    module = module.eval()
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
        elif _is_global_pool(node, target, values):
            shape = tuple(values[previous].shape[1:]) if previous is not None else tuple(
                x.shape[1:])
            steps.append(_pool(node.name, shape, scale) if pool_on_device and
                         shape[1] * shape[2] > 1 else HostStep(node.name, "global_avg_pool"))
            previous = node
            if isinstance(steps[-1], QuantLayer):
                tensors[node] = (node.name, scale)
        elif (pool := _max_pool_geometry(node, target)) is not None:
            shape = tuple(values[previous].shape[1:]) if previous is not None else tuple(
                x.shape[1:])
            layer = _max_pool(node.name, shape, tuple(values[node].shape[1:]), pool, scale,
                              _nonnegative(steps))
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
                "Conv2d (groups 1 or depthwise), Linear, ReLU/ReLU6 after a layer, max "
                "pooling, global average pooling, flatten and residual additions (x + f(x))")
        index += 1
    if not steps or not isinstance(steps[-1], QuantLayer):
        raise WorkloadError("the network must end with a Conv2d or Linear layer")
    name = name or type(module).__name__
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


def _is_global_pool(node: fx.Node, target, values) -> bool:
    if isinstance(target, nn.AdaptiveAvgPool2d):
        size = target.output_size
        return size in (1, (1, 1))
    if node.op in ("call_function", "call_method") and node.target in (torch.mean, "mean"):
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dims = tuple(dims) if isinstance(dims, list | tuple) else (dims,)
        return {d % 4 for d in dims} == {2, 3}
    if node.op == "call_function" and node.target is torch.nn.functional.adaptive_avg_pool2d:
        return node.args[1] in (1, (1, 1))
    return False


def _pool(name: str, shape: tuple[int, ...], scale: float) -> QuantLayer:
    """Global average pooling as a device layer: a depthwise convolution whose kernel is the
    whole ``(C, H, W)`` input, all ones, so the accumulator holds each channel's sum; the
    output stage multiplies by ``1 / (H*W)`` (gemmlowp's rounding) at the input's scale."""
    channels, height, width = shape
    workload = parse_workload("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]",
                              {"c": channels, "x": 1, "y": 1, "r": height, "s": width,
                               "A": shape}, name=name)
    multiplier, shift = quantize_multiplier(1 / (height * width))
    params = OutputParams.per_channel(channels, multiplier=multiplier, shift=shift,
                                      low=-QMAX - 1, high=QMAX)
    return QuantLayer(name, "global_avg_pool", workload, np.ones(shape, dtype=np.int64), params,
                      "c", "none", scale, scale, None)


def _max_pool_geometry(node: fx.Node, target) -> tuple[tuple[int, int], ...] | None:
    """``(kernel, stride, padding)`` (each ``(h, w)``) of a max pooling node, else None;
    a `WorkloadError` for the options the device does not run."""
    if isinstance(target, nn.MaxPool2d):
        options = {name: getattr(target, name) for name in (
            "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")}
    elif node.op == "call_function" and node.target is torch.nn.functional.max_pool2d:
        names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                 "return_indices")
        options = {"stride": None, "padding": 0, "dilation": 1, "ceil_mode": False,
                   "return_indices": False, **dict(zip(names, node.args, strict=False)),
                   **node.kwargs}
    else:
        return None

    def pair(value) -> tuple[int, int]:
        return (value, value) if isinstance(value, int) else tuple(value)

    kernel = pair(options["kernel_size"])
    stride = pair(options["stride"] or kernel)  # torch: the kernel when not given
    padding = pair(options["padding"])
    if (pair(options["dilation"]) != (1, 1) or options["ceil_mode"]
            or options["return_indices"]):
        raise WorkloadError(f"{node.name}: max pooling with dilation, ceil_mode or "
                            "return_indices is not supported by simulate_model; use "
                            "dilation=1, ceil_mode=False")
    return kernel, stride, padding


def _nonnegative(steps: list) -> bool:
    """Whether the last step's output cannot be negative: a layer with ReLU/ReLU6, or a max
    pool over such an output."""
    for step in reversed(steps):
        if isinstance(step, QuantLayer) and step.kind != "max_pool":
            return step.activation in ("relu", "relu6")
        if isinstance(step, HostStep):
            return False
    return False


def _max_pool(name: str, shape: tuple[int, ...], out_shape: tuple[int, ...],
              geometry: tuple[tuple[int, int], ...], scale: float, nonnegative: bool
              ) -> QuantLayer:
    """Max pooling as a device layer (module docstring): a ``max=`` workload over the
    ``(C, H, W)`` input with an all-ones kernel, stored through an identity output stage."""
    (kh, kw), (sh, sw), (ph, pw) = geometry
    if (ph or pw) and not nonnegative:
        raise WorkloadError(
            f"{name}: a padded max pool runs on the device only after a ReLU or ReLU6 (the "
            "LOADs pad with zeros, which is max pooling's -inf padding only on non-negative "
            "input); use padding=0 or put the pool after the activation")
    channels = shape[0]
    rows, cols = window_expression(sh, "x", 1, "r", ph), window_expression(sw, "y", 1, "s", pw)
    workload = parse_workload(f"C[c,x,y] max= A[c,{rows},{cols}] * B[c,r,s]",
                              {"c": channels, "x": out_shape[1], "y": out_shape[2], "r": kh,
                               "s": kw, "A": shape}, name=name)
    # multiplier 2**31 - 1 at shift 0 returns every int8 value as it is (`requant`)
    params = OutputParams.per_channel(channels, multiplier=(1 << 31) - 1, shift=0,
                                      low=-QMAX - 1, high=QMAX)
    return QuantLayer(name, "max_pool", workload, np.ones((channels, kh, kw), dtype=np.int64),
                      params, "c", "none", scale, scale, (sh, sw, ph, pw, 1, 1), (kh, kw))


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
