"""The PPO loop's speed mechanisms: each one kept because a benchmark measures what it saves.

Measured with ``benchmarks/ppo_cartpole.py`` (smoke profile, ``evaluation_every=2`` as the lab runs it, seeds 11
and 37), each mechanism switched off alone, three alternating rounds, best of 3, on the 2-core machine README.md
names at load average 0.7-1.0 (CPU probe 13-20 ms). With all of them a seed took 2.81 and 2.80 s: acting 0.05 s,
evaluation 0.11 and 0.08 s.

- :class:`PolicySnapshot`, a NumPy copy of the actor for acting and evaluating: with the torch actor instead,
  acting took 0.14 and 0.17 s, evaluation 0.68 and 0.89 s, a seed 3.64 and 4.78 s.
- :class:`DeferredEvaluation`, ten policies' greedy evaluations stepped together: evaluated one by one right after
  their updates, evaluation took 0.60 and 0.64 s, a seed 3.99 and 4.26 s.
- :class:`Adam`, torch's fused Adam through its functional form: ``torch.optim.Adam(fused=True)``, the same
  arithmetic, makes the first run in a process pay its ``torch._dynamo`` import: seed 11 took 4.42 s (1.1-1.8 s
  more, measured alone); the next run, 3.44 s, within the noise.

Not kept: calling each layer's ``forward`` to skip ``nn.Module.__call__`` saved nothing measurable (2.83 and 2.82 s
a seed with it), so the networks are plain ``nn.Sequential`` calls.

:class:`PolicySnapshot` is more than a speed-up: the actions every seed samples come from its NumPy arithmetic
(float32 logits, float64 probabilities), which differs from torch's in the last bits. Acting through torch would draw
the same actions almost always, not always, so replacing it would change seeds' runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.adam import adam as adam_update  # documented: torch.optim.adam.adam, Adam's functional form

from kata.concepts.arrays import check_integer, check_positive
from kata.rl.cartpole import MAX_EPISODE_STEPS, OBSERVATION_SIZE, CartPoleBatch, step_states
from kata.rl.optim import trainable_parameters


class PolicySnapshot:
    """A frozen NumPy copy of an actor's weights (a module whose ``net`` is a Sequential of Linear and Tanh layers).

    ``policy(observations [B, obs]) -> actions int64 [B]`` is greedy: argmax of the logits (ties go to the lower
    action), so evaluation is deterministic. ``policy.probabilities(observations)`` gives float64 ``[B, actions]``
    for sampling. A NumPy matmul on 16 observations costs microseconds where torch's dispatch costs tens, and the
    weights cannot change during a rollout anyway.
    """

    def __init__(self, actor: nn.Module) -> None:
        self.layers = [
            (module.weight.detach().cpu().numpy().astype(np.float32).T.copy(),
             module.bias.detach().cpu().numpy().astype(np.float32).copy())
            for module in actor.net if isinstance(module, nn.Linear)
        ]

    @classmethod
    def stack(cls, snapshots: Sequence[PolicySnapshot]) -> PolicySnapshot:
        """P snapshots of one architecture as one policy over ``[P, B, obs]`` observations: policy p acts on
        ``observations[p]``, and its logits equal its own snapshot's bit for bit (NumPy's stacked matmul multiplies
        each slice with the same kernel)."""
        if not snapshots or len({len(snapshot.layers) for snapshot in snapshots}) != 1:
            raise ValueError("snapshots must be one or more PolicySnapshots of the same architecture")
        stacked = cls.__new__(cls)
        stacked.layers = [
            (np.stack([snapshot.layers[i][0] for snapshot in snapshots]),
             np.stack([snapshot.layers[i][1] for snapshot in snapshots])[:, None, :])
            for i in range(len(snapshots[0].layers))
        ]
        return stacked

    def logits(self, observations: np.ndarray) -> np.ndarray:
        hidden = np.asarray(observations, dtype=np.float32)
        for i, (weight, bias) in enumerate(self.layers):
            hidden = hidden @ weight + bias
            if i < len(self.layers) - 1:
                hidden = np.tanh(hidden)
        return hidden

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        logits = self.logits(observations).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=-1, keepdims=True)

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(observations), axis=-1)


def evaluate_together(policies: Sequence[PolicySnapshot], episodes: int, seed: int,
                      max_episode_steps: int = MAX_EPISODE_STEPS) -> np.ndarray:
    """Greedy returns of several policies: float64 ``[len(policies), episodes]``, each at most ``max_episode_steps``.

    Every policy plays the same ``episodes`` starts (environments seeded ``seed, seed + 1, ...``), so every call
    with the same policy gives the same returns, and row p is policy p's alone bit for bit. All of them step
    together: a NumPy call on a few dozen numbers costs its overhead, not its arithmetic, so ten policies take
    little longer than one, and a good policy's evaluation is ``max_episode_steps`` steps long.
    """
    check_integer("episodes", episodes, 1)
    check_integer("max_episode_steps", max_episode_steps, 1)
    if len(policies) == 0:
        raise ValueError("policies must hold at least one PolicySnapshot")
    count = len(policies)
    policy = PolicySnapshot.stack(policies)
    env = CartPoleBatch(episodes, max_episode_steps=max_episode_steps)
    env.reset(seed=seed)
    # The batch's own dynamics without its autoreset bookkeeping; row p * episodes + e is policy p's episode e.
    states = np.tile(env.states, (count, 1))
    returns = np.zeros(count * episodes)
    running = np.ones(count * episodes, dtype=bool)
    for _ in range(max_episode_steps):
        observations = states.astype(np.float32).reshape(count, episodes, OBSERVATION_SIZE)
        states, terminated = step_states(states, policy(observations).reshape(-1))
        returns += running  # +1 for every step an episode is still running, the terminating one included
        running &= ~terminated
        if not running.any():
            break
    return returns.reshape(count, episodes)


class DeferredEvaluation:
    """A loop's greedy evaluations, run ``per_batch`` policies at a time by :func:`evaluate_together`.

    ``add(row, policy, last)`` takes an update's history row and the :class:`PolicySnapshot` to evaluate for it
    (``None``: that update is not evaluated). Once ``per_batch`` policies wait, or when ``last`` is true, they are
    evaluated and their rows get ``evaluation_mean`` and ``evaluation_std``. It returns the rows now complete, in
    order: every row before the first one still waiting for its evaluation. ``final_returns`` holds the latest
    evaluation's returns, float64 ``[episodes]`` (NaN before any).
    """

    def __init__(self, episodes: int, seed: int, max_episode_steps: int, per_batch: int) -> None:
        self.episodes, self.seed, self.max_episode_steps = episodes, seed, max_episode_steps
        self.per_batch = check_integer("per_batch", per_batch, 1)
        self.waiting: list[tuple[dict[str, Any], PolicySnapshot]] = []
        self.unreported: list[dict[str, Any]] = []
        self.final_returns = np.full(episodes, np.nan)

    def add(self, row: dict[str, Any], policy: PolicySnapshot | None, last: bool) -> list[dict[str, Any]]:
        self.unreported.append(row)
        if policy is not None:
            self.waiting.append((row, policy))
        if self.waiting and (len(self.waiting) == self.per_batch or last):
            evaluated = evaluate_together([waiting for _, waiting in self.waiting], self.episodes, self.seed,
                                          self.max_episode_steps)
            for (waiting_row, _), returns in zip(self.waiting, evaluated):
                waiting_row["evaluation_mean"] = float(returns.mean())
                waiting_row["evaluation_std"] = float(returns.std())
            self.final_returns = evaluated[-1]
            self.waiting.clear()
        ready = len(self.unreported)
        if self.waiting:
            ready = next(i for i, unreported in enumerate(self.unreported) if unreported is self.waiting[0][0])
        complete, self.unreported = self.unreported[:ready], self.unreported[ready:]
        return complete


class Adam:
    """Adam over one group of parameters: exactly ``torch.optim.Adam(params, lr, betas, eps, fused=True)``'s
    update (no weight decay, no amsgrad), called through torch's public functional form ``torch.optim.adam.adam``.

    Constructing the class ``torch.optim.Adam`` imports ``torch._dynamo`` (its ``add_param_group`` is wrapped to
    disable the compiler), which every process pays once, while the functional form on the CPU does not. The
    interface is the part of ``torch.optim.Optimizer`` the loops use (:class:`kata.rl.optim.Optimizer`):
    ``param_groups`` (one group, whose ``"lr"`` may be changed between steps to anneal it), ``zero_grad()`` and
    ``step()``. The fused kernel runs on the CPU from torch 2.4 on.
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        params = trainable_parameters(parameters)
        self.param_groups = [{"params": params, "lr": check_positive("lr", lr)}]
        self.betas = betas
        self.eps = check_positive("eps", eps)
        # torch.optim.Adam's state: both moments, and a float32 step count per parameter.
        self.first_moments = [torch.zeros_like(parameter) for parameter in params]
        self.second_moments = [torch.zeros_like(parameter) for parameter in params]
        self.step_counts = [torch.zeros((), dtype=torch.float32) for _ in params]

    def zero_grad(self) -> None:
        for parameter in self.param_groups[0]["params"]:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient (the others keep their state, as in torch)."""
        params = self.param_groups[0]["params"]
        live = [i for i, parameter in enumerate(params) if parameter.grad is not None]
        adam_update(
            [params[i] for i in live], [params[i].grad for i in live], [self.first_moments[i] for i in live],
            [self.second_moments[i] for i in live], [], [self.step_counts[i] for i in live], fused=True,
            amsgrad=False, beta1=self.betas[0], beta2=self.betas[1], lr=self.param_groups[0]["lr"], weight_decay=0.0,
            eps=self.eps, maximize=False,
        )
