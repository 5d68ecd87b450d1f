"""Poros's policy-value network (section III-C, Fig. 5) and its actor-critic update (eq. 2).

A configuration is decided one parameter at a time. The state is the vector of every
parameter's value so far, normalized to ``(0, 1]`` by its action count (0: not decided yet),
so step ``t`` sees the hardware and mapping choices of steps ``0 .. t-1``. Three shared fully
connected layers (``hidden`` wide, ReLU) encode the state; each parameter has its own policy
head (a linear layer, then softmax over that parameter's actions) and its own value head (the
expected reward under the current policy), because the action spaces differ in size.

The loss of a batch of ``B`` configurations with rewards ``R`` (one per configuration, shared
by all its steps) is eq. 2 plus the critic's regression::

    sum_t gamma^t * ( -(R - V_t).detach() * log P_t(a_t)  +  value_weight * (R - V_t)^2
                      -  entropy_weight * H(P_t) )

averaged over the batch. The advantage ``R - V_t`` lowers the variance of the policy gradient;
detaching it keeps the critic's error out of the actor's gradient. The actor's advantages are
divided by their standard deviation over the batch: ``E_max - E`` shrinks the differences
between good configurations to a few percent of ``E_max`` once a poor one has been seen, and
without the rescaling the policy all but stops moving near the optimum. The entropy bonus
(not in the paper) keeps the rescaled gradient from collapsing the policy onto the first good
configuration it meets: on the synthetic quadratic of the tests, a policy trained without it
settled on a point of cost 8.5 (optimum 1) within 20 batches and never sampled anything else.

All randomness comes from a `torch.Generator` the caller seeds, and the weights are drawn under
a forked global RNG, so the same seed gives the same samples and updates in any process.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

#: The least spread the actor's advantages are divided by (rewards lie in [-1, 1]): a batch
#: whose rewards are all but equal carries no direction, and dividing by its tiny spread would
#: blow its noise up to full-size steps.
ADVANTAGE_FLOOR = 0.05


class PolicyValueNet(nn.Module):
    """Shared trunk, one policy and one value head per parameter (``action_counts[t]`` actions)."""

    def __init__(self, action_counts: Sequence[int], *, hidden: int = 128, seed: int) -> None:
        super().__init__()
        if not action_counts or min(action_counts) < 1:
            raise ValueError(f"every parameter needs at least one action, got {action_counts}")
        self.action_counts = tuple(int(n) for n in action_counts)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            width = len(self.action_counts)
            self.trunk = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(),
                                       nn.Linear(hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, hidden), nn.ReLU())
            self.policies = nn.ModuleList(nn.Linear(hidden, n) for n in self.action_counts)
            self.values = nn.ModuleList(nn.Linear(hidden, 1) for _ in self.action_counts)
        self.register_buffer("scale", torch.tensor(self.action_counts, dtype=torch.float32))

    @property
    def steps(self) -> int:
        return len(self.action_counts)

    def encode(self, actions: torch.Tensor) -> torch.Tensor:
        """``B x D`` states of ``B x D`` actions (-1: not decided): ``(a + 1) / n``, 0 undecided."""
        return torch.where(actions >= 0, (actions + 1) / self.scale, torch.zeros(()))

    @torch.no_grad()
    def sample(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """``batch x D`` actions, each step drawn from the policy given the steps before it."""
        actions = torch.full((batch, self.steps), -1, dtype=torch.long)
        for t in range(self.steps):
            features = self.trunk(self.encode(actions))
            probabilities = torch.softmax(self.policies[t](features), dim=1)
            actions[:, t] = torch.multinomial(probabilities, 1, generator=generator)[:, 0]
        return actions

    def prefix_states(self, actions: torch.Tensor) -> torch.Tensor:
        """``B x D x D``: the state each step of each configuration was decided in."""
        steps = torch.arange(self.steps)
        known = steps[None, :] < steps[:, None]  # D x D: step t knows the steps before it
        masked = torch.where(known[None], actions[:, None, :], torch.full((), -1))
        return self.encode(masked)

    def evaluate(self, actions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``B x D`` log-probabilities of the taken actions, values, and policy entropies."""
        features = self.trunk(self.prefix_states(actions))  # B x D x hidden
        log_probs, values, entropies = [], [], []
        for t in range(self.steps):
            logits = torch.log_softmax(self.policies[t](features[:, t]), dim=1)
            log_probs.append(logits.gather(1, actions[:, t : t + 1])[:, 0])
            values.append(self.values[t](features[:, t])[:, 0])
            entropies.append(-(logits.exp() * logits).sum(dim=1))
        return (torch.stack(log_probs, dim=1), torch.stack(values, dim=1),
                torch.stack(entropies, dim=1))

    def expected_values(self) -> torch.Tensor:
        """The critic's expected reward of a fresh configuration (the first step's value)."""
        with torch.no_grad():
            start = self.encode(torch.full((1, self.steps), -1, dtype=torch.long))
            return self.values[0](self.trunk(start))[0, 0]


def actor_critic_loss(net: PolicyValueNet, actions: torch.Tensor, rewards: torch.Tensor, *,
                      gamma: float, value_weight: float, entropy_weight: float) -> torch.Tensor:
    """Eq. 2 with the critic's squared error and an entropy bonus, for ``B x D`` actions and
    ``B`` rewards."""
    if actions.ndim != 2 or actions.shape[1] != net.steps or rewards.shape != actions.shape[:1]:
        raise ValueError(f"actions must be B x {net.steps} and rewards B, got "
                         f"{tuple(actions.shape)} and {tuple(rewards.shape)}")
    log_probs, values, entropies = net.evaluate(actions)
    advantage = rewards[:, None] - values
    discount = gamma ** torch.arange(net.steps, dtype=torch.float32)
    actor = advantage.detach()
    actor = actor / actor.std().clamp(min=ADVANTAGE_FLOOR) if actor.numel() > 1 else actor
    per_step = (-actor * log_probs + value_weight * advantage.pow(2)
                - entropy_weight * entropies)
    return (per_step * discount).sum(dim=1).mean()
