"""`tensorforge run`: run a compiled program on a board over its UART host link.

The program binary that ``compile --out`` writes holds the instructions only; where the
inputs go and where the output comes from (the DRAM layouts) follow from the workload, the
mapping and the accelerator. So ``run`` takes the flags ``compile`` took (best with the
mapping ``compile --save-mapping`` wrote), compiles again, and refuses a binary that differs
from what those flags compile to. The board must hold the same accelerator: the SoC reports
a digest of its configuration, and ``run`` checks it (`tensorforge.board_runtime`).

Inputs come from ``--inputs`` (a ``.npz`` with one array per input tensor, by name) or are
seeded random ones (``--seed``). The output is compared with the workload's numpy reference
(exit 1 when it differs) and written to ``--out`` (``.npy``) when asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.commands.memflags import add_memory_arguments, memory_from_args
from tensorforge.commands.workload_args import add_workload_arguments, workload_from_args
from tensorforge.errors import ConfigError, WorkloadError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a compiled program on a board (tensorforge build) over its UART",
        description="Load a program and its inputs into a board's memory, start the "
        "accelerator, wait for it and read the output back.",
    )
    parser.add_argument("program", type=Path, help="program binary from `tensorforge compile "
                        "--out`")
    parser.add_argument("--port", required=True,
                        help="the board's serial port (/dev/ttyUSB0) or a pyserial URL")
    parser.add_argument("--baud", type=int, default=115200,
                        help="baud rate the bitstream was built with (default 115200)")
    add_workload_arguments(parser)
    parser.add_argument("--inputs", type=Path,
                        help=".npz with one array per input tensor (default: random, --seed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--out", type=Path, help="write the output here (.npy)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the accelerator (default 60)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_hardware_arguments(parser)
    add_memory_arguments(parser)
    parser.set_defaults(func=run)


def _inputs(args: argparse.Namespace, workload) -> dict:
    import numpy as np

    if args.inputs is None:
        return workload.random_inputs(np.random.default_rng(args.seed))
    try:
        with np.load(args.inputs) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, AttributeError) as error:
        raise WorkloadError(f"--inputs {str(args.inputs)!r} is not a readable .npz of input "
                            f"tensors ({error}); write one with numpy.savez(path, A=..., B=...)"
                            ) from None


def _program_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise WorkloadError(f"cannot read the program binary {str(path)!r}: "
                            f"{error.strerror or error}; write it with tensorforge compile "
                            f"--out") from None


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from tensorforge.api import compile_workload
    from tensorforge.board_runtime import run_on_board
    from tensorforge.host_link import HostLink

    binary = _program_bytes(args.program)
    if args.baud <= 0:
        raise ConfigError(f"--baud must be a positive number of bits per second, not {args.baud}")
    if not args.timeout > 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    workload = workload_from_args(args)
    config = config_from_args(args)
    program = compile_workload(workload, config, args.mapping, memory_from_args(args))
    if binary != program.encode():
        raise WorkloadError(
            f"{args.program} is not the program these flags compile to; pass run the "
            f"--workload, --sizes, hardware and memory flags that compile had, and its "
            f"mapping (compile --save-mapping FILE, then run --mapping FILE)")
    inputs = _inputs(args, workload)
    with HostLink.open(args.port, args.baud) as link:
        outcome = run_on_board(link, program, inputs, timeout_s=args.timeout)
    expected = workload.reference(inputs)
    equal = bool(np.array_equal(outcome.output, expected))
    if args.out:
        np.save(args.out, outcome.output)
    summary = {"workload": str(workload), "config": config.describe(), "equal": equal,
               "mismatches": int(np.count_nonzero(outcome.output != expected)),
               "seconds": round(outcome.seconds, 3), **outcome.counters}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        verdict = "equals" if equal else "DIFFERS from"
        print(f"{workload} on the board: {outcome.counters['cycles']:,} cycles; the output "
              f"{verdict} the numpy reference" + (f"; written to {args.out}" if args.out else ""),
              file=sys.stdout if equal else sys.stderr)
    return 0 if equal else 1
