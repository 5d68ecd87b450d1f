"""The accelerator flags shared by ``generate``, ``compile``, ``simulate`` and ``explore``.

`add_hardware_arguments` adds them to a parser; `config_from_args` turns the parsed values
into a validated `AcceleratorConfig` (a ``--config`` TOML file wins over the flags). Every
mistake a user can make here ends in a `ConfigError` that names the flag and the fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tensorforge.config import DATAFLOWS, DEFAULT_QUEUE_DEPTH, AcceleratorConfig, ControllerConfig
from tensorforge.errors import ConfigError
from tensorforge.intrinsics import Intrinsic
from tensorforge.units import Bytes


def _size(text: str, unit: int) -> Bytes:
    """A size flag: a bare number counts ``unit`` bytes, or a size with a suffix (``64KiB``)."""
    text = str(text).strip()
    try:
        return Bytes(round(float(text) * unit))
    except ValueError:
        pass
    try:
        return Bytes.parse(text)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def add_hardware_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the accelerator flags (destinations: ``intrinsic, pe, link, dataflow, spad, banks,
    acc, activations, local, bus, burst, outstanding, in_bits, acc_bits, taps, queue_depth,
    config``)."""
    group = parser.add_argument_group("accelerator (HASCO primitives)")
    group.add_argument(
        "--config",
        type=Path,
        metavar="FILE.toml",
        help="accelerator TOML file; when given, the flags below are ignored",
    )
    group.add_argument(
        "--intrinsic",
        default="gemm",
        help=f"{', '.join(i.value for i in Intrinsic)} (default gemm)",
    )
    group.add_argument(
        "--pe",
        default="8x8",
        metavar="ROWSxCOLS",
        help="PE array shape, reshapeArray (default 8x8)",
    )
    group.add_argument(
        "--link",
        default="systolic",
        help="PE interconnect, linkPEs: none, systolic or full (default systolic)",
    )
    group.add_argument(
        "--dataflow", default=None, help="ws, os or is (default: the intrinsic's first legal one)"
    )
    group.add_argument(
        "--spad-kib",
        "--spad",
        dest="spad",
        default=None,
        metavar="KIB",
        help="scratchpad capacity in KiB, or a size such as 512B (default 64, or as many lines "
        "as the ISA addresses when the array's lines are narrower than 4 B)",
    )
    group.add_argument("--banks", type=int, default=4, help="scratchpad banks (default 4)")
    group.add_argument(
        "--acc-kib",
        "--acc",
        dest="acc",
        default="16",
        metavar="KIB",
        help="accumulator capacity in KiB (default 16)",
    )
    group.add_argument(
        "--activations",
        default="0",
        metavar="BYTES",
        help="on-chip activation memory, a power of two of bytes such as 64KiB: a window of "
        "the DMA's address space (from 0x80000000) where whole-network programs keep the "
        "activations passed between layers instead of DRAM (default 0: none, the calibrated "
        "hardware). Not a variable of explore's design space",
    )
    group.add_argument(
        "--local-bytes",
        "--local",
        dest="local",
        default=None,
        metavar="BYTES",
        help="per-PE local memory, distributeCache (default 0; taps x operand "
        "bytes for a weight-stationary CONV2D)",
    )
    group.add_argument(
        "--bus-bits",
        "--bus",
        dest="bus",
        type=int,
        default=64,
        help="DMA AXI data width in bits (default 64)",
    )
    group.add_argument(
        "--burst",
        type=int,
        default=16,
        help="longest AXI burst in beats, burstTransfer (default 16)",
    )
    group.add_argument(
        "--outstanding",
        type=int,
        default=16,
        metavar="BURSTS",
        help="bursts each DMA unit keeps in flight, burstTransfer (default 16)",
    )
    group.add_argument("--in-bits", type=int, default=8, help="operand bits (default 8)")
    group.add_argument("--acc-bits", type=int, default=32, help="accumulator bits (default 32)")
    group.add_argument("--taps", type=int, default=3, help="CONV2D kernel taps (default 3)")
    group.add_argument(
        "--queue-depth",
        type=int,
        default=DEFAULT_QUEUE_DEPTH,
        metavar="N",
        help="instructions the controller queues per unit, a power of two "
        f"(default {DEFAULT_QUEUE_DEPTH})",
    )
    group.add_argument(
        "--repeat",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="LOAD and STORE carry a repeat count that the controller expands, so a tile of "
        "several rows is one instruction (default: controller.repeat's, "
        f"{'on' if ControllerConfig().repeat else 'off'})",
    )
    group.add_argument(
        "--output-pipeline",
        action="store_true",
        help="STORE can add a bias, requantize, clamp (ReLU/ReLU6) and store in_bits "
        "elements (off by default: the calibrated hardware)",
    )


def parse_pe(text: str) -> tuple[int, int]:
    """``"8x8"`` -> ``(8, 8)``; anything else is a `ConfigError`."""
    parts = str(text).lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(
            f"--pe must be ROWSxCOLS with two positive integers, e.g. 8x8, not {text!r}"
        )
    return int(parts[0]), int(parts[1])


def config_from_args(args: argparse.Namespace) -> AcceleratorConfig:
    """The validated configuration the flags (or ``--config``) describe."""
    if args.config:
        return AcceleratorConfig.from_toml(args.config)
    try:
        intrinsic = Intrinsic(str(args.intrinsic).lower())
    except ValueError:
        raise ConfigError(
            f"--intrinsic must be one of {', '.join(i.value for i in Intrinsic)}, "
            f"not {args.intrinsic!r}"
        ) from None
    rows, cols = parse_pe(args.pe)
    dataflow = args.dataflow or DATAFLOWS[intrinsic][0].value
    if args.local is not None:
        local = _size(args.local, 1)
    elif intrinsic is Intrinsic.CONV2D and dataflow == "ws":
        local = Bytes(args.taps * max(1, args.in_bits // 8))
    else:
        local = Bytes(0)
    return AcceleratorConfig.from_dict(
        {
            "intrinsic": intrinsic.value,
            "conv_taps": args.taps,
            "array": {
                "rows": rows,
                "cols": cols,
                "interconnect": args.link,
                "dataflow": dataflow,
                "local_bytes": local,
            },
            "scratchpad": {
                "capacity": None if args.spad is None else _size(args.spad, 1024),
                "banks": args.banks,
                "accumulator": _size(args.acc, 1024),
                "activations": _size(args.activations, 1),
            },
            "dma": {
                "bus_bits": args.bus,
                "max_burst": args.burst,
                "outstanding": args.outstanding,
            },
            "precision": {"in_bits": args.in_bits, "acc_bits": args.acc_bits},
            "controller": {
                "queue_depth": args.queue_depth,
                "repeat": (ControllerConfig().repeat if args.repeat is None else args.repeat),
            },
            "output_pipeline": args.output_pipeline,
        }
    )
