"""How much software search each hardware trial of a batch gets: the hook for inner loops.

Most search methods treat the per-layer evaluator as a black box: every trial's layers are
searched once with the evaluator's own method and budget. Methods from the co-design papers
steer that inner search instead. ShiBO (Shi et al., section 4.3) maps each layer by its own
GP + LCB search; UNICO (section 3.3) spends the software-search budget unevenly, in rounds of
successive halving over the batch, judging each design by how its search converged. Both are
expressed as a `SoftwareSchedule` that the optimizer hands the co-design driver for each batch
(`Optimizer.software_schedule`), so the driver never asks which method is running:

1. ``first(trials)`` names a `SoftwareEffort` (search method, budget) for each new trial;
2. the driver evaluates every layer of those trials with the evaluator so adjusted;
3. ``next(outcomes, counts)`` reads the round's layer outcomes (their search histories
   included) and names the trials that go on, with their next effort; ``{}`` ends the batch.

A trial's record holds its last round's layers. A schedule of one round (``streams``) lets the
driver store each trial the moment its last layer is in; a schedule of several rounds has its
trials stored together after the last one, so a batch killed half-way through its rounds is
re-run whole on resume and ranks the same candidates against each other as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from tensorforge.dse.evaluate import LayerEvaluator

#: One layer's outcome as the worker reports it: ``("ok", metrics dict)`` or ``("error", msg)``.
LayerOutcome = tuple[str, Any]


@dataclass(frozen=True)
class SoftwareEffort:
    """The software search one trial's layers get in one round.

    ``search`` names a search of `tensorforge.dse.sw_search.SEARCHES` and ``budget`` counts
    cost-model evaluations per layer; None keeps the evaluator's own. An evaluator without such
    settings (the first-order roofline has no search) is used as it is.
    """

    search: str | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        if self.budget is not None and (isinstance(self.budget, bool) or self.budget < 1):
            raise ValueError(f"a software-search budget must be a positive integer, not "
                             f"{self.budget!r}")

    def apply(self, evaluator: LayerEvaluator) -> LayerEvaluator:
        """``evaluator`` with this effort's search and budget where it has those settings."""
        if not is_dataclass(evaluator):
            return evaluator
        settings = {f.name for f in fields(evaluator)}
        changes = {
            name: value
            for name, value in (("method", self.search), ("budget", self.budget))
            if value is not None and name in settings
        }
        return replace(evaluator, **changes) if changes else evaluator


class SoftwareSchedule:
    """One round, every trial with the sweep's evaluator as it is: the plain black box."""

    #: True when the first round is the only one, so trials can be stored as they finish.
    streams: bool = True

    def first(self, trials: Sequence[int]) -> dict[int, SoftwareEffort]:
        """The effort of each trial (by index) in the first round."""
        return {trial: SoftwareEffort() for trial in trials}

    def next(
        self, outcomes: Mapping[int, Sequence[LayerOutcome]], counts: Sequence[int]
    ) -> dict[int, SoftwareEffort]:
        """The trials that get another round, and its effort, given the round just run
        (``outcomes``: trial -> one outcome per layer; ``counts``: each layer's repeat count)."""
        return {}


@dataclass(frozen=True)
class FixedEffort(SoftwareSchedule):
    """One round with the same `SoftwareEffort` for every trial (ShiBO's mapping BO)."""

    effort: SoftwareEffort

    def first(self, trials: Sequence[int]) -> dict[int, SoftwareEffort]:
        return {trial: self.effort for trial in trials}
