"""Software search (HASCO VI-B): find the fastest mapping of one layer on one accelerator.

``hasco``
    A pool of random candidates (primitive sequences and factors over every tensorize choice);
    each round the heuristic picks the ``k`` most valuable candidates, value
    ``exp(-(l_p - l*) / l*)`` with ``l*`` the lowest latency so far (1 for the best candidate,
    falling as a candidate gets slower). The paper prints the exponent as ``-(l* - l_p)/l*``;
    with ``l* <= l_p`` that would rank the slowest candidates highest, contradicting its own
    "the higher the value, the better", so we read it with the sign that makes the text true.
    ``k`` is mutable: it doubles after a round without improvement (explore more) and shrinks
    back after one with. The DQN agent (`sw_dqn`) proposes ``branch`` revisions per valuable
    candidate; all proposals of a round are evaluated in one vectorized call of the cost model;
    the reward is the relative latency improvement (``-1`` for an illegal revision).
``random``
    Uniformly random candidates, evaluated in batches.
``exhaustive``
    Every candidate of the space (every tile level of every index, every legal loop order, every
    tensorize choice), in chunks: the optimum of the space, for small layers.

Budgets count cost-model evaluations. `library` is the im2col baseline
(`compiler.mappers.library_mapping`) under the same cost model. Searches are registered by
name in `SEARCHES`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_model import evaluate_mapping
from tensorforge.dse.sw_dqn import DQNAgent, DQNSettings
from tensorforge.dse.sw_space import MAX_DIMS, N_ACTIONS, N_FEATURES, Candidates, SoftwareSpace


@dataclass
class SearchResult:
    """The best candidate found, its latency/energy, and the best-so-far history."""

    cycles: float
    energy_pj: float
    mapping: Mapping | None
    evaluations: int
    history: list[tuple[int, float]] = field(default_factory=list)  # (evaluations, best)

    @property
    def found(self) -> bool:
        return self.mapping is not None and math.isfinite(self.cycles)


class _Tracker:
    """Keeps the best candidate of everything evaluated."""

    def __init__(self, space: SoftwareSpace) -> None:
        self.space, self.best, self.energy = space, math.inf, math.inf
        self.best_batch: Candidates | None = None
        self.history: list[tuple[int, float]] = []

    def see(self, batch: Candidates, cycles: np.ndarray, energy: np.ndarray) -> bool:
        if not len(cycles):
            return False
        row = int(np.argmin(cycles))
        if cycles[row] < self.best:
            self.best, self.energy = float(cycles[row]), float(energy[row])
            self.best_batch = batch.take(np.array([row]))
            self.history.append((self.space.evaluations, self.best))
            return True
        return False

    def result(self) -> SearchResult:
        mapping = self.space.mapping(self.best_batch, 0) if self.best_batch is not None else None
        return SearchResult(self.best, self.energy, mapping, self.space.evaluations,
                            self.history)


def random_search(space: SoftwareSpace, budget: int, seed: int, *,
                  batch: int = 256) -> SearchResult:
    rng = np.random.default_rng(seed)
    tracker = _Tracker(space)
    start = space.evaluations
    while space.evaluations - start < budget:
        candidates = space.random(min(batch, budget - (space.evaluations - start)), rng)
        cycles, energy, _ = space.evaluate(candidates)
        tracker.see(candidates, cycles, energy)
    return tracker.result()


def enumerate_space(space: SoftwareSpace) -> Candidates:
    """Every candidate: all tile levels x all output-first loop orders x every space."""
    parts = []
    for s, layer in enumerate(space.spaces):
        dims = layer.dims
        grids = np.stack(np.meshgrid(*(np.arange(space.n_levels[s, d]) for d in range(dims)),
                                     indexing="ij"), axis=-1).reshape(-1, dims)
        mask = space.outputs[s, :dims]
        outs, reds = np.flatnonzero(mask), np.flatnonzero(~mask)
        orders = np.array([list(a) + list(b) for a in itertools.permutations(outs)
                           for b in itertools.permutations(reds)], dtype=np.int64)
        count = len(grids) * len(orders)
        levels = np.full((count, MAX_DIMS), -1, dtype=np.int64)
        order = np.full((count, MAX_DIMS), -1, dtype=np.int64)
        levels[:, :dims] = np.repeat(grids, len(orders), axis=0)
        order[:, :dims] = np.tile(orders, (len(grids), 1))
        parts.append(Candidates(np.full(count, s, dtype=np.int64), levels, order))
    return Candidates.concat(parts)


def space_size(space: SoftwareSpace) -> int:
    total = 0
    for s, layer in enumerate(space.spaces):
        mask = space.outputs[s, : layer.dims]
        orders = math.factorial(int(mask.sum())) * math.factorial(int((~mask).sum()))
        total += int(np.prod(space.n_levels[s, : layer.dims])) * orders
    return total


def exhaustive_search(space: SoftwareSpace, budget: int = 5_000_000, seed: int = 0, *,
                      chunk: int = 50_000) -> SearchResult:
    """The optimum of the whole space; refuses spaces larger than ``budget`` candidates."""
    size = space_size(space)
    if size > budget:
        raise ValueError(f"the space has {size} candidates, more than the budget {budget}; "
                         "use a smaller layer or a coarser tile grid")
    everything = enumerate_space(space)
    tracker = _Tracker(space)
    for start in range(0, len(everything), chunk):
        part = everything.take(np.arange(start, min(start + chunk, len(everything))))
        cycles, energy, _ = space.evaluate(part)
        tracker.see(part, cycles, energy)
    return tracker.result()


@dataclass(frozen=True)
class HascoSettings:
    initial: float = 0.125  # share of the budget spent on the random initial pool
    top_k: int = 8
    max_k: int = 32
    branch: int = 4  # revisions tried per valuable candidate per round
    learn_steps: int = 4  # DQN minibatch updates per round
    dqn: DQNSettings = DQNSettings()


def hasco_search(space: SoftwareSpace, budget: int, seed: int,
                 settings: HascoSettings = HascoSettings()) -> SearchResult:
    """HASCO's heuristic + Q-learning search (see the module docstring)."""
    rng = np.random.default_rng(seed)
    agent = DQNAgent(N_FEATURES, N_ACTIONS, seed, settings.dqn)
    tracker = _Tracker(space)
    start = space.evaluations
    pool = space.random(max(16, int(settings.initial * budget)), rng)
    cycles, energy, extra = space.evaluate(pool)
    tracker.see(pool, cycles, energy)
    legal = np.isfinite(cycles)
    if legal.any():
        pool, cycles, extra = pool.take(legal), cycles[legal], {k: v[legal]
                                                                for k, v in extra.items()}
    seen = set(pool.keys())
    k = settings.top_k
    stale_rounds = 0
    while space.evaluations - start < budget and stale_rounds < 50:
        best = tracker.best if math.isfinite(tracker.best) else float(np.min(cycles))
        value = np.exp(-(cycles - best) / best)
        chosen = np.argsort(-value, kind="stable")[:k]
        parents = pool.take(chosen)
        states = space.features(parents, cycles[chosen], best,
                                {n: v[chosen] for n, v in extra.items()})
        actions = agent.choose(states, space.valid_actions(parents), settings.branch)
        rows, columns = np.nonzero(actions >= 0)
        if not len(rows):
            break
        taken = actions[rows, columns]
        children = space.revise(parents.take(rows), taken, rng)
        new = np.array([key not in seen for key in children.keys()])
        left = budget - (space.evaluations - start)
        keep = np.flatnonzero(new)[:left]
        if not len(keep):
            stale_rounds += 1
            agent.end_round()
            k = min(settings.max_k, k * 2)
            continue
        rows, taken, children = rows[keep], taken[keep], children.take(keep)
        child_cycles, child_energy, child_extra = space.evaluate(children)
        improved = tracker.see(children, child_cycles, child_energy)
        parent_cycles = cycles[chosen][rows]
        reward = np.where(np.isfinite(child_cycles),
                          np.clip((parent_cycles - child_cycles) / parent_cycles, -1, 1), -1.0)
        best_now = tracker.best
        next_states = space.features(children, child_cycles, best_now, child_extra)
        agent.remember(states[rows], taken, reward.astype(np.float32), next_states,
                       space.valid_actions(children))
        agent.learn(settings.learn_steps)
        agent.end_round()
        seen.update(children.keys())
        fresh = np.isfinite(child_cycles)
        if fresh.any():
            pool = Candidates.concat([pool, children.take(fresh)])
            cycles = np.concatenate([cycles, child_cycles[fresh]])
            extra = {n: np.concatenate([extra[n], child_extra[n][fresh]]) for n in extra}
            stale_rounds = 0
        else:
            stale_rounds += 1
        k = max(settings.top_k, k // 2) if improved else min(settings.max_k, k * 2)
    return tracker.result()


def library(workload: Workload, config: AcceleratorConfig) -> SearchResult:
    """The im2col library mapping (`compiler.mappers.library_mapping`) under the cost model."""
    from tensorforge.compiler.mappers import library_mapping

    mapping = library_mapping(workload, config)
    numbers = evaluate_mapping(workload, mapping, config)
    return SearchResult(numbers["cycles"], numbers["energy_pj"], mapping, 1)


SearchFunction = Callable[[SoftwareSpace, int, int], SearchResult]

SEARCHES: dict[str, SearchFunction] = {
    "hasco": hasco_search,
    "random": random_search,
    "exhaustive": exhaustive_search,
}
