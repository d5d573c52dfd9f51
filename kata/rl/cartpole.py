"""CartPole-v1, written out so that nothing depends on Gymnasium's version, and the actor and critic that play it.

The dynamics are the published ones (Barto, Sutton and Anderson, 1983, as in Gymnasium's ``CartPole-v1``):
gravity 9.8, cart mass 1.0, pole mass 0.1, pole half-length 0.5, force magnitude 10, time step 0.02 s, explicit
Euler (positions move with the *old* velocities), termination when ``|x| > 2.4`` or ``|theta| > 12 degrees``,
reset state ``U(-0.05, 0.05)^4``, reward +1 for every step including the one that terminates, and truncation
after 500 steps.

Termination and truncation stay distinct, because they ask for different things from GAE: a terminated step has
no future (no bootstrap), a truncated step has one that the time limit hid (bootstrap from V(final observation)).
At step 500 both flags can be True, exactly as in Gymnasium: the pole fell on the last allowed step.

:class:`CartPoleBatch` steps N environments together in NumPy, with Gymnasium's API (``reset(seed=...) -> (obs,
info)``, ``step(actions) -> (obs, reward, terminated, truncated, info)``); one environment is a batch of one. Each
environment resets itself when its episode ends (the observation returned is then the new episode's first) and the
observation that ended the episode is kept in ``info["final_observation"]``, because that, not the reset observation,
is where a truncated step bootstraps. :func:`step_states` is the dynamics alone, for a batch of states.

The actor and the critic are two separate small MLPs with orthogonal initialisation. Separate networks keep the value
loss from pulling on the policy's features, which on CartPole is both simpler to reason about and faster to learn.
Orthogonal weights with gain sqrt(2) in the hidden layers, a tiny gain (0.01) on the policy head (so the first policy
is nearly uniform, hence high entropy) and gain 1 on the value head, zero biases: the usual PPO initialisation. A
``torch.Generator`` makes the initialisation independent of torch's global random state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from kata.arrays import check_integer

GRAVITY = 9.8
CART_MASS = 1.0
POLE_MASS = 0.1
TOTAL_MASS = CART_MASS + POLE_MASS
POLE_HALF_LENGTH = 0.5  # "length" in the published code: half the pole's length
POLE_MASS_LENGTH = POLE_MASS * POLE_HALF_LENGTH
FORCE_MAGNITUDE = 10.0
TAU = 0.02  # seconds between state updates
X_THRESHOLD = 2.4
THETA_THRESHOLD_RADIANS = 12 * 2 * math.pi / 360
RESET_BOUND = 0.05
MAX_EPISODE_STEPS = 500
OBSERVATION_SIZE = 4
ACTION_COUNT = 2  # 0 pushes the cart left, 1 pushes it right


def step_states(states: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One explicit-Euler step of CartPole for a batch of states.

    ``states``: float64 ``[N, 4]`` rows ``(x, x_dot, theta, theta_dot)``; ``actions``: integers ``[N]`` in {0, 1}.
    Returns the next states (float64 ``[N, 4]``, a new array) and ``terminated`` (bool ``[N]``).
    """
    x, x_dot, theta, theta_dot = states[:, 0], states[:, 1], states[:, 2], states[:, 3]
    force = np.where(actions == 1, FORCE_MAGNITUDE, -FORCE_MAGNITUDE)
    cos_theta = np.cos(theta)
    sin_theta = np.sin(theta)
    temp = (force + POLE_MASS_LENGTH * theta_dot**2 * sin_theta) / TOTAL_MASS
    theta_acc = (GRAVITY * sin_theta - cos_theta * temp) / (
        POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos_theta**2 / TOTAL_MASS)
    )
    x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos_theta / TOTAL_MASS
    # Explicit Euler: positions advance with the velocities from before this step.
    next_states = np.empty_like(states)
    next_states[:, 0] = x + TAU * x_dot
    next_states[:, 1] = x_dot + TAU * x_acc
    next_states[:, 2] = theta + TAU * theta_dot
    next_states[:, 3] = theta_dot + TAU * theta_acc
    terminated = (np.abs(next_states[:, 0]) > X_THRESHOLD) | (np.abs(next_states[:, 2]) > THETA_THRESHOLD_RADIANS)
    return next_states, terminated


def _check_actions(actions: Any, count: int) -> np.ndarray:
    array = np.asarray(actions)
    if array.shape != (count,) or not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise ValueError(f"action must be {count} integer(s) in {{0, 1}}; got {actions!r}")
    if not np.all((array == 0) | (array == 1)):
        raise ValueError(f"action must be 0 (push left) or 1 (push right); got {actions!r}")
    return array.astype(np.int64)


def _observe(states: np.ndarray) -> np.ndarray:
    # Gymnasium hands out float32 observations and keeps the state in float64; so do we.
    return states.astype(np.float32)


class CartPoleBatch:
    """``num_envs`` CartPole-v1 environments stepped together, each resetting itself when its episode ends.

    ``reset(seed=s)`` seeds environment ``i`` with ``s + i`` (each has its own generator, so environment ``i``
    sees exactly what ``CartPoleBatch(1).reset(seed=s + i)`` and its later resets would see).
    ``step(actions [N]) -> (observations float32 [N, 4], rewards float64 [N], terminated bool [N],
    truncated bool [N], info)``. Where an episode ended, the observation is the next episode's first and
    ``info["final_observation"][i]`` is the one that ended it; ``info["episode_returns"]`` and
    ``info["episode_lengths"]`` hold the finished episodes' returns and lengths (NaN / 0 elsewhere).
    ``states`` is the float64 ``[N, 4]`` state (a copy; assignable).
    """

    def __init__(self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS) -> None:
        self.num_envs = check_integer("num_envs", num_envs, 1)
        self.max_episode_steps = check_integer("max_episode_steps", max_episode_steps, 1)
        self._rngs = [np.random.default_rng() for _ in range(self.num_envs)]
        self._states: np.ndarray | None = None
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._returns = np.zeros(self.num_envs)

    @property
    def states(self) -> np.ndarray | None:
        return None if self._states is None else self._states.copy()

    @states.setter
    def states(self, value: Any) -> None:
        array = np.array(value, dtype=np.float64)
        if array.shape != (self.num_envs, OBSERVATION_SIZE) or not np.all(np.isfinite(array)):
            raise ValueError(f"states must be finite, shaped ({self.num_envs}, 4); got shape {array.shape}")
        self._states = array

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            seed = check_integer("seed", seed, 0)
            self._rngs = [np.random.default_rng(seed + i) for i in range(self.num_envs)]
        self._states = np.stack([rng.uniform(-RESET_BOUND, RESET_BOUND, size=OBSERVATION_SIZE) for rng in self._rngs])
        self.elapsed_steps = np.zeros(self.num_envs, dtype=np.int64)
        self._returns = np.zeros(self.num_envs)
        return _observe(self._states), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        if self._states is None:
            raise ValueError("step() called before reset()")
        actions = _check_actions(actions, self.num_envs)
        self._states, terminated = step_states(self._states, actions)
        self.elapsed_steps += 1
        self._returns += 1.0
        truncated = self.elapsed_steps >= self.max_episode_steps
        done = terminated | truncated
        info: dict[str, np.ndarray] = {}
        if done.any():
            info["final_observation"] = _observe(self._states)
            info["episode_returns"] = np.where(done, self._returns, np.nan)
            info["episode_lengths"] = np.where(done, self.elapsed_steps, 0)
            for i in np.flatnonzero(done):
                self._states[i] = self._rngs[i].uniform(-RESET_BOUND, RESET_BOUND, size=OBSERVATION_SIZE)
            self.elapsed_steps[done] = 0
            self._returns[done] = 0.0
        rewards = np.ones(self.num_envs)
        return _observe(self._states), rewards, terminated, truncated, info


# ---- the actor and the critic ----------------------------------------------------------------------------------------

HIDDEN_GAIN = math.sqrt(2.0)
POLICY_HEAD_GAIN = 0.01
VALUE_HEAD_GAIN = 1.0


def _mlp(sizes: Sequence[int], head_gain: float, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = nn.Linear(fan_in, fan_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, gain=head_gain if last else HIDDEN_GAIN, generator=generator)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def _sizes(observation_size: int, hidden_sizes: Sequence[int], output_size: int) -> list[int]:
    check_integer("observation_size", observation_size, 1)
    for size in hidden_sizes:
        check_integer("hidden_sizes", size, 1)
    return [observation_size, *hidden_sizes, output_size]


class Actor(nn.Module):
    """Policy network: observations float32 ``[B, obs]`` -> action logits float32 ``[B, actions]``."""

    def __init__(self, observation_size: int, action_count: int, hidden_sizes: Sequence[int],
                 generator: torch.Generator) -> None:
        super().__init__()
        check_integer("action_count", action_count, 2)
        self.net = _mlp(_sizes(observation_size, hidden_sizes, action_count), POLICY_HEAD_GAIN, generator)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations)


class Critic(nn.Module):
    """Value network: observations float32 ``[B, obs]`` -> state values float32 ``[B]``."""

    def __init__(self, observation_size: int, hidden_sizes: Sequence[int], generator: torch.Generator) -> None:
        super().__init__()
        self.net = _mlp(_sizes(observation_size, hidden_sizes, 1), VALUE_HEAD_GAIN, generator)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations).squeeze(-1)


def action_log_probs(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log pi(a | s) for each row: logits ``[B, A]``, actions integer ``[B]`` -> ``[B]`` (keeps gradients)."""
    return torch.log_softmax(logits, dim=-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
