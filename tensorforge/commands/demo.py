"""``tensorforge demo``: a small co-design sweep that finishes in a few minutes on a laptop.

It explores accelerators for the first eight distinct layers of ResNet-50 with NSGA-II
(12 trials, 2 worker processes) under HASCO's edge budget (2 W), writes the reports to
``out/demo/`` and prints the Pareto table. ``out/demo/`` is relative to the current directory
on purpose: it is the one output a first-time user looks for next to where they typed the
command (everything else tensorforge writes lives in the cache directory). ``--out`` moves it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: Distinct ResNet-50 layers the demo keeps (the stem and the first stages).
DEMO_LAYERS = 8


def register(subparsers: argparse._SubParsersAction) -> None:
    from tensorforge.commands.explore import add_sweep_arguments

    parser = subparsers.add_parser(
        "demo",
        help="small co-design sweep into ./out/demo (a few minutes)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="report directory (default: out/demo under the current directory)",
    )
    add_sweep_arguments(parser)
    parser.set_defaults(func=run, method="nsga2", trials=12, workers=2)


def run(args: argparse.Namespace) -> int:
    from tensorforge.commands.explore import execute, resolve_workload
    from tensorforge.dse.codesign import SweepSpec, merge_layers
    from tensorforge.dse.scenarios import scenario

    name, layers = resolve_workload("resnet50")
    spec = SweepSpec(
        workload_name=f"{name} (first {DEMO_LAYERS} distinct layers)",
        layers=merge_layers(layers)[:DEMO_LAYERS],
        scenario=scenario("edge"),
        method=args.method,
        trials=args.trials,
        seed=args.seed,
        batch_size=args.batch_size,
        method_options={"population_size": 6} if args.method == "nsga2" else {},
    )
    if args.out is None:
        args.out = Path.cwd() / "out" / "demo"
    return execute(spec, args)
