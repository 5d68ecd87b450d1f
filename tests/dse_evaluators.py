"""Layer evaluators injected by the co-design tests.

They live in a module of their own, importing only the light evaluation code, because a
spawned worker process imports the module that defines a pickled evaluator: defining them in
a test module would make every worker import pytest, hypothesis and torch.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import LayerMetrics
from tensorforge.dse.evaluate_first_order import FirstOrderEvaluator


@dataclass(frozen=True)
class FailOnRows:
    """Raises for one array height, or kills its worker process outright."""

    rows: int
    hard: bool = False
    version: str = "fail-on-rows"

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        if config.array.rows == self.rows:
            if self.hard:
                os._exit(3)
            raise RuntimeError(f"simulated evaluator crash on {self.rows} rows")
        return FirstOrderEvaluator()(workload, config, seed)


@dataclass(frozen=True)
class HangOnRows:
    """Never returns for one array height: a stand-in for a hung simulator or synthesis tool."""

    rows: int
    version: str = "hang-on-rows"

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        if config.array.rows == self.rows:
            threading.Event().wait()  # nothing sets it
        return FirstOrderEvaluator()(workload, config, seed)


class Killed(BaseException):
    """Stands for SIGKILL / Ctrl-C: not an evaluation failure, it ends the sweep."""


@dataclass(frozen=True)
class CountingEvaluator:
    """The first-order evaluator (same version, so the same sweep id) that logs its calls and
    can 'kill the sweep' on call number ``kill_at`` (1-based). Inline use only (``workers=1``):
    the call log is this process's list."""

    kill_at: int | None = None
    calls: list[tuple[str, str]] = field(default_factory=list, compare=False)
    version: str = FirstOrderEvaluator.version

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        self.calls.append((workload.name, config.describe()))
        if self.kill_at is not None and len(self.calls) == self.kill_at:
            raise Killed(f"killed at evaluator call {self.kill_at}")
        return FirstOrderEvaluator()(workload, config, seed)


@dataclass(frozen=True)
class BudgetedEvaluator:
    """A software-search stand-in: the more budget, the fewer cycles, with a history to
    match. Records (layer, rows, search, budget) per call, so a test sees the software-search
    effort a method's schedule set; 'kills the sweep' at call ``kill_at``. Inline use only."""

    method: str = "hasco"
    budget: int = 200
    kill_at: int | None = None
    calls: list[tuple[str, int, str, int]] = field(default_factory=list, compare=False)
    version: str = "budgeted-1"

    def __call__(self, workload: Workload, config: AcceleratorConfig, seed: int) -> LayerMetrics:
        self.calls.append((workload.name, config.array.rows, self.method, self.budget))
        if self.kill_at is not None and len(self.calls) == self.kill_at:
            raise Killed(f"killed at call {self.kill_at}")
        best = workload.macs / config.array.pes * (1 + 16 / self.budget)
        history = [[1, 3 * best, 3 * best], [self.budget // 2, 1.5 * best, best],
                   [self.budget, best, best]]
        return LayerMetrics(int(best), float(best), {}, {}, history)
