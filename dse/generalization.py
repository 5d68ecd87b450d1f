"""UNICO's unseen-workload test (section 4.3): do robust designs generalize better?

Co-design on training networks gives a Pareto set; each Pareto design is then evaluated, with
the same software search, on held-out networks it was not searched on. A design's
*generalization gap* compares how it ranks among the Pareto designs on the two sides: its
held-out latency over the best held-out latency of the set, divided by the same ratio on the
training networks. A gap above 1 means the design does relatively worse on the unseen
networks than on those it was co-designed for. The paper's claim is that designs with a
smaller robustness metric R (`robustness`) have smaller gaps, so the report gives each
design's R next to its gap and their Spearman rank correlation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from tensorforge.dse.codesign import SweepLayer, SweepResult, layer_seed
from tensorforge.dse.evaluate import (
    AreaPowerModel,
    LayerEvaluator,
    LayerMetrics,
    aggregate,
    run_layer_job,
)
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.robustness import robustness
from tensorforge.errors import TensorforgeError


@dataclass(frozen=True)
class GeneralizationRow:
    """One Pareto design: its robustness, latency on both sides, and the gap."""

    trial: int
    robustness: float
    train_latency_ms: float
    held_out_latency_ms: float
    gap: float


def workload_latency_ms(
    point: dict, layers: Sequence[SweepLayer], space: HardwareSpace,
    evaluator: LayerEvaluator, hardware_model: AreaPowerModel, seed: int,
) -> float:
    """Latency of design ``point`` on ``layers``, each searched as in a sweep with ``seed``."""
    config = space.to_config(point)
    measured = []
    for layer in layers:
        status, value = run_layer_job(evaluator, layer.workload, config, layer_seed(seed, layer))
        if status != "ok":
            raise TensorforgeError(f"{layer.name} on trial design {point}: {value}")
        measured.append((LayerMetrics.from_dict(value), layer.count))
    return aggregate(measured, hardware_model(config)).latency_ms


def generalization_gaps(train: Sequence[float], held_out: Sequence[float]) -> np.ndarray:
    """Per design: (held-out latency / best held-out) over (training latency / best training)."""
    train, held_out = np.asarray(train, dtype=float), np.asarray(held_out, dtype=float)
    return (held_out / held_out.min()) / (train / train.min())


def unseen_workload_test(
    result: SweepResult, held_out: Sequence[SweepLayer], *, evaluator: LayerEvaluator | None = None,
) -> tuple[list[GeneralizationRow], float]:
    """Rows for the feasible Pareto designs of ``result`` evaluated on ``held_out`` (with the
    sweep's own evaluator unless one is given), and Spearman's rho of R against the gap (NaN
    with fewer than three designs or a constant column)."""
    spec = result.spec
    pareto = [t for t in result.pareto() if result.feasible(t)]
    if not pareto:
        raise TensorforgeError("the sweep has no feasible Pareto design to test on unseen "
                               "workloads; run more trials or relax its constraints")
    evaluator = evaluator or spec.evaluator
    held = [workload_latency_ms(t.point, held_out, spec.space, evaluator, spec.hardware_model,
                                spec.seed) for t in pareto]
    train = [t.metrics["latency_ms"] for t in pareto]
    gaps = generalization_gaps(train, held)
    rows = [
        GeneralizationRow(t.index, robustness(t.layers), t_ms, h_ms, float(g))
        for t, t_ms, h_ms, g in zip(pareto, train, held, gaps, strict=True)
    ]
    values = np.array([[r.robustness, r.gap] for r in rows])
    varied = len(rows) >= 3 and np.ptp(values, axis=0).min() > 0
    rho = float(spearmanr(values[:, 0], values[:, 1]).statistic) if varied else float("nan")
    return rows, rho
