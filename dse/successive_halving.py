"""UNICO's modified successive halving (MSH) of the software-search budget (section 3.3).

A batch of hardware candidates is searched in rounds. Every candidate gets a small budget in
the first round; after each round only some go on, with ``eta`` times the budget, until the
last round spends the full ``b_max`` on the few left. Plain successive halving (Jamieson &
Talwalkar 2016) keeps the best half by terminal value (TV: the latency the search reached).
UNICO keeps ``k - p`` by TV and then ``p`` more by the area under the search's convergence
curve (AUC), so a design whose search was still falling steeply gets a second chance
(``k = floor(0.5 n)``, ``p = floor(0.15 n)``, the paper's setting).

Our software searches are not resumable, so a candidate's next round re-runs its search from
the same seed with the larger budget; its search history then covers the whole budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tensorforge.dse.sw_schedule import LayerOutcome, SoftwareEffort, SoftwareSchedule

#: Share of the candidates promoted each round, and the share of them promoted by AUC rather
#: than by terminal value (UNICO section 3.3: "k = floor(0.5N) and p = floor(0.15N)").
KEEP_SHARE = 0.5
AUC_SHARE = 0.15

#: Budget growth per round (halving: twice the budget for half the candidates).
ETA = 2


def rung_budgets(max_budget: int, candidates: int, *, eta: int = ETA,
                 min_budget: int = 1) -> list[int]:
    """Per-round budgets, smallest first and ending at ``max_budget``: one round per halving
    of ``candidates`` (``ceil(log_eta n)``, at least one), each ``eta`` times the one before,
    none below ``min_budget``."""
    if max_budget < 1 or candidates < 1:
        raise ValueError(f"budget and candidates must be positive, not {max_budget}, "
                         f"{candidates}")
    rounds = max(1, math.ceil(math.log(candidates, eta) - 1e-9))
    budgets = [max(min_budget, max_budget // eta ** (rounds - 1 - j)) for j in range(rounds)]
    return [min(b, max_budget) for b in budgets]


def msh_select(terminal: np.ndarray, auc: np.ndarray, keep: int, by_auc: int) -> list[int]:
    """Indices of the survivors: the ``keep - by_auc`` lowest terminal values, then the
    ``by_auc`` highest AUCs among the rest (the two sets disjoint, as the paper requires).
    Ties go to the lower index, so the choice is deterministic."""
    terminal, auc = np.asarray(terminal, dtype=float), np.asarray(auc, dtype=float)
    if terminal.shape != auc.shape or terminal.ndim != 1:
        raise ValueError("terminal values and AUCs must be equal-length vectors")
    keep = min(keep, terminal.size)
    by_auc = min(by_auc, keep)
    by_value = list(np.argsort(terminal, kind="stable")[: keep - by_auc])
    rest = [i for i in np.argsort(-auc, kind="stable") if i not in by_value]
    return sorted(int(i) for i in by_value + rest[:by_auc])


def curve_auc(history: Sequence[Sequence[float]], counts: Sequence[int], budget: int) -> float:
    """AUC of a workload's search: the area between its best-so-far latency curve and the
    horizontal line at the curve's end value, relative to that value and per evaluation.

    ``history`` holds one list per layer of ``[evaluations, cycles, ...]`` rows at each new
    best; the workload's curve at evaluation ``e`` is the count-weighted sum of each layer's
    best so far (its first best before it had one). Layers without a history add nothing.
    """
    grid = np.arange(budget)
    total = np.zeros(budget)
    for layer, count in zip(history, counts, strict=True):
        if not len(layer):
            continue
        rows = np.asarray(layer, dtype=float)
        position = np.searchsorted(rows[:, 0], grid, side="right") - 1
        total += count * rows[np.maximum(position, 0), 1]
    end = total[-1] if budget else 0.0
    return float((total - end).mean() / end) if end > 0 else 0.0


class SuccessiveHalving(SoftwareSchedule):
    """A `SoftwareSchedule` running MSH over one batch (see the module docstring).

    Trials whose layers failed have an infinite terminal value and no AUC: they go on only if
    nothing better is left.
    """

    streams = False

    def __init__(self, max_budget: int, *, search: str | None = None, min_budget: int = 16,
                 keep_share: float = KEEP_SHARE, auc_share: float = AUC_SHARE) -> None:
        self.max_budget, self.search, self.min_budget = max_budget, search, min_budget
        self.keep_share, self.auc_share = keep_share, auc_share
        self.budgets: list[int] = []
        self.round = 0
        #: (round, trials run, survivors) of each round: what a report or a test can check
        self.log: list[tuple[int, list[int], list[int]]] = []

    def first(self, trials: Sequence[int]) -> dict[int, SoftwareEffort]:
        self.budgets = rung_budgets(self.max_budget, max(1, len(trials)),
                                    min_budget=self.min_budget)
        self.round = 0
        return {t: SoftwareEffort(self.search, self.budgets[0]) for t in trials}

    def next(
        self, outcomes: Mapping[int, Sequence[LayerOutcome]], counts: Sequence[int]
    ) -> dict[int, SoftwareEffort]:
        trials = sorted(outcomes)
        self.round += 1
        if self.round >= len(self.budgets) or len(trials) <= 1:
            self.log.append((self.round, trials, []))
            return {}
        budget = self.budgets[self.round - 1]
        terminal = np.array([terminal_value(outcomes[t], counts) for t in trials])
        auc = np.array([
            curve_auc(histories(outcomes[t]), counts, budget) if np.isfinite(v) else -np.inf
            for t, v in zip(trials, terminal, strict=True)
        ])
        n = len(trials)
        keep = max(1, math.floor(self.keep_share * n))
        chosen = msh_select(terminal, auc, keep, math.floor(self.auc_share * n))
        survivors = [trials[i] for i in chosen]
        self.log.append((self.round, trials, survivors))
        effort = SoftwareEffort(self.search, self.budgets[self.round])
        return {t: effort for t in survivors}


def terminal_value(outcomes: Sequence[LayerOutcome], counts: Sequence[int]) -> float:
    """The workload's cycles (count-weighted layer sum); infinite if a layer failed."""
    if any(status != "ok" for status, _ in outcomes):
        return math.inf
    return float(sum(value["cycles"] * c for (_, value), c in zip(outcomes, counts, strict=True)))


def histories(outcomes: Sequence[LayerOutcome]) -> list[list[list[float]]]:
    """Each layer's search history from its outcome (empty where it has none)."""
    return [value.get("search_history", []) if status == "ok" else []
            for status, value in outcomes]
