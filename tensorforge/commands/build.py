"""`tensorforge build`: a bitstream of the accelerator on a board, ready for `tensorforge run`.

Takes the same hardware flags as ``generate`` (`tensorforge.commands.hwflags`) and builds the
board SoC (`tensorforge.hw.board.soc`: the accelerator, block RAM in place of DRAM, the UART host
bridge) for ``--board`` into ``--out``: ``accelerator.bit`` plus ``build.json`` and the tool
logs. Stages and elapsed time go to stderr; ``--json`` prints the summary on stdout. Exits 1
when the design misses the board clock (the bitstream is still written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        help="build a board bitstream of the accelerator with a UART host link",
        description="Synthesize, place, route and pack the accelerator SoC for a board.",
    )
    parser.add_argument("--board", default="ulx3s",
                        help="target board: ulx3s (the ULX3S with an LFE5U-85F, default), "
                        "ulx3s-45f, ulx3s-25f or ulx3s-12f")
    parser.add_argument("--out", type=Path, required=True,
                        help="output folder (accelerator.bit, build.json, logs)")
    parser.add_argument("--memory-kib", type=int, default=128,
                        help="on-chip memory standing in for DRAM, KiB, a power of two "
                        "(default 128: 64 of the 85F's 208 block RAMs)")
    parser.add_argument("--baud", type=int, default=115200,
                        help="UART baud rate of the host link (default 115200)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds each tool may run (default 7200)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_hardware_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorforge.fpga.board_build import build_board
    from tensorforge.fpga.ulx3s import BOARD_CLOCK_HZ
    from tensorforge.hw.board.soc import SocOptions

    config = config_from_args(args)
    if args.memory_kib <= 0 or args.memory_kib & (args.memory_kib - 1):
        raise ConfigError(f"--memory-kib must be a power of two, not {args.memory_kib}")
    if not args.timeout > 0:
        raise ConfigError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    options = SocOptions(memory_bytes=args.memory_kib * 1024, clock_hz=BOARD_CLOCK_HZ,
                         baud=args.baud)
    result = build_board(config, options, args.out, board=args.board, seed=args.seed,
                         timeout_s=args.timeout)
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        fmax = f"{result.fmax_mhz:.1f} MHz" if result.fmax_mhz else "n/a"
        print(f"{result.bitstream}: {config.describe()} on {result.board} ({result.part})")
        print(f"Fmax {fmax} against the {result.clock_mhz:g} MHz board clock; "
              f"{result.luts} LUTs, {result.ffs} FFs, {result.dsps} DSPs, {result.brams} BRAMs; "
              f"memory {result.memory_bytes // 1024} KiB, UART {result.baud} baud")
    if not result.timing_met:
        print(f"error: the design misses the {result.clock_mhz:g} MHz board clock "
              f"(Fmax {result.fmax_mhz} MHz); the bitstream may not work", file=sys.stderr)
        return 1
    return 0
