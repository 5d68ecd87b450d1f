"""`tensorforge compile`: workload + accelerator + mapping -> program binary.

``--check`` runs the functional simulator on seeded random inputs and exits 0 only if the
result equals the workload's numpy reference; ``--json`` prints the tensorize choice, the
mapping, the DRAM layouts, instruction counts and DRAM traffic.

The hardware flags come from `tensorforge.commands.hwflags` when it exists (shared with
``generate``); until then a minimal local set with the same names is used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compile",
        help="compile a workload into accelerator instructions",
        description="Map a workload onto an accelerator and generate its LOAD/COMPUTE/STORE "
        "program.",
    )
    parser.add_argument("--workload", required=True,
                        help="workload text, e.g. 'C[i,j] += A[i,k] * B[k,j]', or a zoo name "
                        "such as resnet50:conv2_1b")
    parser.add_argument("--sizes", default="", help="index sizes, e.g. i=64,j=64,k=64")
    parser.add_argument("--mapping", default="default",
                        help="default (heuristic), library (im2col + GEMM) or a JSON file")
    parser.add_argument("--out", type=Path, help="write the program binary here")
    parser.add_argument("--check", action="store_true",
                        help="run the functional simulator on random inputs and compare with "
                        "the numpy reference")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --check inputs")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.add_argument("--save-mapping", type=Path, help="write the mapping as JSON here")
    _hardware_arguments(parser)
    parser.set_defaults(func=run)


def _hardware_arguments(parser: argparse.ArgumentParser) -> None:
    try:
        from tensorforge.commands.hwflags import add_hardware_arguments
    except ModuleNotFoundError:
        add_hardware_arguments = _local_hardware_arguments
    add_hardware_arguments(parser)


def _config(args: argparse.Namespace):
    try:
        from tensorforge.commands.hwflags import config_from_args
    except ModuleNotFoundError:
        config_from_args = _local_config
    return config_from_args(args)


def _local_hardware_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("accelerator")
    group.add_argument("--config", type=Path, help="accelerator TOML file (overrides flags)")
    group.add_argument("--intrinsic", default="gemm", type=str.lower,
                       choices=("dot", "gemv", "gemm", "conv2d"))
    group.add_argument("--pe", default="8x8", help="PE array ROWSxCOLS")
    group.add_argument("--link", default="systolic", help="none, systolic or full")
    group.add_argument("--dataflow", default=None, help="ws, os or is (default: first legal)")
    group.add_argument("--spad", default="64KiB", help="scratchpad capacity")
    group.add_argument("--banks", type=int, default=4)
    group.add_argument("--acc", default="16KiB", help="accumulator capacity")
    group.add_argument("--local", default="0", help="per-PE local memory")
    group.add_argument("--bus", type=int, default=64, help="DMA bus bits")
    group.add_argument("--burst", type=int, default=16, help="DMA max burst beats")
    group.add_argument("--in-bits", type=int, default=8)
    group.add_argument("--acc-bits", type=int, default=32)
    group.add_argument("--taps", type=int, default=3, help="CONV2D kernel taps")


def _local_config(args: argparse.Namespace):
    from tensorforge.config import DATAFLOWS, AcceleratorConfig
    from tensorforge.errors import ConfigError
    from tensorforge.intrinsics import Intrinsic

    if args.config:
        return AcceleratorConfig.from_toml(args.config)
    try:
        rows, cols = (int(v) for v in args.pe.lower().split("x"))
    except ValueError:
        raise ConfigError(f"--pe must look like 8x8, not {args.pe!r}") from None
    intrinsic = Intrinsic(args.intrinsic)
    dataflow = args.dataflow or DATAFLOWS[intrinsic][0].value
    local = args.local
    if intrinsic is Intrinsic.CONV2D and local in ("0", 0) and dataflow == "ws":
        local = str(args.taps * args.in_bits // 8)
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic.value,
        "conv_taps": args.taps,
        "array": {"rows": rows, "cols": cols, "interconnect": args.link, "dataflow": dataflow,
                  "local_bytes": local},
        "scratchpad": {"capacity": args.spad, "banks": args.banks, "accumulator": args.acc},
        "dma": {"bus_bits": args.bus, "max_burst": args.burst},
        "precision": {"in_bits": args.in_bits, "acc_bits": args.acc_bits},
    })


def _workload(args: argparse.Namespace):
    from tensorforge.compiler.workload import parse_workload
    from tensorforge.compiler.zoo import load_workload

    if "[" in args.workload:
        return parse_workload(args.workload, args.sizes, name="workload")
    return load_workload(args.workload)


def _mapping(args: argparse.Namespace, workload, config):
    from tensorforge.compiler.mappers import default_mapping, library_mapping
    from tensorforge.compiler.mapping import Mapping
    from tensorforge.errors import MappingError

    if args.mapping == "default":
        return default_mapping(workload, config)
    if args.mapping == "library":
        return library_mapping(workload, config)
    path = Path(args.mapping)
    if not path.is_file():
        raise MappingError(f"--mapping must be default, library or a JSON file; {path} is "
                           "not a file")
    return Mapping.from_json(path.read_text(), workload)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from tensorforge.compiler.codegen import generate

    workload = _workload(args)
    config = _config(args)
    mapping = _mapping(args, workload, config)
    program = generate(workload, mapping, config)
    if args.out:
        args.out.write_bytes(program.encode())
    if args.save_mapping:
        args.save_mapping.write_text(mapping.to_json())
    summary = program.describe()
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
        print(f"choice:  {summary['choice']}")
        print(f"mapping: tiles {dict(mapping.tiles)} order {list(mapping.order)}"
              + (f" fused {[list(g) for g in mapping.groups]}" if mapping.groups else ""))
        print(f"program: {stats['instructions']}, DRAM read {stats['dram_bytes_read']} B, "
              f"written {stats['dram_bytes_written']} B"
              + (f", written to {args.out}" if args.out else ""))
        if args.check:
            verdict = "equal to" if summary["check"]["equal"] else "DIFFERENT from"
            print(f"check:   functional simulator result is {verdict} the numpy reference "
                  f"(seed {args.seed})", file=sys.stdout if status == 0 else sys.stderr)
    return status
