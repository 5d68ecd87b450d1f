"""A multi-stage workload run wholly on the device: its product stages as a chain of layers.

A workload of three or more inputs is a chain of two-input products
(`tensorforge.compiler.tst.stages`): MTTKRP ``D[i,j] += A[i,k,l] * B[l,j] * C[k,j]`` is
``E[i,k,j] = sum_l A*B``, then ``D = sum_k E*C``. Without the output pipeline the device runs
the first and the host the rest (`compiler.lowering`), because ``E`` is ``acc_bits`` wide and
the operand scratchpad holds ``in_bits``. With it, each stage but the last requantizes its
result to ``in_bits`` at STORE, so the next stage can read it, and the stages are layers of a
whole-network program (`compiler.network`): one program, each stage STOREing straight into
the next one's input layout, a barrier of tokens between them.

* **the stages as layers**: stage ``s`` is renamed to the layers' tensors, ``C += A * B``:
  its left operand (the workload's first input, or the previous stage's result) is ``A``,
  its right operand (a workload input) ``B``, given at run time; its result ``C``.
* **the intermediates** are int8 at one per-tensor scale each (`intermediate_params`), the
  output stage's integer semantics (`tensorforge.requant`): no bias, zero point 0, clamp to
  ``in_bits``. The default scale is the largest one that cannot saturate: a stage summing
  ``R`` products of operands at most ``2**(in_bits-1)`` in magnitude reaches
  ``R * 4**(in_bits-1)`` at most, which maps to ``2**(in_bits-1) - 1``. Callers with
  calibration data may give their own scales.
* **the last stage** stores its ``acc_bits`` accumulator: the workload's output, exact given
  the requantized intermediates (`tensorforge.stage_reference` computes the same integers
  without the compiler).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.network import NetworkProgram, compile_network
from tensorforge.compiler.quantize import QuantizedNetwork, QuantLayer
from tensorforge.compiler.tst import stages
from tensorforge.compiler.workload import Access, Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import WorkloadError
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.requant import OutputParams, quantize_multiplier

ROLES = ("A", "B", "C")  # left operand, right operand, result: the layers' tensor names


def is_multi_stage(workload: Workload) -> bool:
    return len(workload.inputs) > 2


def saturation_free_scale(stage: Workload, in_bits: int) -> float:
    """The largest scale at which ``stage``'s result cannot leave ``in_bits`` (docstring)."""
    summed = math.prod(stage.sizes[i] for i in stage.reduction_indices)
    largest = 1 << (in_bits - 1)
    return (largest - 1) / (summed * largest * largest)


def intermediate_params(workload: Workload, in_bits: int = 8, acc_bits: int = 32,
                        scales: Sequence[float] | None = None) -> tuple[OutputParams, ...]:
    """One per-tensor output stage per intermediate of ``workload`` (all stages but the
    last): requantization by ``scales`` (default `saturation_free_scale`), clamp to
    ``in_bits``."""
    inner = stages(workload)[:-1]
    if scales is None:
        scales = [saturation_free_scale(stage, in_bits) for stage in inner]
    if len(scales) != len(inner):
        raise WorkloadError(f"{workload.name} has {len(inner)} intermediate(s), not "
                            f"{len(scales)} scales")
    found = []
    for scale in scales:
        multiplier, shift = quantize_multiplier(scale, acc_bits)
        found.append(OutputParams.per_channel(1, multiplier=multiplier, shift=shift,
                                              low=-(1 << (in_bits - 1)),
                                              high=(1 << (in_bits - 1)) - 1))
    return tuple(found)


def _renamed(stage: Workload) -> Workload:
    """``stage`` with its operands and result named ``A``, ``B``, ``C``."""
    left, right = stage.inputs
    if left.tensor == right.tensor:
        raise WorkloadError(f"{stage.text} multiplies {left.tensor} by itself; the device "
                            "chain needs two operands")
    names = {left.tensor: "A", right.tensor: "B", stage.output.tensor: "C"}

    def access(a: Access) -> Access:
        return Access(names[a.tensor], a.dims)

    overrides = tuple((names[t], shape) for t, shape in stage.shape_overrides)
    return Workload(stage.name, access(stage.output), (access(left), access(right)),
                    stage.extents, overrides)


def stage_network(workload: Workload, params: Sequence[OutputParams]) -> QuantizedNetwork:
    """``workload``'s stages as layers ``stage0``, ``stage1``, ... (module docstring); the
    ``B`` of each is a placeholder, the workload input given at run time."""
    layers = []
    parts = stages(workload)
    for position, stage in enumerate(parts):
        renamed = _renamed(stage)
        last = position == len(parts) - 1
        layers.append(QuantLayer(
            f"stage{position}", "stage", renamed, np.zeros(renamed.shapes["B"], dtype=np.int64),
            None if last else params[position], None, "none", 1.0, 1.0, None))
    return QuantizedNetwork(workload.name, tuple(layers), 1.0, 1.0,
                            layers[0].workload.shapes["A"])


@dataclass(frozen=True)
class StagedProgram:
    """A multi-stage workload compiled as one chain (`NetworkProgram`), with the parameters
    of its intermediates."""

    workload: Workload
    params: tuple[OutputParams, ...]
    network: NetworkProgram

    @property
    def host_ops(self) -> tuple[str, ...]:
        return tuple(str(op) for op in self.network.host_ops)

    def operands(self, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict]:
        """The first layer's ``A`` and each layer's ``B`` (by layer name) from the workload's
        inputs."""
        parts = stages(self.workload)
        first = np.asarray(inputs[parts[0].inputs[0].tensor], dtype=np.int64)
        weights = {f"stage{position}": np.asarray(inputs[stage.inputs[1].tensor],
                                                  dtype=np.int64)
                   for position, stage in enumerate(parts)}
        return first, weights

    def run(self, inputs: Mapping[str, np.ndarray], device) -> tuple[np.ndarray, list]:
        """The workload's output (int64) and each segment's cycles, every segment run by
        ``device`` (`sim.network_run.segment_runner`)."""
        first, weights = self.operands(inputs)
        return self.network.run(first, device, weights)


def compile_stages(workload: Workload, config: AcceleratorConfig,
                   memory: MemorySystem = DEFAULT_MEMORY,
                   scales: Sequence[float] | None = None) -> StagedProgram:
    """Every stage of ``workload`` on the device, chained (module docstring)."""
    precision = config.precision
    params = intermediate_params(workload, precision.in_bits, precision.acc_bits, scales)
    network = compile_network(stage_network(workload, params), config, memory)
    return StagedProgram(workload, params, network)
