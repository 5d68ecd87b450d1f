"""The Q-learning agent of HASCO's software search: a DQN over revision choices.

HASCO (VI-B) lets a Q-network predict, for a candidate optimization, how good each revision
is, and applies the revision with the highest Q-value. This is DQN (Mnih et al. 2015): a
4-layer fully connected network, epsilon-greedy action choice restricted to the revisions
that change the candidate, an experience replay buffer, and a target network synced every
``target_sync`` updates. Everything random comes from the seed (torch generator and numpy), and
torch runs single-threaded, so two agents with one seed act identically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class DQNSettings:
    hidden: int = 64
    learning_rate: float = 1e-3
    gamma: float = 0.5  # revisions pay off quickly; a short horizon learns faster
    batch_size: int = 64
    replay_capacity: int = 20_000
    target_sync: int = 25
    epsilon_start: float = 0.5
    epsilon_end: float = 0.05
    epsilon_decay: float = 0.97  # per round


def q_network(features: int, actions: int, hidden: int) -> nn.Sequential:
    """Four fully connected layers, ``features -> hidden -> hidden -> hidden -> actions``."""
    return nn.Sequential(
        nn.Linear(features, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, actions),
    )


class ReplayBuffer:
    """A ring buffer of (state, action, reward, next state, next valid actions) transitions."""

    def __init__(self, capacity: int, features: int, actions: int) -> None:
        self.states = np.zeros((capacity, features), dtype=np.float32)
        self.next_states = np.zeros((capacity, features), dtype=np.float32)
        self.next_valid = np.zeros((capacity, actions), dtype=bool)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.capacity, self.size, self.cursor = capacity, 0, 0

    def push(self, states: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
             next_states: np.ndarray, next_valid: np.ndarray) -> None:
        for i in range(len(actions)):
            at = self.cursor
            self.states[at], self.actions[at], self.rewards[at] = states[i], actions[i], rewards[i]
            self.next_states[at], self.next_valid[at] = next_states[i], next_valid[i]
            self.cursor = (self.cursor + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        rows = rng.integers(0, self.size, size=count)
        return (self.states[rows], self.actions[rows], self.rewards[rows],
                self.next_states[rows], self.next_valid[rows])


class DQNAgent:
    """Chooses revisions for a batch of candidates and learns from their rewards."""

    def __init__(self, features: int, actions: int, seed: int,
                 settings: DQNSettings = DQNSettings()) -> None:
        torch.set_num_threads(1)
        self.settings = settings
        self.rng = np.random.default_rng(seed)
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.online = q_network(features, actions, settings.hidden)
        self.target = q_network(features, actions, settings.hidden)
        torch.random.set_rng_state(generator_state)  # leave the caller's torch RNG alone
        self.target.load_state_dict(self.online.state_dict())
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=settings.learning_rate)
        self.replay = ReplayBuffer(settings.replay_capacity, features, actions)
        self.epsilon = settings.epsilon_start
        self.updates = 0

    def q_values(self, states: np.ndarray) -> np.ndarray:
        """(n x actions) Q-values of (n x features) states."""
        with torch.no_grad():
            return self.online(torch.from_numpy(states)).numpy()

    def choose(self, states: np.ndarray, valid: np.ndarray, branch: int) -> np.ndarray:
        """(n x branch) distinct valid actions per state: best Q first, each replaced by a
        random valid action with probability epsilon. -1 where fewer are valid."""
        q = np.where(valid, self.q_values(states), -np.inf)
        chosen = np.full((len(states), branch), -1, dtype=np.int64)
        for row in range(len(states)):
            options = np.flatnonzero(valid[row])
            if not len(options):
                continue
            ranked = list(options[np.argsort(-q[row, options], kind="stable")])
            picks: list[int] = []
            for _ in range(min(branch, len(options))):
                pool = [a for a in ranked if a not in picks]
                explore = self.rng.random() < self.epsilon
                picks.append(int(self.rng.choice(pool)) if explore else int(pool[0]))
            chosen[row, : len(picks)] = picks
        return chosen

    def remember(self, states, actions, rewards, next_states, next_valid) -> None:
        self.replay.push(states, actions, rewards, next_states, next_valid)

    def learn(self, steps: int) -> float:
        """``steps`` minibatch updates of the online network; the mean loss (0 if too few)."""
        s = self.settings
        if self.replay.size < s.batch_size:
            return 0.0
        losses = []
        for _ in range(steps):
            states, actions, rewards, next_states, next_valid = self.replay.sample(
                s.batch_size, self.rng)
            with torch.no_grad():
                next_q = self.target(torch.from_numpy(next_states))
                next_q = next_q.masked_fill(~torch.from_numpy(next_valid), -1e9)
                best_next = next_q.max(dim=1).values.clamp(min=-10.0)
                goal = torch.from_numpy(rewards) + s.gamma * best_next
            taken = self.online(torch.from_numpy(states)).gather(
                1, torch.from_numpy(actions)[:, None])[:, 0]
            loss = nn.functional.smooth_l1_loss(taken, goal)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.updates += 1
            if self.updates % s.target_sync == 0:
                self.target.load_state_dict(self.online.state_dict())
            losses.append(loss.item())
        return float(np.mean(losses))

    def end_round(self) -> None:
        s = self.settings
        self.epsilon = max(s.epsilon_end, self.epsilon * s.epsilon_decay)
