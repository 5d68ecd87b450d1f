"""Conveniences that join pipeline stages: pick a mapping, compile, generate the Verilog."""

from __future__ import annotations

from pathlib import Path

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_stage import OutputStage, first_reserve, reserve_accumulator
from tensorforge.compiler.program import Program
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem

MAPPERS = ("default", "library")


def resolve_mapping(
    workload: Workload, config: AcceleratorConfig, mapping: Mapping | str | Path = "default",
    memory: MemorySystem = DEFAULT_MEMORY,
) -> Mapping:
    """A `Mapping` from a name ("default": the heuristic, "library": im2col + GEMM), a JSON file
    written by ``Mapping.to_json``, or a `Mapping` (returned as is). The heuristic ranks
    tilings on ``memory``, the DRAM the program will run on."""
    if isinstance(mapping, Mapping):
        return mapping
    from tensorforge.compiler.mappers import default_mapping, library_mapping

    if mapping == "default":
        return default_mapping(workload, config, memory)
    if mapping == "library":
        return library_mapping(workload, config)
    path = Path(mapping)
    if not path.is_file():
        raise MappingError(
            f"unknown mapping {str(mapping)!r}: use one of {', '.join(MAPPERS)} or the path of "
            "a mapping JSON file (tensorforge compile --save-mapping writes one)"
        )
    return Mapping.from_json(path.read_text(), workload)


def compile_workload(
    workload: Workload, config: AcceleratorConfig, mapping: Mapping | str | Path = "default",
    memory: MemorySystem = DEFAULT_MEMORY, output: OutputStage | None = None,
) -> Program:
    """Workload -> Program for ``config`` on ``memory``; ``mapping`` as in
    `resolve_mapping`; ``output``: the layer's bias, requantization and activation, done at
    STORE (an accelerator with ``output_pipeline``; `tensorforge.compiler.output_stage`).
    A workload of several product stages (MTTKRP) compiles its first stage, and the host
    finishes the rest; `compile_stages` runs them all on the device."""
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.output_room import generate_with_room

    if output is None or isinstance(mapping, Mapping):
        return generate(workload, resolve_mapping(workload, config, mapping, memory), config,
                        output=output)
    # a mapper fills the accumulator with C tiles: map for one with room for the parameter
    # blocks, then with what they turn out to need (`output_room`)
    def remap(room: AcceleratorConfig) -> Mapping:
        return resolve_mapping(workload, room, mapping, memory)

    reserve = first_reserve(output.channels(workload), config)
    return generate_with_room(workload, remap(reserve_accumulator(config, reserve)), config,
                              output, remap)


def compile_stages(workload: Workload, config: AcceleratorConfig,
                   memory: MemorySystem = DEFAULT_MEMORY, scales=None):
    """Every product stage of a multi-stage workload (MTTKRP's two) on the device, as one
    program: each intermediate requantized to ``in_bits`` at STORE and read in place by
    the next stage; needs ``config.output_pipeline``. ``scales``: one per intermediate
    (default: the largest that cannot saturate). Returns a
    `tensorforge.compiler.stage_chain.StagedProgram` (``.run``, ``.params``, ``.host_ops``)."""
    from tensorforge.compiler.stage_chain import compile_stages as chain

    return chain(workload, config, memory, scales)


def generate_verilog(config: AcceleratorConfig, target: str = "generic", *,
                     zero_init: bool = False) -> str:
    """The accelerator for ``config`` as Verilog text, top module ``accelerator``; ``target``
    ``ecp5`` builds the multipliers from ECP5 DSPs (`tensorforge.hw.targets`).

    The one text of the hardware: what ``tensorforge generate`` writes and what every
    synthesis (``explore --synthesize-top``, the calibration, the synthesis bench) reads, so
    a figure made by one is a figure of the others' netlist. No source locations (the text
    does not depend on where the checkout is); ``zero_init`` keeps the memories' zero fill.
    """
    from tensorforge.hw.accelerator import TOP_NAME, Accelerator
    from tensorforge.verilog_text import component_verilog

    return component_verilog(Accelerator(config, target=target), TOP_NAME, zero_init=zero_init)


def simulate_model(module, example_inputs, config: AcceleratorConfig, *, backend: str = "rtl",
                   memory: MemorySystem = DEFAULT_MEMORY, seed: int = 0):
    """Quantize a small float torch CNN, compile it to whole-network programs and run it.

    ``example_inputs`` is a tuple of one tensor of batch 1, as ``torch.export`` takes; it is
    also the calibration data and the input that runs. Quantization is post-training and
    symmetric (`tensorforge.compiler.quantize`): per-output-channel int8 weight scales
    ``max|W[k]|/127``, one activation scale per tensor ``max|x|/127`` calibrated on the
    example input, int32 bias at ``s_in * s_w[k]``; int8 in, int8 out, each layer's
    requantization and ReLU/ReLU6 done by the output pipeline at STORE (so ``config`` needs
    ``output_pipeline=True``). Layers are lowered directly and chained through DRAM
    (`tensorforge.compiler.network`); ops the device lacks run on the host between device
    segments and are listed in ``result.host_ops``. ``backend`` ``"rtl"`` runs each segment
    on the Verilator model of the accelerator (``result.cycles``), ``"functional"`` on the
    functional simulator (no cycles). ``result.match``: bit-exact equality with a numpy
    integer reference of the same quantized network (`tensorforge.network_reference`).
    """
    import torch

    from tensorforge.compiler.network import compile_network
    from tensorforge.compiler.quantize import quantize_model
    from tensorforge.sim.network_run import check_network

    network = quantize_model(module, example_inputs)
    program = compile_network(network, config, memory)
    with torch.no_grad():
        float_output = module(*example_inputs).detach().double().numpy()
    return check_network(program, example_inputs[0], float_output, backend, memory=memory,
                         seed=seed)
