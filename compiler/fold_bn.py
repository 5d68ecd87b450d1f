"""Batch normalization folded into the convolution before it, ahead of quantization.

In eval mode a ``BatchNorm2d`` is a per-channel affine map with fixed statistics, so after a
``Conv2d`` it is the same convolution with other weights (the standard post-training folding
of TFLite's converter and PyTorch's ``fuse_conv_bn_eval``)::

    scale[k] = gamma[k] / sqrt(var[k] + eps)
    W'[k]    = W[k] * scale[k]
    b'[k]    = (b[k] - mean[k]) * scale[k] + beta[k]     (b = 0 for a bias-free conv)

`fold_batch_norms` rewrites the traced graph so: each batch norm node (``nn.BatchNorm2d``,
or ``F.batch_norm`` whose statistics are module attributes) is removed and the convolution
it reads is replaced by the folded one, under the same name, so conv -> bn -> ReLU becomes
one device layer with a fused ReLU. The caller's module is not changed (the graph holds its
own copy of the module tree's containers, and the folded convolution is a new module).

The statistics are the running ones (eval semantics: `quantize_model` puts the module in
eval mode first); ``F.batch_norm(..., training=True)`` and a ``BatchNorm2d`` without running
statistics (``track_running_stats=False``, batch statistics even in eval) are refused, as is
a batch norm that does not read a ``Conv2d``'s output, or one whose convolution's output is
also read elsewhere (folding would change what the other reader sees).
"""

from __future__ import annotations

import copy
import functools

import torch
from torch import fx, nn

from tensorforge.errors import WorkloadError

_BATCH_NORM_ARGS = ("input", "running_mean", "running_var", "weight", "bias", "training",
                    "momentum", "eps")


def fold_batch_norms(graph: fx.GraphModule) -> fx.GraphModule:
    """``graph`` with every batch norm folded into the convolution it reads (module
    docstring); the same object, rewritten and recompiled, when it had any."""
    modules = dict(graph.named_modules())
    folded = False
    for node in list(graph.graph.nodes):
        statistics = _statistics(node, modules, graph)
        if statistics is None:
            continue
        source = node.args[0] if node.args else node.kwargs.get("input")
        conv = modules.get(source.target) if isinstance(source, fx.Node) and (
            source.op == "call_module") else None
        if not isinstance(conv, nn.Conv2d):
            what = source.name if isinstance(source, fx.Node) else repr(source)
            raise WorkloadError(
                f"{node.name} (batch norm) normalizes {what}, not a Conv2d's output: "
                "simulate_model folds a batch norm into the convolution right before it; "
                "put it right after a Conv2d (or remove it)")
        if len(source.users) > 1 or sum(n.target == source.target for n in graph.graph.nodes
                                        if n.op == "call_module") > 1:
            others = ", ".join(u.name for u in source.users if u is not node) or source.target
            raise WorkloadError(
                f"{node.name} (batch norm) cannot be folded into {source.name}: that "
                f"convolution's output or module is also used by {others}; give the batch "
                "norm a convolution of its own")
        graph.add_submodule(source.target, fold_conv(conv, *statistics))
        modules[source.target] = graph.get_submodule(source.target)
        node.replace_all_uses_with(source)
        attributes = [a for a in node.all_input_nodes if a.op == "get_attr"]
        graph.graph.erase_node(node)
        for attribute in attributes:
            if not attribute.users:
                graph.graph.erase_node(attribute)
        folded = True
    if folded:
        graph.graph.lint()
        graph.delete_all_unused_submodules()
        graph.recompile()
    return graph


def fold_conv(conv: nn.Conv2d, mean: torch.Tensor, var: torch.Tensor,
              gamma: torch.Tensor | None, beta: torch.Tensor | None, eps: float) -> nn.Conv2d:
    """A copy of ``conv`` followed by the batch norm of these statistics (module docstring)."""
    with torch.no_grad():
        scale = (gamma if gamma is not None else torch.ones_like(var)) / torch.sqrt(var + eps)
        bias = conv.bias if conv.bias is not None else torch.zeros_like(mean)
        shift = beta if beta is not None else torch.zeros_like(mean)
        folded = copy.deepcopy(conv)
        folded.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
        folded.bias = nn.Parameter((bias - mean) * scale + shift)
    return folded


def _statistics(node: fx.Node, modules: dict, graph: fx.GraphModule) -> tuple | None:
    """``(mean, var, gamma, beta, eps)`` of a batch norm node, else None; a `WorkloadError`
    for one that normalizes with batch statistics."""
    if node.op == "call_module" and isinstance(modules.get(node.target), nn.BatchNorm2d):
        norm = modules[node.target]
        if norm.running_mean is None:
            raise WorkloadError(
                f"{node.name}: BatchNorm2d(track_running_stats=False) normalizes with batch "
                "statistics even in eval mode; simulate_model folds running statistics "
                "(track_running_stats=True)")
        return norm.running_mean, norm.running_var, norm.weight, norm.bias, norm.eps
    if node.op != "call_function" or node.target is not torch.nn.functional.batch_norm:
        return None
    options = {"weight": None, "bias": None, "training": False, "eps": 1e-5,
               **dict(zip(_BATCH_NORM_ARGS, node.args, strict=False)), **node.kwargs}
    if options["training"]:
        raise WorkloadError(f"{node.name}: F.batch_norm(training=True) normalizes with batch "
                            "statistics; simulate_model folds running statistics "
                            "(training=False)")
    tensors = [_constant(options[name], node, graph)
               for name in ("running_mean", "running_var", "weight", "bias")]
    if tensors[0] is None or tensors[1] is None:
        raise WorkloadError(f"{node.name}: F.batch_norm without running statistics is not "
                            "supported by simulate_model; pass running_mean and running_var")
    return (*tensors, options["eps"])


def _constant(value, node: fx.Node, graph: fx.GraphModule) -> torch.Tensor | None:
    """A batch norm argument: a module attribute (``get_attr``), a tensor or None."""
    if isinstance(value, fx.Node):
        if value.op != "get_attr":
            raise WorkloadError(f"{node.name}: F.batch_norm's statistics and affine "
                                f"parameters must be module attributes, not {value.name}")
        return functools.reduce(getattr, value.target.split("."), graph)
    return value


__all__ = ["fold_batch_norms", "fold_conv"]
