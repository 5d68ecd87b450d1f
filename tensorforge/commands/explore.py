"""``tensorforge explore``: a hardware/software co-design sweep with live progress and reports.

Example::

    tensorforge explore --workload resnet50 --scenario edge --method mobo --trials 40 --out runs/r50

The sweep is stored as it runs (``--store``, default in the cache directory); the same command
run again after an interruption resumes where it stopped.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError, WorkloadError

#: Short names the paper and the issue use for zoo models.
ALIASES = {"mobilenet": "mobilenet_v1", "bert": "bert_base", "vit": "vit_b16"}


def resolve_workload(name: str, sizes: list[str] | None = None) -> tuple[str, list[tuple]]:
    """``(display name, [(layer name, Workload, count), ...])`` for a ``--workload`` value.

    Accepted: a zoo model (``resnet50``, ``mobilenet``, ...), ``model:layer``, a HASCO benchmark
    kind (``gemm``: all its cases), or workload text with one ``--sizes`` per layer.
    """
    from tensorforge.compiler import zoo
    from tensorforge.compiler.workload import parse_workload

    if "[" in name:
        if not sizes:
            raise WorkloadError(
                f"workload text {name!r} needs index sizes: add --sizes 'i=64,j=64,k=64' "
                "(repeat --sizes for several layers)"
            )
        layers = []
        for number, text in enumerate(sizes):
            workload = parse_workload(name, text, name=f"layer{number}")
            layers.append((f"layer{number}", workload, 1))
        return "custom", layers
    if sizes:
        raise WorkloadError("--sizes applies to workload text only, not to a named workload")
    if ":" in name:
        workload = zoo.load_workload(name)
        return name, [(name, workload, 1)]
    model = ALIASES.get(name, name)
    if model in zoo.list_models():
        loaded = zoo.load_model(model)
        return model, [(layer.name, layer.workload, layer.count) for layer in loaded.layers]
    if name in zoo.benchmark_kinds():
        cases = zoo.benchmark_cases(name)
        return name, [(f"{name}{i}", workload, 1) for i, workload in enumerate(cases)]
    raise WorkloadError(
        f"unknown workload {name!r}. Known models: {', '.join(zoo.list_models())} "
        f"(aliases: {', '.join(f'{a}={m}' for a, m in ALIASES.items())}); benchmarks: "
        f"{', '.join(zoo.benchmark_kinds())}; or MODEL:LAYER, or workload text such as "
        "'C[i,j] += A[i,k] * B[k,j]' with --sizes."
    )


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Search options shared by ``explore`` and ``demo``."""
    from tensorforge.dse.registry import BACKENDS, EVALUATORS, HARDWARE_MODELS, OPTIMIZERS

    registries = (
        (
            "--evaluator",
            EVALUATORS,
            "per-layer evaluation: hasco (software search under the "
            "cost model), hasco-batch (the same search, mappings priced by the batch model "
            "without generating programs: far cheaper; events counted by the batch model, "
            "priced by the hardware model) or "
            "first-order (roofline; fast)",
        ),
        (
            "--hardware-model",
            HARDWARE_MODELS,
            "area/power/clock model: synthesis (calibrated on IHP SG13G2 130 nm synthesis, "
            "memories exact; see docs/cost_model.md), first-order (45 nm constants, for "
            "comparison) or synthesis-osu018 (fitted to OSU 0.18um synthesis)",
        ),
    )
    for flag, table, meaning in registries:
        default = next(iter(table))
        parser.add_argument(
            flag, choices=list(table), default=default, help=f"{meaning} (default: {default})"
        )
    from tensorforge.commands.memflags import add_memory_arguments

    add_memory_arguments(parser)
    parser.add_argument(
        "--method",
        choices=sorted(OPTIMIZERS),
        default="mobo",
        help="hardware search method (default: mobo)",
    )
    parser.add_argument("--trials", type=int, default=40, help="hardware trials (default: 40)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="worker processes evaluating layers; 1 runs inline (default: 2)",
    )
    parser.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default=next(iter(BACKENDS)),
        help="where layer evaluations and synthesis jobs run: local worker processes, or "
        "ray tasks (the cluster extra; a private local Ray unless --ray-address)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDRESS",
        help="join this running Ray cluster (auto, HOST:6379, ray://HOST:10001) with "
        "--backend ray; --workers is then ignored",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="designs asked from the optimizer at a time (default: 1)",
    )
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="sweep store file (default: sweeps.sqlite in the cache directory)",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="forget stored trials of this exact sweep and start over",
    )
    parser.add_argument(
        "--synthesize-top",
        type=int,
        default=0,
        metavar="K",
        help="synthesize the K fastest Pareto designs (ECP5 + ASIC; slow)",
    )


def add_command(
    subparsers: argparse._SubParsersAction, name: str, summary: str, doc: str | None
) -> argparse.ArgumentParser:
    """A sweep subcommand (``explore``, ``demo``) with its module docstring as description."""
    return subparsers.add_parser(
        name, help=summary, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    summary = "co-design sweep: Pareto-optimal accelerators for a workload"
    parser = add_command(subparsers, "explore", summary, __doc__)
    parser.add_argument(
        "--workload",
        required=True,
        help="zoo model (resnet50, mobilenet, xception, bert, ...), MODEL:LAYER, "
        "a benchmark kind, or workload text with --sizes",
    )
    parser.add_argument(
        "--sizes",
        action="append",
        default=None,
        help="index sizes of workload text, e.g. i=64,j=64,k=64; repeatable",
    )
    parser.add_argument(
        "--space",
        type=Path,
        default=None,
        help="TOML file pruning the hardware space (HASCO Listing 2 style)",
    )
    parser.add_argument(
        "--scenario", default=None, help="constraint preset: edge (2 W), cloud (20 W)"
    )
    parser.add_argument("--power-w", type=float, default=None, help="power bound in W")
    parser.add_argument("--area-mm2", type=float, default=None, help="area bound in mm²")
    parser.add_argument("--latency-ms", type=float, default=None, help="latency bound in ms")
    add_sweep_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="directory for the reports")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorforge.dse.codesign import merge_layers
    from tensorforge.dse.hwspace import HardwareSpace
    from tensorforge.dse.scenarios import scenario

    name, layers = resolve_workload(args.workload, args.sizes)
    space = HardwareSpace.from_toml(args.space) if args.space else HardwareSpace()
    bounds = scenario(args.scenario).with_bounds(
        power_w=args.power_w, area_mm2=args.area_mm2, latency_ms=args.latency_ms
    )
    spec = sweep_spec(args, name, merge_layers(layers), space=space, scenario=bounds)
    return execute(spec, args)


def sweep_spec(args: argparse.Namespace, name: str, layers: tuple, **fields: Any) -> Any:
    """The `SweepSpec` of the shared sweep options (`add_sweep_arguments`) plus ``fields``."""
    from tensorforge.commands.memflags import memory_from_args
    from tensorforge.dse.codesign import SweepSpec, make_evaluator, make_hardware_model

    return SweepSpec(
        workload_name=name,
        layers=layers,
        method=args.method,
        trials=args.trials,
        seed=args.seed,
        batch_size=args.batch_size,
        evaluator=make_evaluator(args.evaluator, memory_from_args(args)),
        hardware_model=make_hardware_model(args.hardware_model),
        **fields,
    )


def execute(spec: Any, args: argparse.Namespace) -> int:
    """Run ``spec`` with a progress bar, write the reports, print the Pareto table."""
    from rich.console import Console

    from tensorforge.dse.codesign import run_sweep
    from tensorforge.dse.model_provenance import provenance
    from tensorforge.dse.registry import BACKENDS, resolve
    from tensorforge.dse.report import headline, write_reports
    from tensorforge.dse.sweep_store import SweepStore
    from tensorforge.dse.synth_top import synthesize_top

    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {args.workers}")
    backend = backend_arguments(args)
    console = Console()
    store = SweepStore(args.store)
    if args.restart:
        store.delete_sweep(spec.sweep_id)
    console.print(
        f"sweep [bold]{spec.sweep_id}[/] ({spec.workload_name}, "
        f"{len(spec.layers)} distinct layers, {spec.scenario.describe()}) in {store.path}"
    )
    result = _run_with_progress(console, spec, store, args.workers, partial(run_sweep, **backend))
    synthesis = []
    if args.synthesize_top > 0:
        pool_class = resolve(BACKENDS, "backend", backend["backend"])
        with pool_class(args.workers, **backend["backend_options"]) as pool:
            synthesis = synthesize_top(result, args.synthesize_top, map_jobs=pool.map)
    files = write_reports(result, args.out, synthesis)
    console.print(headline(result))
    console.print(pareto_table(result))
    console.print(provenance(spec.hardware_model).line(), markup=False)
    console.print(f"reports: {', '.join(str(p) for p in files.values())}")
    return 0


def backend_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """``run_sweep``'s backend arguments from ``--backend`` and ``--ray-address``."""
    backend = getattr(args, "backend", "local")
    address = getattr(args, "ray_address", None)
    if address is not None and backend != "ray":
        raise ConfigError("--ray-address names a Ray cluster; add --backend ray")
    return {"backend": backend, "backend_options": {"address": address} if address else {}}


def _run_with_progress(console: Any, spec: Any, store: Any, workers: int, run_sweep: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("trials", total=spec.trials)

        def on_trial(update: Any) -> None:
            progress.update(
                task,
                completed=update.done,
                description=(
                    f"trial {update.done}/{update.total} {update.trial.status}"
                    f"{' (stored)' if update.replayed else ''}  best HV {update.hypervolume:.4g}"
                    f"  Pareto {update.pareto_size}"
                ),
            )

        return run_sweep(spec, store=store, workers=workers, on_trial=on_trial)


def pareto_table(result: Any) -> Any:
    """The Pareto set (or the closest designs) as a rich table."""
    from rich.table import Table

    from tensorforge.dse.report import pareto_rows

    title = "Pareto set" if result.any_feasible else "Closest designs (constraints unmet)"
    table = Table(title=title)
    for column in ("trial", "latency ms", "power W", "area mm²", "energy mJ", "design"):
        table.add_column(column, justify="left" if column == "design" else "right")
    for row in pareto_rows(result):
        table.add_row(
            str(row["trial"]),
            f"{row['latency_ms']:.4g}",
            f"{row['power_w']:.4g}",
            f"{row['area_mm2']:.4g}",
            f"{row['energy_mj']:.4g}",
            row["design"],
        )
    return table
