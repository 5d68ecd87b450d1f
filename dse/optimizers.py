"""The factory the co-design driver calls for a search method.

Methods register by name in `tensorforge.dse.registry.OPTIMIZERS`; nothing else in the project
chooses between them with an ``if method == ...`` chain. Options are passed through to the
method's constructor, so a typo in an option name fails loudly there rather than being ignored.
"""

from __future__ import annotations

from typing import Any

from tensorforge.dse.opt_base import History, Optimizer
from tensorforge.dse.problem import Problem
from tensorforge.dse.registry import OPTIMIZERS, resolve
from tensorforge.errors import ConfigError


def make_optimizer(name: str, problem: Problem, *, seed: int, **options: Any) -> Optimizer:
    """A fresh optimizer ``name`` for ``problem``; same name, problem, seed -> same asks."""
    method = resolve(OPTIMIZERS, "search method", name)
    try:
        return method(problem, seed=seed, **options)
    except TypeError as error:
        raise ConfigError(f"search method {name!r}: {error}") from None


__all__ = ["OPTIMIZERS", "History", "Optimizer", "make_optimizer"]
