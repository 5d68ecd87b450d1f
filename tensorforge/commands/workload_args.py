"""The workload and mapping flags that `choices`, `compile` and `simulate` share."""

from __future__ import annotations

import argparse

from tensorforge.api import MAPPERS


def add_workload_arguments(parser: argparse.ArgumentParser, *, mapping: bool = True) -> None:
    """``--workload`` and ``--sizes``; ``--mapping`` too unless ``mapping`` is false."""
    parser.add_argument(
        "--workload",
        required=True,
        help="workload text, e.g. 'C[i,j] += A[i,k] * B[k,j]', or a zoo name such as "
        "resnet50:conv2_1b or gemm:3",
    )
    parser.add_argument("--sizes", default="", help="index sizes, e.g. i=64,j=64,k=64")
    if not mapping:
        return
    parser.add_argument(
        "--mapping",
        default="default",
        help=f"{' or '.join(MAPPERS)} (heuristic; im2col + GEMM), or a mapping JSON file",
    )


def workload_from_args(args: argparse.Namespace):
    """The `Workload` named by ``--workload`` (text with ``--sizes``, or a zoo name)."""
    from tensorforge.compiler.workload import parse_workload
    from tensorforge.compiler.zoo import load_workload

    if "[" in args.workload:
        return parse_workload(args.workload, args.sizes, name="workload")
    return load_workload(args.workload)
