"""UNICO's robustness metric R (section 3.4, Eq. 2): how much a design's figures hang on how
well its mappings were searched.

A design whose latency and power barely move between a mediocre mapping and the best one the
search found is robust to software search, and the paper finds such designs generalize better
to workloads they were not co-designed on. For one hardware trial:

* the *optimal* point is the search's final best; the *sub-optimal* one is the best-so-far at
  the ``(1 - alpha)`` right-tail percentile of the loss history (``alpha = 0.05``), the
  history being the workload's best-so-far latency after each evaluation;
* ``Delta`` is the distance between the two in (latency, power), and ``theta`` the angle of
  the step from the optimal to the sub-optimal point against the power axis, in ``[0, pi]``
  since the sub-optimal point is never faster; ``R = Delta * (1 + F(theta))`` with
  ``F(theta) = 6 theta^2 / pi^2 - 5 theta / pi + 1``: a pure latency change costs ``Delta``,
  a power change up to ``2 Delta`` when the best mapping also saves power and ``3 Delta`` when
  it costs power (``theta = pi``), the case the paper likes least.

Two readings the paper leaves open, fixed here: latency and power are taken relative to the
optimal point's (the paper plots raw units, whose scales would let one dominate), and power is
the mapping's dynamic power, energy over cycles (static power is the hardware's, equal for
every mapping of it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Tail of the loss history where the sub-optimal mapping is read (UNICO section 3.4: "the
#: (1 - alpha) (e.g. 95%) right-tail percentile of the whole loss history").
ALPHA = 0.05


def angle_penalty(theta: float) -> float:
    """``F(theta)`` of Eq. 2: 1 at 0, 0 at pi/2, 2 at pi."""
    return 6.0 / math.pi**2 * theta**2 - 5.0 / math.pi * theta + 1.0


def robustness_from_points(optimal: tuple[float, float], sub_optimal: tuple[float, float]) -> float:
    """R of Eq. 2 from two (cycles, energy) points of the same workload."""
    cycles, energy = optimal
    sub_cycles, sub_energy = sub_optimal
    power, sub_power = energy / cycles, sub_energy / sub_cycles
    latency_change = (sub_cycles - cycles) / cycles
    power_change = (sub_power - power) / power
    delta = math.hypot(latency_change, power_change)
    if delta == 0.0:
        return 0.0
    theta = math.atan2(latency_change, power_change)
    return delta * (1.0 + angle_penalty(theta))


def loss_history(layers: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``e x 2`` (cycles, energy) of the workload's best-so-far mapping after each evaluation,
    from the stored layers' search histories (count-weighted sums); empty when there are no
    layers or one has no history or failed. Each layer's curve starts at its first legal mapping."""
    rows = []
    for layer in layers:
        history = layer.get("search_history") if "error" not in layer else None
        if not history:
            return np.zeros((0, 2))
        rows.append((np.asarray(history, dtype=float), int(layer.get("count", 1))))
    if not rows:  # a design that never reached its layers (not a valid accelerator)
        return np.zeros((0, 2))
    length = int(max(h[-1, 0] for h, _ in rows))
    evaluations = np.arange(max(h[0, 0] for h, _ in rows), length + 1)
    total = np.zeros((evaluations.size, 2))
    for history, count in rows:
        position = np.searchsorted(history[:, 0], evaluations, side="right") - 1
        total += count * history[position, 1:3]
    return total


def robustness(layers: Sequence[Mapping[str, Any]], alpha: float = ALPHA) -> float:
    """R of one trial from its stored layer records (0 when there is no search history)."""
    history = loss_history(layers)
    if not len(history):
        return 0.0
    # the best-so-far latency only falls, so the percentile is a point of the history
    value = np.quantile(history[:, 0], 1.0 - alpha, method="inverted_cdf")
    sub_optimal = history[int(np.flatnonzero(history[:, 0] <= value)[0])]
    return robustness_from_points(tuple(history[-1]), tuple(sub_optimal))
