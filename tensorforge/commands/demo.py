"""``tensorforge demo``: a small co-design sweep that finishes in a few minutes on a laptop.

It explores accelerators for the first eight distinct ResNet-50 convolutions that both the GEMM
and the CONV2D intrinsic can run (the CONV2D intrinsic has no tensorize choice for strided
convolutions yet) with NSGA-II (12 trials, 2 worker processes), each layer's mapping found by
HASCO's software search, under HASCO's edge budget (2 W), and writes the reports to
``out/demo/`` and prints the Pareto table. ``out/demo/`` is relative to the current directory
on purpose: it is the one output a first-time user looks for next to where they typed the
command (everything else tensorforge writes lives in the cache directory). ``--out`` moves it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

#: Distinct ResNet-50 layers the demo keeps (from the first stages).
DEMO_LAYERS = 8


def register(subparsers: argparse._SubParsersAction) -> None:
    from tensorforge.commands.explore import add_command, add_sweep_arguments

    parser = add_command(
        subparsers, "demo", "small co-design sweep into ./out/demo (a few minutes)", __doc__
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
    from tensorforge.commands.explore import execute, resolve_workload, sweep_spec
    from tensorforge.dse.codesign import merge_layers
    from tensorforge.dse.scenarios import scenario

    name, layers = resolve_workload("resnet50")
    spec = sweep_spec(
        args,
        f"{name} (first {DEMO_LAYERS} distinct stride-1 convolutions)",
        demo_layers(merge_layers(layers)),
        scenario=scenario("edge"),
        method_options={"population_size": 6} if args.method == "nsga2" else {},
    )
    if args.out is None:
        args.out = Path.cwd() / "out" / "demo"
    return execute(spec, args)


def demo_layers(layers: tuple) -> tuple:
    """The first `DEMO_LAYERS` layers the CONV2D intrinsic can tensorize (GEMM runs them all)."""
    from tensorforge.config import AcceleratorConfig
    from tensorforge.dse.sw_space import SoftwareSpace
    from tensorforge.errors import MappingError

    conv2d = AcceleratorConfig.from_dict({"intrinsic": "conv2d", "array": {"dataflow": "os"}})
    kept = []
    for layer in layers:
        try:
            SoftwareSpace.build(layer.workload, conv2d)
        except MappingError:
            continue
        kept.append(layer)
        if len(kept) == DEMO_LAYERS:
            break
    return tuple(kept)
