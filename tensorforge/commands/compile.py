"""`tensorforge compile`: workload + accelerator + mapping -> program binary.

A bare zoo model name compiles the whole network (`tensorforge.commands.compile_network`);
a workload of three or more inputs (MTTKRP) with ``--output-pipeline`` runs every stage on
the device as one program (`tensorforge.commands.staged`); without it the host finishes the
stages after the first, which the summary's ``host_ops`` lists.

``--out DIR`` writes what a user's own project needs (`tensorforge.project_files`): the
program and its disassembly, the packed DRAM image of seeded inputs, the register values, the
expected output, a C header of the accelerator's parameters and memory map, and a cocotb test
that runs them on ``accelerator.v``. A path ending in ``.bin`` writes the instruction binary
only (what ``tensorforge run`` takes). ``--check`` runs the functional simulator on seeded
random inputs and exits 0 only if the result equals the workload's numpy reference;
``--json`` prints the tensorize choice, the mapping, the DRAM layouts, instruction counts,
DRAM traffic and the memory compiled for.

The default mapper ranks tilings on the DRAM the program will run on (its latency and the
bursts it keeps in flight decide between few long transfers and many short ones), so the
memory flags of `tensorforge.commands.memflags` (shared with ``simulate``; default
`tensorforge.memory.DEFAULT_MEMORY`) are part of what is compiled, and the summary names
them. The hardware flags are `tensorforge.commands.hwflags`' (shared with ``generate``), the
workload flags `tensorforge.commands.workload_args`' (shared with ``simulate``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tensorforge.commands import compile_network
from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.commands.memflags import add_memory_arguments, memory_from_args
from tensorforge.commands.workload_args import add_workload_arguments, workload_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="compile a workload into accelerator instructions",
        description="Map a workload onto an accelerator and generate its LOAD/COMPUTE/STORE "
        "program.",
    )
    add_workload_arguments(parser)
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write the program, DRAM image, register values, expected output, "
                        "C header and a cocotb test into DIR (a path ending in .bin: the "
                        "instruction binary only)")
    parser.add_argument("--check", action="store_true",
                        help="run the functional simulator on random inputs and compare with "
                        "the numpy reference")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the --check inputs and of those --out DIR packs")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.add_argument("--save-mapping", type=Path, help="write the mapping as JSON here")
    compile_network.add_network_arguments(parser)
    add_hardware_arguments(parser)
    add_memory_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from tensorforge.api import resolve_mapping
    from tensorforge.commands import staged
    from tensorforge.compiler.codegen import generate
    from tensorforge.compiler.stage_chain import is_multi_stage

    config = config_from_args(args)
    memory = memory_from_args(args)
    if compile_network.is_model_name(args.workload):
        return compile_network.run(args, config, memory)
    workload = workload_from_args(args)
    if is_multi_stage(workload) and config.output_pipeline:
        return staged.compile_run(args, workload, config, memory)
    mapping = resolve_mapping(workload, config, args.mapping, memory)
    program = generate(workload, mapping, config)
    if args.out and args.out.suffix == ".bin":
        args.out.write_bytes(program.encode())
    elif args.out:
        from tensorforge.project_files import write_project_files

        write_project_files(program, args.out, seed=args.seed, memory=memory)
    if args.save_mapping:
        args.save_mapping.write_text(mapping.to_json())
    summary = program.describe()
    summary["memory"] = {"name": memory.describe(), **memory.to_dict()}
    summary["host_ops"] = staged.host_stages(program.lowering)
    status = 0
    if args.check:
        rng = np.random.default_rng(args.seed)
        inputs = workload.random_inputs(rng)
        result = program.run_functional(inputs)
        expected = workload.reference(inputs)
        equal = bool(np.array_equal(result, expected))
        summary["check"] = {"seed": args.seed, "equal": equal,
                            "mismatches": int(np.count_nonzero(result != expected))}
        status = 0 if equal else 1
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        stats = summary["statistics"]
        print(f"{workload}  on  {config.describe()}")
        print(f"memory:  {memory.describe()} (the mapping is chosen for it)")
        print(f"choice:  {summary['choice']}")
        print(f"mapping: tiles {dict(mapping.tiles)} order {list(mapping.order)}"
              + (f" fused {[list(g) for g in mapping.groups]}" if mapping.groups else ""))
        print(f"program: {stats['instructions']}, DRAM read {stats['dram_bytes_read']} B, "
              f"written {stats['dram_bytes_written']} B"
              + (f", written to {args.out}" if args.out else ""))
        if summary["host_ops"]:
            print(f"host:    {'; '.join(summary['host_ops'])}; --output-pipeline runs every "
                  "stage on the device")
        if args.check:
            verdict = "equal to" if summary["check"]["equal"] else "DIFFERENT from"
            print(f"check:   functional simulator result is {verdict} the numpy reference "
                  f"(seed {args.seed})", file=sys.stdout if status == 0 else sys.stderr)
    return status
