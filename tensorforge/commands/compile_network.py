"""`tensorforge compile --workload MODEL`: one program per device segment of a zoo model.

A bare zoo model name (``dqn``, ``mobilenet_v1``, ``resnet50``) compiles the whole network
with `tensorforge.compiler.network`: each layer lowered directly with an output stage (so the
accelerator needs ``--output-pipeline``), chained layer to layer through DRAM where the next
layer reads the previous output, one program per segment, the host ops between them listed.
A model with a graph (``resnet50``, ``mobilenet_v2``) is built as a float module with seeded
weights and quantized, residual additions included; the others' layer lists are read as a
chain (`tensorforge.compiler.zoo_network` says how). ``--resolution N`` builds a graph for an NxN
input. ``--out DIR`` writes ``segment<i>.bin`` (instructions), ``segment<i>.asm`` and
``network.json``; ``--check`` runs every segment on the functional simulator against the
numpy references (the integer network's for a graph, else each layer's, chained).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tensorforge.errors import ConfigError, MappingError


def add_network_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resolution", type=int, metavar="N",
                        help="a zoo model compiled from its graph (resnet50, mobilenet_v2): the "
                        "input's height and width (default 224)")


def is_model_name(text: str) -> bool:
    from tensorforge.compiler.zoo import list_models

    return "[" not in text and ":" not in text and text in list_models()


def segments_summary(program) -> dict[str, list]:
    """A `NetworkProgram`'s segments (layers, instructions, DRAM bytes; with an activation
    window, the bytes of layer outputs kept on chip and stored to DRAM) and host ops."""
    window = bool(program.config.activation_window)
    return {"segments": [{"layers": [layer.name for layer in segment.layers],
                          "instructions": len(segment.instructions),
                          "dram_bytes": segment.data_bytes + 16 * len(segment.instructions),
                          **({"activations_on_chip": segment.activation_bytes[0],
                              "activations_in_dram": segment.activation_bytes[1]}
                             if window else {})}
                         for segment in program.segments],
            "host_ops": [str(op) for op in program.host_ops]}


def write_segments(program, out: Path, summary: dict) -> None:
    """``segment<i>.bin``, ``segment<i>.asm`` and ``network.json`` (``summary``) into ``out``."""
    from tensorforge.isa import disassemble, encode_program

    out.mkdir(parents=True, exist_ok=True)
    for number, segment in enumerate(program.segments):
        instructions = list(segment.instructions)
        (out / f"segment{number}.bin").write_bytes(encode_program(instructions))
        (out / f"segment{number}.asm").write_text(disassemble(instructions))
    (out / "network.json").write_text(json.dumps(summary, indent=2))


def print_segments(summary: dict) -> None:
    for number, segment in enumerate(summary["segments"]):
        kept = (f"; activations {segment['activations_on_chip']:,} B on chip, "
                f"{segment['activations_in_dram']:,} B in DRAM"
                if "activations_on_chip" in segment else "")
        print(f"segment {number}: {segment['instructions']} instructions, "
              f"layers {', '.join(segment['layers'])}{kept}")
    print(f"host ops: {', '.join(summary['host_ops']) or 'none'}")


def run(args: argparse.Namespace, config, memory) -> int:
    from tensorforge.compiler.network import compile_network
    from tensorforge.compiler.zoo_network import build_network, check_built

    if not config.output_pipeline:
        raise ConfigError(f"a whole-network program ({args.workload}) chains int8 layers "
                          "through the output pipeline: add --output-pipeline, or name one "
                          f"layer ({args.workload}:LAYER)")
    if args.mapping != "default" or args.save_mapping:
        raise MappingError("a whole-network program picks each layer's mapping itself; "
                           "--mapping and --save-mapping apply to one layer (MODEL:LAYER)")
    network, float_run = build_network(args.workload, args.seed, args.resolution)
    program = compile_network(network, config, memory)
    summary = {"network": args.workload, "config": config.describe(),
               "memory": memory.describe(), **segments_summary(program)}
    if args.out:
        write_segments(program, args.out, summary)
    status = 0
    if args.check:
        summary["check"] = check_built(program, float_run, args.seed)
        status = 0 if summary["check"]["equal"] else 1
    if args.json:
        print(json.dumps(summary, indent=2))
        return status
    layers = sum(len(s["layers"]) for s in summary["segments"])
    print(f"{args.workload}: {layers} layers on {config.describe()}, {memory.describe()}")
    print_segments(summary)
    if args.check:
        verdict = "equal to" if status == 0 else "DIFFERENT from"
        print(f"check:   functional simulator result is {verdict} the numpy reference "
              f"(seed {args.seed})")
        check = summary["check"]
        if "max_abs_error_vs_float" in check:
            print(f"         dequantized output within {check['max_abs_error_vs_float']:.4g} of "
                  f"the float module's (largest {check['largest_float_output']:.4g})")
    return status
