"""The one table of search methods, and the factory the co-design driver calls.

New methods register here by name; nothing else in the project chooses between them with an
``if method == ...`` chain. Options are passed through to the method's constructor, so a typo
in an option name fails loudly there rather than being ignored.
"""

from __future__ import annotations

from typing import Any

from tensorforge.dse.opt_base import History, Optimizer
from tensorforge.dse.opt_mobo import MOBOSearch
from tensorforge.dse.opt_nsga2 import NSGA2Search
from tensorforge.dse.opt_random import RandomSearch
from tensorforge.dse.problem import Problem
from tensorforge.errors import ConfigError

#: Every search method by name.
OPTIMIZERS: dict[str, type[Optimizer]] = {
    RandomSearch.name: RandomSearch,
    NSGA2Search.name: NSGA2Search,
    MOBOSearch.name: MOBOSearch,
}


def make_optimizer(name: str, problem: Problem, *, seed: int, **options: Any) -> Optimizer:
    """A fresh optimizer ``name`` for ``problem``; same name, problem, seed -> same asks."""
    try:
        method = OPTIMIZERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown search method {name!r}; choose one of {sorted(OPTIMIZERS)}"
        ) from None
    try:
        return method(problem, seed=seed, **options)
    except TypeError as error:
        raise ConfigError(f"search method {name!r}: {error}") from None


__all__ = ["OPTIMIZERS", "History", "Optimizer", "make_optimizer"]
