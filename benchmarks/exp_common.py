"""What the HASCO-style experiment scripts (``exp_*_table*.py``) share: the workload subsets they
can afford on a laptop, and Markdown helpers. Not an experiment itself."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from tensorforge.commands.explore import resolve_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import SweepLayer, merge_layers
from tensorforge.dse.sw_space import SoftwareSpace
from tensorforge.errors import MappingError

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "experiments"

#: The CNNs of HASCO's Tables II and III, by our zoo names.
MODELS = ("resnet50", "mobilenet", "xception")

#: A CONV2D accelerator, only to ask whether the CONV2D intrinsic can run a layer.
_CONV2D = AcceleratorConfig.from_dict({"intrinsic": "conv2d", "array": {"dataflow": "os"}})


def conv2d_runs(layer: SweepLayer) -> bool:
    """Whether the CONV2D intrinsic has a tensorize choice for ``layer``: since padded
    choices (issue 18 item 3), every zoo layer, so the subsets are simply the heaviest layers
    (the tables' "MACs evaluated" is the subset's share, not a coverage limit)."""
    try:
        SoftwareSpace.build(layer.workload, _CONV2D)
    except MappingError:
        return False
    return True


def heaviest_layers(model: str, count: int) -> tuple[str, tuple[SweepLayer, ...], float]:
    """``(name, layers, share)``: the ``count`` distinct layers both intrinsics run that carry
    the most MACs (layer MACs x repeat count), and their share of the network's MACs."""
    name, layers = resolve_workload(model)
    distinct = merge_layers(layers)
    total = sum(la.workload.macs * la.count for la in distinct)
    runnable = sorted(
        (la for la in distinct if conv2d_runs(la)),
        key=lambda la: la.workload.macs * la.count,
        reverse=True,
    )[:count]
    share = sum(la.workload.macs * la.count for la in runnable) / total
    return name, tuple(runnable), share


def lowest_latency(result) -> tuple[int, object | None]:
    """``(feasible trials, the fastest of them or None)`` of a `SweepResult`."""
    feasible = [t for t in result.trials if result.feasible(t)]
    return len(feasible), min(feasible, key=lambda t: t.metrics["latency_ms"], default=None)


def mean_std(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.4g}" if values else "n/a"
    return f"{statistics.mean(values):.4g} ± {statistics.stdev(values):.2g}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines
