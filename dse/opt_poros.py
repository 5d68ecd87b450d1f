"""Poros (Wang & Shen): one-level architecture-mapping co-exploration by actor-critic RL.

Where HASCO searches hardware outside and each layer's mapping inside, Poros samples whole
configurations, hardware *and* every layer's mapping, from one policy and learns from their
EDP. Each iteration draws ``batch`` configurations (32 in the paper) from the
`poros_net.PolicyValueNet`, the driver evaluates them, and one actor-critic step follows.

The parameters, in the order they are decided (the paper's Fig. 6):

* every hardware variable of the `Problem`'s space with more than one value (an action is an
  index into its values: the space is already the sparse, constrained action space of Table I);
* then, for each distinct layer the co-design loop attached (`attach_layers`), its unrolling
  and prime-factor tiling actions (`joint_mapping.LAYER_ACTIONS`).

An asked point is the hardware design point plus ``joint_mapping.POINT_KEY``: one list of
actions per layer. It is stored with the trial, so a resumed sweep checks the mappings too.
The co-design loop prices them through the software-schedule hook (`sw_schedule`): each
trial's effort swaps the sweep's software search for a `PlannedMappingEvaluator` of the
trial's own mappings. On a problem without layers (the synthetic benchmarks) Poros
searches the hardware variables alone.

Reward (section III-D): ``R = E_max - E`` for a configuration that meets every constraint,
with ``E`` its cost and ``E_max`` the largest cost of any such configuration seen so far;
a violating or failed one is priced at ``2 E_max``, so ``R = -E_max``. Rewards are divided by
``E_max`` (a scale the network can learn at any EDP magnitude; the ordering is the paper's).
The cost is EDP, ``power * latency^2`` (energy times delay), where the problem has the
``latency_ms`` and ``power_w`` objectives, else the product of its objectives.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tensorforge.compiler.workload import Workload
from tensorforge.dse.evaluate import LayerEvaluator
from tensorforge.dse.joint_mapping import (
    LAYER_ACTIONS,
    POINT_KEY,
    PlannedMappingEvaluator,
    layer_key,
)
from tensorforge.dse.opt_base import Optimizer
from tensorforge.dse.poros_net import PolicyValueNet, actor_critic_loss
from tensorforge.dse.problem import Problem
from tensorforge.dse.sw_schedule import SoftwareEffort, SoftwareSchedule
from tensorforge.memory import DEFAULT_MEMORY

logger = logging.getLogger(__name__)


def configuration_cost(problem: Problem, objectives: np.ndarray) -> np.ndarray:
    """``n`` costs of ``n x m`` objectives: EDP where latency and power are objectives."""
    names = problem.objectives
    if "latency_ms" in names and "power_w" in names:
        latency = objectives[:, names.index("latency_ms")]
        return objectives[:, names.index("power_w")] * latency * latency
    return np.prod(objectives, axis=1)


def rewards(costs: np.ndarray, feasible: np.ndarray, e_max: float) -> np.ndarray:
    """Section III-D's rewards over ``E_max``: ``1 - E / E_max`` feasible, ``-1`` otherwise."""
    if e_max <= 0 or not np.isfinite(e_max):
        return np.where(feasible, 0.0, -1.0)
    return np.where(feasible, 1.0 - costs / e_max, -1.0)


class PorosSearch(Optimizer):
    """Batches of joint configurations from a policy-value network, one actor-critic step each.

    ``batch`` configurations are drawn at a time and served to ``ask`` in order; the network
    learns once all of them are told. ``learning_rate``, ``gamma`` (eq. 2's discount over
    decision steps), ``value_weight`` (the critic's share of the loss), ``entropy_weight``
    (see `poros_net`) and ``hidden`` (the paper's 128) are the method's options.
    """

    name = "poros"

    def __init__(self, problem: Problem, *, seed: int, batch: int = 32, hidden: int = 128,
                 learning_rate: float = 1e-2, gamma: float = 1.0, value_weight: float = 0.5,
                 entropy_weight: float = 0.01) -> None:
        super().__init__(problem, seed=seed)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive integer, not {batch!r}")
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], not {gamma}")
        self.batch, self.hidden = batch, hidden
        self.learning_rate, self.gamma, self.value_weight = learning_rate, gamma, value_weight
        self.entropy_weight = entropy_weight
        self._free = [i for i, v in enumerate(self.space.variables) if v.size > 1]
        self._layer_keys: tuple[str, ...] = ()
        self._net: PolicyValueNet | None = None
        self._adam: torch.optim.Optimizer | None = None
        self._generator = torch.Generator().manual_seed(seed)
        self._queue: list[tuple[dict[str, Any], torch.Tensor]] = []  # drawn, not yet asked
        self._asked: list[tuple[dict[str, Any], torch.Tensor]] = []  # asked, not yet told
        self._told: list[tuple[torch.Tensor, float, bool]] = []  # told since the last update
        self._e_max = 0.0
        #: Mean reward of each learned-from batch, in order (the policy's expected reward).
        self.batch_rewards: list[float] = []

    # ---------------------------------------------------------------- the co-design hooks

    @property
    def _layers(self) -> int:
        return len(self._layer_keys)

    def attach_layers(self, layers: Sequence[Workload]) -> None:
        if self._net is not None:
            raise ValueError("attach the layers before the first ask")
        self._layer_keys = tuple(layer_key(workload) for workload in layers)

    def software_schedule(self) -> SoftwareSchedule:
        """Each trial out for evaluation priced with its own mappings, no search.

        The driver numbers trials in ask order after the ``len(history)`` already told, and
        asks for the schedule between ``ask`` and ``tell``: the points still out are exactly
        that batch, in order.
        """
        if not self._layers:
            return SoftwareSchedule()
        first = len(self.history)
        return PlannedSchedule({
            first + offset: PlannedEffort(plan=tuple(zip(self._layer_keys,
                                                    map(tuple, point[POINT_KEY]), strict=True)))
            for offset, (point, _) in enumerate(self._asked)
        })

    # ---------------------------------------------------------------- ask / tell

    def ask(self, n: int) -> list[dict[str, Any]]:
        self._check_count(n)
        served = []
        while len(served) < n:
            if not self._queue:
                self._queue = self._draw()
            served.append(self._queue.pop(0))
        self._asked.extend(served)
        return [_copy(point) for point, _ in served]

    def tell(self, points: Sequence[Mapping[str, Any]], objectives: np.ndarray,
             constraint_values: np.ndarray | None = None) -> None:
        if len(points) > len(self._asked):
            raise ValueError(f"told {len(points)} points but only {len(self._asked)} are out")
        told = self._asked[: len(points)]
        for (asked, _), point in zip(told, points, strict=True):
            if dict(point) != asked:
                raise ValueError("tell the points in the order they were asked")
        self._asked = self._asked[len(points) :]
        hardware = [{k: v for k, v in p.items() if k != POINT_KEY} for p in points]
        super().tell(hardware, objectives, constraint_values)
        k = len(points)
        costs = configuration_cost(self.problem, self.history.objectives[-k:])
        feasible = (self.history.constraint_values[-k:] <= 0).all(axis=1)
        for (_, actions), cost, ok in zip(told, costs, feasible, strict=True):
            self._told.append((actions, float(cost), bool(ok)))
            if ok:
                self._e_max = max(self._e_max, float(cost))
        if len(self._told) >= self.batch:
            self._learn()

    # ---------------------------------------------------------------- internals

    def _network(self) -> PolicyValueNet:
        if self._net is None:
            counts = [self.space.variables[i].size for i in self._free]
            counts += list(LAYER_ACTIONS) * self._layers
            if not counts:
                raise ValueError("poros needs at least one searched variable or layer")
            self._net = PolicyValueNet(counts, hidden=self.hidden, seed=self.seed)
            self._adam = torch.optim.Adam(self._net.parameters(), lr=self.learning_rate)
        return self._net

    def _draw(self) -> list[tuple[dict[str, Any], torch.Tensor]]:
        """A batch of joint configurations sampled from the current policy."""
        actions = self._network().sample(self.batch, self._generator)
        genomes = np.zeros((self.batch, self.space.dim), dtype=np.int64)
        hardware = len(self._free)
        genomes[:, self._free] = actions[:, :hardware].numpy()
        # A conditional space moves some draws; the policy learns from what was evaluated.
        genomes = self.space.repair(genomes)
        actions[:, :hardware] = torch.as_tensor(genomes[:, self._free], dtype=actions.dtype)
        points = self.space.decode(genomes)
        width = len(LAYER_ACTIONS)
        for point, row in zip(points, actions, strict=True):
            if self._layers:
                layers = row[hardware:].reshape(self._layers, width)
                point[POINT_KEY] = layers.tolist()
        return list(zip(points, actions, strict=True))

    def _learn(self) -> None:
        """One actor-critic step on the configurations told since the last one."""
        told, self._told = self._told, []
        actions = torch.stack([a for a, _, _ in told])
        costs = np.array([c for _, c, _ in told])
        feasible = np.array([ok for _, _, ok in told])
        reward = rewards(costs, feasible, self._e_max)
        self.batch_rewards.append(float(reward.mean()))
        net, adam = self._network(), self._adam
        loss = actor_critic_loss(net, actions, torch.tensor(reward, dtype=torch.float32),
                                 gamma=self.gamma, value_weight=self.value_weight,
                                 entropy_weight=self.entropy_weight)
        adam.zero_grad()
        loss.backward()
        adam.step()
        logger.debug("poros: batch of %d, mean reward %.3f, loss %.4f", len(told),
                     self.batch_rewards[-1], float(loss.detach()))


@dataclass(frozen=True)
class PlannedEffort(SoftwareEffort):
    """A trial's layers priced with the mappings ``plan`` names (`PlannedMappingEvaluator`)."""

    plan: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def apply(self, evaluator: LayerEvaluator) -> LayerEvaluator:
        return PlannedMappingEvaluator(self.plan, getattr(evaluator, "memory", DEFAULT_MEMORY),
                                       getattr(evaluator, "pricing", "program"))


class PlannedSchedule(SoftwareSchedule):
    """One round; each trial (by index) with its `PlannedEffort`."""

    def __init__(self, efforts: Mapping[int, PlannedEffort]) -> None:
        self.efforts = dict(efforts)

    def first(self, trials: Sequence[int]) -> dict[int, SoftwareEffort]:
        return {trial: self.efforts[trial] for trial in trials}


def _copy(point: dict[str, Any]) -> dict[str, Any]:
    """A copy the driver may change without touching what this method remembers."""
    return {k: ([list(layer) for layer in v] if k == POINT_KEY else v) for k, v in point.items()}
