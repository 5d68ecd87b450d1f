"""`tensorforge choices`: list every tensorize choice of an intrinsic in a workload.

``--workload`` is workload text (with ``--sizes``) or a zoo name (``resnet50:conv2_1b``,
``gemm:3``). Prints a table for people, or with ``--json`` a list of objects with the keys
``intrinsic, workload, stage, complete, operands{intrinsic tensor: workload access},
indices{intrinsic index: workload index}, outer[], transposed[], description``.
"""

from __future__ import annotations

import argparse
import json

from tensorforge.commands.workload_args import add_workload_arguments, workload_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "choices",
        help="list the tensorize choices of an intrinsic in a workload",
        description="HASCO's two-step matching: every legal way to run an intrinsic inside "
        "a workload, with the loops left to software.",
    )
    add_workload_arguments(parser, mapping=False)
    parser.add_argument(
        "--intrinsic", required=True, choices=("dot", "gemv", "gemm", "conv2d"), type=str.lower
    )
    parser.add_argument("--tree", action="store_true", help="also print the workload's TST")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorforge.compiler.matching import tensorize_choices
    from tensorforge.compiler.tst import build_tst

    workload = workload_from_args(args)
    choices = tensorize_choices(workload, args.intrinsic)
    if args.json:
        rows = [
            {
                "intrinsic": c.intrinsic,
                "workload": c.workload,
                "stage": c.stage,
                "complete": c.complete,
                "operands": {name: str(access) for name, access in c.operands},
                "indices": c.index_map,
                "outer": list(c.outer),
                "transposed": list(c.transposed),
                "padded": list(c.padded),
                "description": c.describe(),
            }
            for c in choices
        ]
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if args.tree:
        console.print(build_tst(workload).render(), markup=False)
    table = Table(title=escape(f"{args.intrinsic} on {workload}: {len(choices)} choices"))
    for column in ("#", "stage", "indices", "operands", "outer loops", "padded to 1"):
        table.add_column(column)
    for number, c in enumerate(choices):
        flipped = set(c.transposed)
        table.add_row(
            str(number),
            str(c.stage) if not c.complete else "-",
            " ".join(f"{i}->{w}" for i, w in c.indices),
            escape(" ".join(f"{n}={a}{'^T' if n in flipped else ''}" for n, a in c.operands)),
            ",".join(c.outer) or "none",
            ",".join(c.padded) or "-",
        )
    console.print(table)
    return 0
