"""A zoo model as a quantized network, for whole-network programs (`compile --workload NAME`).

Where the zoo has the model's graph (`compiler.zoo_graphs.GRAPHS`: ``resnet50``,
``mobilenet_v2``), `build_network` builds it as a float torch module with seeded weights
and quantizes it with the post-training path (`compiler.quantize`, calibrated on the
module's seeded example input), so residual additions and projection shortcuts are device
layers reading the tensors they add; `check_built` runs its programs against
`tensorforge.network_reference`.

Other zoo models list layers, not a graph, and carry no weights. `zoo_network` reads them as a
chain: each layer's input ``A`` is the previous layer's output where it holds it (the same
shape, or that shape zero-padded as the zoo's pre-padded inputs are:
`network.input_offsets`), otherwise a tensor from the host (a branch, a residual path, the
network input). Weights are seeded random int8 (``B``), each layer's output stage a bias
and a requantization scale ``1 / (64 * sqrt(reduction length))`` that keeps outputs spread
over int8, channel = the output's first index. `check_zoo_network` runs the segments on the
functional simulator (or the RTL) against each workload's numpy reference chained the same
way.
"""

from __future__ import annotations

import math

import numpy as np

from tensorforge.compiler.network import NetworkProgram, input_offsets, pad_into
from tensorforge.compiler.quantize import QMAX, QuantizedNetwork, QuantLayer
from tensorforge.compiler.zoo import Model, load_model
from tensorforge.errors import WorkloadError
from tensorforge.requant import OutputParams, quantize_multiplier


def build_network(name: str, seed: int = 0, resolution: int | None = None
                  ) -> tuple[QuantizedNetwork, tuple[object, np.ndarray] | None]:
    """The network ``compile --workload NAME`` compiles, and for a model built from its graph
    the float input and output `check_built` compares with (None for a layer-list chain).
    ``resolution``: the input's height and width (graphs only; default the model's)."""
    from tensorforge.compiler.zoo_graphs import GRAPHS

    model = load_model(name)
    if name not in GRAPHS:
        if resolution is not None:
            raise WorkloadError(f"{name} is a list of layers without a graph, compiled at the "
                                f"sizes it lists; --resolution applies to {', '.join(GRAPHS)}")
        return zoo_network(model, seed), None
    import torch

    from tensorforge.compiler.quantize import quantize_model

    module, inputs = GRAPHS[name](seed, *(() if resolution is None else (resolution,)))
    with torch.no_grad():
        float_output = module(*inputs).double().numpy()
    return quantize_model(module, inputs, name), (inputs[0], float_output)


def check_built(program: NetworkProgram, float_run: tuple[object, np.ndarray] | None,
                seed: int = 0, backend: str = "functional") -> dict[str, object]:
    """`check_zoo_network` for a layer-list chain (``float_run`` None); for a network built
    from its graph, every segment and host op run from the quantized float input and the
    int8 output compared with the integer reference (`sim.network_run.check_network`)."""
    if float_run is None:
        return check_zoo_network(program, seed, backend)
    from tensorforge.sim.network_run import check_network

    result = check_network(program, float_run[0], float_run[1], backend, seed=seed)
    summary = result.summary()
    return {"seed": seed, "equal": result.match, "instructions": summary["instructions"],
            "host_ops": summary["host_ops"],
            "max_abs_error_vs_float": summary["max_abs_error_vs_float"],
            "largest_float_output": float(np.abs(result.float_output).max())}


def zoo_network(model: Model, seed: int = 0) -> QuantizedNetwork:
    """``model``'s layers as int8 layers with seeded random weights and output stages."""
    rng = np.random.default_rng(seed)
    layers = []
    for layer in model.layers:
        workload = layer.workload
        if sorted(workload.input_names) != ["A", "B"]:
            raise WorkloadError(f"{model.name}:{layer.name} is not a layer of activations A "
                                f"and weights B ({workload.text}); whole-network programs "
                                "chain two-input layers")
        channel = workload.output.indices[0]
        reduction = max(1, workload.macs // math.prod(workload.shapes["C"]))
        multiplier, shift = quantize_multiplier(1 / (64 * math.sqrt(reduction)))
        channels = workload.sizes[channel]
        params = OutputParams.per_channel(
            channels, bias=rng.integers(-256, 256, channels), multiplier=multiplier,
            shift=shift, low=-QMAX - 1, high=QMAX)
        weight = rng.integers(-QMAX, QMAX + 1, workload.shapes["B"])
        layers.append(QuantLayer(layer.name, "zoo", workload, weight, params, channel, "none",
                                 1.0, 1.0, None))
    return QuantizedNetwork(model.name, tuple(layers), 1.0, 1.0,
                            layers[0].workload.shapes["A"])


def _input(layer: QuantLayer, previous: np.ndarray | None, rng) -> np.ndarray:
    """The layer's ``A``: the previous output zero-padded into place, or a host tensor."""
    shape = layer.workload.shapes["A"]
    if previous is None or input_offsets(previous.shape, shape) is None:
        return rng.integers(-QMAX - 1, QMAX + 1, shape)
    return pad_into(previous, shape)


def _reference(layer: QuantLayer, a: np.ndarray) -> np.ndarray:
    workload = layer.workload
    acc = workload.reference({"A": a, "B": layer.weight})
    return layer.params.apply(acc, workload.output.indices.index(layer.channel), 32)


def check_zoo_network(program: NetworkProgram, seed: int = 0, backend: str = "functional"
                      ) -> dict[str, object]:
    """Run every segment on ``backend`` (`sim.network_run.segment_runner`); compare each
    segment's output with the chained references. Returns counts (and RTL cycles) per
    segment."""
    from tensorforge.sim.network_run import segment_runner

    device = segment_runner(program.config, backend, seed=seed)
    rng = np.random.default_rng(seed)
    previous = None
    segments = []
    for segment in program.segments:
        first = _input(segment.layers[0], previous, rng)
        expected = first
        for position, layer in enumerate(segment.layers):
            expected = _reference(layer, expected if position == 0 else _input(
                layer, expected, rng))
        after, cycles = device(segment, segment.pack(first))
        output = np.asarray(segment.unpack(after))
        segments.append({"layers": [layer.name for layer in segment.layers],
                         "instructions": len(segment.instructions), "cycles": cycles,
                         "equal": bool(np.array_equal(output, expected))})
        previous = expected
    return {"seed": seed, "equal": all(s["equal"] for s in segments), "segments": segments}

