"""Software search (HASCO VI-B): find the fastest mapping of one layer on one accelerator.

``hasco``
    A pool of candidates (primitive sequences and factors over every tensorize choice): the
    library mapping, where it is a point of the space, and random candidates (``initial`` of
    the budget). Each round the heuristic picks the ``k`` most valuable open candidates,
    value ``exp(-(l_p - l*) / l*)`` with ``l*`` the lowest latency so far (1 for the best
    candidate, falling as a candidate gets slower). The paper prints the exponent as
    ``-(l* - l_p)/l*``; with ``l* <= l_p`` that would rank the slowest candidates highest,
    contradicting its own "the higher the value, the better", so we read it with the sign that
    makes the text true. The best open candidate is revised every round, on top of the ``k``,
    until all its revisions are tried. The leaders of the tensorize choices within 2x of the
    best take up to half of the ``k`` places in turn, so a choice whose first random points
    were poor still gets refined. ``k`` is mutable: it doubles after a round without a new
    best and drops back after one with. The DQN agent (`sw_dqn`) picks ``branch`` revisions
    per valuable candidate among those not yet tried on it (the cost model is deterministic: a
    revision tried once is known); a candidate is closed after ``expansions`` rounds. After
    ``patience`` rounds without a new best, a batch of fresh random candidates (``explore`` of
    the budget) joins the pool: revisions are local, and these restarts let the search leave
    a basin. All proposals of a round are evaluated in one vectorized call of the cost model;
    the reward is the relative latency improvement (``-1`` for an illegal revision).
``random``
    Uniformly random candidates, evaluated in batches.
``exhaustive``
    Every candidate of the space (every tile level of every index, every legal loop order, every
    tensorize choice), in chunks: the optimum of the space, for small layers.

Neither HASCO nor random search evaluates a candidate twice: orders are canonical (`sw_space`),
so two candidates with one key have one cost.

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
from tensorforge.dse.cost_model import CostParameters, evaluate_mapping
from tensorforge.dse.sw_dqn import DQNAgent, DQNSettings
from tensorforge.dse.sw_space import MAX_DIMS, N_ACTIONS, N_FEATURES, Candidates, SoftwareSpace
from tensorforge.errors import MappingError


@dataclass
class SearchResult:
    """The best candidate found, its latency/energy, and the best-so-far history."""

    cycles: float
    energy_pj: float
    mapping: Mapping | None
    evaluations: int
    # (evaluations, best cycles, its energy pJ) at each new best: the search's convergence,
    # which UNICO's successive halving (AUC) and robustness metric read
    history: list[tuple[int, float, float]] = field(default_factory=list)
    # the best few distinct candidates by the batch model, best first (``mapping`` among
    # them): the evaluator prices them again by the program's own timeline, which can order
    # close candidates differently
    finalists: tuple[Mapping, ...] = ()

    @property
    def found(self) -> bool:
        return self.mapping is not None and math.isfinite(self.cycles)


#: Distinct candidates a search hands the evaluator to price by the timeline.
FINALISTS = 2


class _Tracker:
    """Keeps the best candidate of everything evaluated, and the `FINALISTS` best distinct."""

    def __init__(self, space: SoftwareSpace) -> None:
        self.space, self.best, self.energy = space, math.inf, math.inf
        self.best_batch: Candidates | None = None
        self.history: list[tuple[int, float, float]] = []
        self.finalists: list[tuple[float, bytes, Candidates]] = []  # best first

    def see(self, batch: Candidates, cycles: np.ndarray, energy: np.ndarray) -> bool:
        if not len(cycles):
            return False
        self._keep_finalists(batch, cycles)
        row = int(np.argmin(cycles))
        if cycles[row] < self.best:
            self.best, self.energy = float(cycles[row]), float(energy[row])
            self.best_batch = batch.take(np.array([row]))
            self.history.append((self.space.evaluations, self.best, self.energy))
            return True
        return False

    def _keep_finalists(self, batch: Candidates, cycles: np.ndarray) -> None:
        rows = np.argsort(cycles, kind="stable")[:FINALISTS]
        rows = rows[np.isfinite(cycles[rows])]
        if not len(rows):
            return
        picked = batch.take(rows)
        entries = {key: (c, key, entry) for c, key, entry in self.finalists}
        for i, key in enumerate(picked.keys()):
            if key not in entries:
                entries[key] = (float(cycles[rows[i]]), key, picked.take(np.array([i])))
        self.finalists = sorted(entries.values(), key=lambda e: (e[0], e[1]))[:FINALISTS]

    def result(self) -> SearchResult:
        mapping = self.space.mapping(self.best_batch, 0) if self.best_batch is not None else None
        finalists = tuple(self.space.mapping(entry, 0) for _, _, entry in self.finalists)
        return SearchResult(self.best, self.energy, mapping, self.space.evaluations,
                            self.history, finalists)


def random_search(space: SoftwareSpace, budget: int, seed: int, *,
                  batch: int = 256) -> SearchResult:
    """Uniformly random candidates, none evaluated twice (the same rule as `hasco_search`)."""
    rng = np.random.default_rng(seed)
    tracker = _Tracker(space)
    seen: set[bytes] = set()
    start = space.evaluations
    while (left := budget - (space.evaluations - start)) > 0:
        drawn = space.random(min(batch, left), rng)
        rows = [r for r, key in enumerate(drawn.keys()) if not (key in seen or seen.add(key))]
        if not rows:
            break  # the space is (nearly) used up
        candidates = drawn.take(np.array(rows))
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
    initial: float = 0.2  # share of the budget spent on the random initial pool
    top_k: int = 4
    max_k: int = 16
    branch: int = 2  # revisions tried per valuable candidate per round
    learn_steps: int = 4  # DQN minibatch updates per round
    patience: int = 2  # rounds without a new best before a batch of fresh random candidates
    explore: float = 0.05  # share of the budget in each such batch
    seeded: bool = True  # start the pool from the library mapping too
    expansions: int = 2  # rounds a candidate may be revised in before it is closed
    dqn: DQNSettings = DQNSettings()


LEADER_SLOWDOWN = 2.0  # a tensorize choice this much slower than the best gets no leader place


class _Pool:
    """Legal candidates evaluated so far, their latencies and features, and which revisions
    each one has had (a revision is tried once per candidate: the cost model is exact)."""

    def __init__(self, space: SoftwareSpace) -> None:
        self.space = space
        self.batch = Candidates(*(np.zeros((0, *shape), dtype=np.int64)
                                  for shape in ((), (MAX_DIMS,), (MAX_DIMS,))))
        self.cycles = np.zeros(0)
        self.extra: dict[str, np.ndarray] = {}
        self.tried = np.zeros((0, N_ACTIONS), dtype=bool)
        self.expanded = np.zeros(0, dtype=np.int64)
        self.leader_turns = np.zeros(len(space.spaces), dtype=np.int64)  # rounds led, by space

    def add(self, batch: Candidates, cycles: np.ndarray, extra: dict[str, np.ndarray]) -> None:
        legal = np.isfinite(cycles)
        if not legal.any():
            return
        self.batch = Candidates.concat([self.batch, batch.take(legal)])
        self.cycles = np.concatenate([self.cycles, cycles[legal]])
        self.extra = {k: np.concatenate([self.extra.get(k, np.zeros(0)), v[legal]])
                      for k, v in extra.items()}
        self.tried = np.concatenate([self.tried, np.zeros((legal.sum(), N_ACTIONS), bool)])
        self.expanded = np.concatenate([self.expanded, np.zeros(legal.sum(), dtype=np.int64)])

    def untried(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows) x N_ACTIONS) revisions of ``rows`` that are valid and not yet tried."""
        return self.space.valid_actions(self.batch.take(rows)) & ~self.tried[rows]

    def valuable(self, best: float, k: int, expansions: int) -> np.ndarray:
        """The ``k`` open candidates of highest value ``exp(-(l_p - l*) / l*)``, and the best
        open candidate on top of them.

        The best open candidate is revised every round until every revision of it is tried:
        closed after ``expansions`` rounds, or waiting for its turn as a leader, it could
        leave a one-step improvement of the best mapping unseen. The leaders of the
        tensorize choices within ``LEADER_SLOWDOWN`` of the best take up to half of ``k``,
        in turn (fewest rounds led first), and stay open until every revision of them is
        tried: the best choice is often not the one whose random candidates happen to be
        fastest at the start. Any other candidate closes after ``expansions`` rounds."""
        if not len(self.cycles):
            return np.zeros(0, dtype=np.int64)
        rows = np.flatnonzero(self.untried(np.arange(len(self.cycles))).any(axis=1))
        value = np.exp(-(self.cycles[rows] - best) / best)
        ranked = rows[np.argsort(-value, kind="stable")]
        leaders = ranked[np.unique(self.batch.space[ranked], return_index=True)[1]]
        leaders = leaders[self.cycles[leaders] <= LEADER_SLOWDOWN * best]
        turns = self.leader_turns[self.batch.space[leaders]]
        leaders = leaders[np.lexsort((self.cycles[leaders], turns))][: max(1, k // 2)]
        self.leader_turns[self.batch.space[leaders]] += 1
        rest = ranked[~np.isin(ranked, leaders) & (self.expanded[ranked] < expansions)]
        chosen = np.concatenate([leaders, rest[: k - len(leaders)]])
        incumbent = ranked[:1]
        return np.concatenate([incumbent, chosen[~np.isin(chosen, incumbent)]])


class _Hasco:
    """One run of `hasco_search`: the budget, the pool, the agent and the best so far."""

    def __init__(self, space: SoftwareSpace, budget: int, seed: int,
                 settings: HascoSettings) -> None:
        self.space, self.budget, self.settings = space, budget, settings
        self.rng = np.random.default_rng(seed)
        self.agent = DQNAgent(N_FEATURES, N_ACTIONS, seed, settings.dqn)
        self.tracker = _Tracker(space)
        self.pool = _Pool(space)
        self.seen: set[bytes] = set()
        self.start = space.evaluations

    @property
    def left(self) -> int:
        return self.budget - (self.space.evaluations - self.start)

    def fresh(self, batch: Candidates, limit: int | None = None) -> np.ndarray:
        """Rows of ``batch`` never evaluated (first copy of each), at most ``limit`` and what
        the budget has left; they count as seen from now on."""
        room = self.left if limit is None else min(limit, self.left)
        keep: list[int] = []
        for row, key in enumerate(batch.keys()):
            if len(keep) >= room:
                break
            if key not in self.seen:
                self.seen.add(key)
                keep.append(row)
        return np.array(keep, dtype=np.int64)

    def measure(self, batch: Candidates) -> tuple[np.ndarray, dict[str, np.ndarray], bool]:
        """Evaluate ``batch`` (already fresh), add the legal ones to the pool."""
        cycles, energy, extra = self.space.evaluate(batch)
        improved = self.tracker.see(batch, cycles, energy)
        self.pool.add(batch, cycles, extra)
        return cycles, extra, improved

    def explore(self, count: int) -> bool | None:
        """Evaluate ``count`` new uniformly random candidates; True if one is a new best,
        None if no new candidate turned up (the space is used up, or nearly)."""
        batch = self.space.random(4 * count, self.rng)
        batch = batch.take(self.fresh(batch, count))
        return self.measure(batch)[2] if len(batch) else None

    def seed_pool(self) -> None:
        if self.settings.seeded:
            found = [c for c in map(self.space.from_mapping, starting_mappings(self.space))
                     if c is not None]
            if found:
                batch = Candidates.concat(found)
                self.measure(batch.take(self.fresh(batch)))
        self.explore(max(16, int(self.settings.initial * self.budget)))

    def revise(self, k: int) -> bool | None:
        """One round: revise the ``k`` most valuable candidates; None if none is left open."""
        best = self.tracker.best
        chosen = self.pool.valuable(best, k, self.settings.expansions)
        if not len(chosen):
            return None
        pool = self.pool
        parents = pool.batch.take(chosen)
        states = self.space.features(parents, pool.cycles[chosen], best,
                                     {n: v[chosen] for n, v in pool.extra.items()})
        actions = self.agent.choose(states, pool.untried(chosen), self.settings.branch)
        rows, columns = np.nonzero(actions >= 0)
        taken = actions[rows, columns]
        pool.tried[chosen[rows], taken] = True
        pool.expanded[chosen] += 1
        children = self.space.revise(parents.take(rows), taken, self.rng)
        keep = self.fresh(children)
        if not len(keep):
            return False
        children = children.take(keep)
        parent_cycles = pool.cycles[chosen[rows[keep]]]
        child_cycles, child_extra, improved = self.measure(children)
        reward = np.where(np.isfinite(child_cycles),
                          np.clip((parent_cycles - child_cycles) / parent_cycles, -1, 1), -1.0)
        next_states = self.space.features(children, child_cycles, self.tracker.best, child_extra)
        self.agent.remember(states[rows[keep]], taken[keep], reward.astype(np.float32),
                            next_states, self.space.valid_actions(children))
        self.agent.learn(self.settings.learn_steps)
        return improved

    def run(self) -> SearchResult:
        s = self.settings
        self.seed_pool()
        k, stale = s.top_k, 0
        while self.left > 0:
            improved = self.revise(k) if math.isfinite(self.tracker.best) else None
            self.agent.end_round()
            if improved is None or stale >= s.patience:
                improved = self.explore(max(1, int(s.explore * self.budget)))
                if improved is None:
                    break
                stale = 0
            stale = 0 if improved else stale + 1
            k = s.top_k if improved else min(s.max_k, k * 2)
        return self.tracker.result()


def starting_mappings(space: SoftwareSpace) -> list[Mapping]:
    """The library (im2col) mapping, where the layer has one. (`default_mapping` is not used:
    it is a search of its own, thousands of estimates, and would hide that cost.)"""
    from tensorforge.compiler.mappers import library_mapping

    try:
        return [library_mapping(space.workload, space.config)]
    except MappingError:
        return []


def hasco_search(space: SoftwareSpace, budget: int, seed: int,
                 settings: HascoSettings = HascoSettings()) -> SearchResult:
    """HASCO's heuristic + Q-learning search (see the module docstring)."""
    return _Hasco(space, budget, seed, settings).run()


def library(workload: Workload, config: AcceleratorConfig,
            parameters: CostParameters | None = None) -> SearchResult:
    """The im2col library mapping (`compiler.mappers.library_mapping`) under the cost model
    (``parameters``, default `CostParameters()`)."""
    from tensorforge.compiler.mappers import library_mapping

    mapping = library_mapping(workload, config)
    numbers = evaluate_mapping(workload, mapping, config, parameters or CostParameters())
    return SearchResult(numbers["cycles"], numbers["energy_pj"], mapping, 1)


def bo_search(space: SoftwareSpace, budget: int, seed: int) -> SearchResult:
    """Shi et al.'s constrained GP + LCB mapping search (`sw_search_bo`), imported on use
    since it needs torch and BoTorch."""
    from tensorforge.dse.sw_search_bo import bo_search as search

    return search(space, budget, seed)


SearchFunction = Callable[[SoftwareSpace, int, int], SearchResult]

SEARCHES: dict[str, SearchFunction] = {
    "hasco": hasco_search,
    "random": random_search,
    "exhaustive": exhaustive_search,
    "bo": bo_search,
}
