"""PPO on the course's CartPole, the loop top to bottom: collect, value, GAE masks, advantages, update, evaluate.

:func:`run_ppo` is the same for every implementation: it receives the functions the student writes (``gae_masks``,
``bootstrap_values``, ``gae_advantages``, ``ppo_update``) as arguments, so ``exercises.train_ppo`` trains with the
student's code and ``solutions.train_ppo`` with the reference. It never imports ``solutions``. Everything else an
update does is here, in plain torch, commented once where it happens.

Every random choice comes from generators derived from ``config.seed``, and torch runs on ``config.torch_threads``
threads, so a seed reproduces the history bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from kata import PROFILES
from kata.arrays import check_choice, check_integer, check_non_negative, check_positive, check_probability
from kata.rl import Adam, torch_threads
from kata.rl.cartpole import ACTION_COUNT, MAX_EPISODE_STEPS, OBSERVATION_SIZE, CartPoleBatch, step_states
from kata.rl.cartpole import Actor, Critic, action_log_probs

@dataclass(frozen=True)
class PPOConfig:
    """Everything one PPO run depends on. ``dataclasses.replace(config, field=value)`` re-checks the fields.

    Budget: ``total_steps`` environment transitions in ``total_steps // (num_envs * rollout_steps)`` updates.
    """

    seed: int = 0
    total_steps: int = 29_696  # 58 updates: the smoke profile, within the curriculum's 30,000 steps
    num_envs: int = 16
    rollout_steps: int = 32
    epochs: int = 10
    minibatch_size: int = 128
    learning_rate: float = 2.5e-3
    anneal_learning_rate: bool = True  # linearly: update k of N uses (1 - (k - 1) / N) of it, the last 1 / N
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2
    value_clip_epsilon: float = 10.0  # in return units: returns are bounded by 1 / (1 - gamma) = 100 here
    # With separate networks and Adam (which rescales each parameter's step), c_v only sets the critic's weight in
    # the shared gradient-norm clip: the larger it is, the more a large critic error shrinks the actor's step too.
    value_coefficient: float = 1.0
    entropy_coefficient: float = 0.0
    max_grad_norm: float = 0.5
    normalize_advantages: bool = True  # per minibatch
    target_kl: float | None = None
    hidden_sizes: tuple[int, ...] = (64, 64)
    adam_epsilon: float = 1e-5
    evaluation_every: int = 4  # updates between greedy evaluations (the last update is always evaluated)
    evaluation_episodes: int = 10
    max_episode_steps: int = MAX_EPISODE_STEPS
    torch_threads: int | None = 1  # None leaves torch's setting alone; tiny networks run fastest on one thread

    def __post_init__(self) -> None:
        check_integer("seed", self.seed, 0)
        for name in ("total_steps", "num_envs", "rollout_steps", "epochs", "minibatch_size", "evaluation_every",
                     "evaluation_episodes", "max_episode_steps"):
            check_integer(name, getattr(self, name), 1)
        if self.total_steps < self.num_envs * self.rollout_steps:
            raise ValueError(
                f"total_steps must allow one rollout of num_envs * rollout_steps = "
                f"{self.num_envs * self.rollout_steps} steps; got {self.total_steps}"
            )
        for name in ("learning_rate", "clip_epsilon", "value_clip_epsilon", "max_grad_norm", "adam_epsilon"):
            check_positive(name, getattr(self, name))
        for name in ("gamma", "gae_lambda"):
            check_probability(name, getattr(self, name))
        for name in ("value_coefficient", "entropy_coefficient"):
            check_non_negative(name, getattr(self, name))
        if self.target_kl is not None:
            check_positive("target_kl", self.target_kl)
        if self.torch_threads is not None:
            check_integer("torch_threads", self.torch_threads, 1)
        if not self.hidden_sizes:
            raise ValueError("hidden_sizes must name at least one hidden layer")
        for size in self.hidden_sizes:
            check_integer("hidden_sizes", size, 1)

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_steps

    @property
    def num_updates(self) -> int:
        return self.total_steps // self.batch_size


def profile_config(mode: str, seed: int = 0) -> PPOConfig:
    """The lab's two profiles. ``smoke``: a quick CPU check that still solves CartPole; ``full``: a longer run.

    Both evaluate greedily on 10 episodes capped at 500 steps, and learn from 16 environments x 32 steps per update
    in 10 epochs of 4 minibatches of 128. ValueError for any other ``mode``. Smoke: 29,696 steps, 58 updates and
    2,320 gradient steps, evaluated every 2 updates. Full: 49,152 steps, 96 updates and 3,840 gradient steps,
    evaluated every 4. How often each solves, on held-out seeds: docs/benchmarks.md.
    """
    check_choice("mode", mode, PROFILES)
    if mode == "smoke":
        return PPOConfig(seed=seed, evaluation_every=2)
    return PPOConfig(seed=seed, total_steps=49_152, evaluation_every=4)


class RolloutBatch(NamedTuple):
    """One rollout flattened for the update; row ``i`` is one transition. All tensors are plain data (no grad).

    observations float32 ``[B, 4]``; actions int64 ``[B]``; old_log_probs, old_values, advantages, returns float32
    ``[B]`` (``log π_old(a|s)``, ``V_old(s)``, GAE advantages, ``advantages + old_values``).
    """

    observations: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


HISTORY_KEYS = (
    "update", "environment_steps", "learning_rate", "policy_loss", "value_loss", "entropy", "approx_kl",
    "active_clip_fraction", "ratio_outside_fraction", "grad_norm", "epochs_completed", "explained_variance",
    "training_episode_return", "evaluation_mean", "evaluation_std", "wall_time",
)
UPDATE_DIAGNOSTICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "active_clip_fraction",
                      "ratio_outside_fraction", "grad_norm", "epochs_completed")


def evaluate_greedy(actor: torch.nn.Module, episodes: int, seed: int,
                    max_episode_steps: int = MAX_EPISODE_STEPS) -> np.ndarray:
    """The greedy policy's return on ``episodes`` episodes: float64 ``[episodes]``, each at most ``max_episode_steps``.

    Greedy: the most probable action (ties go to the lower one), so the score does not depend on a random stream.
    The episodes start from the states environments seeded ``seed, seed + 1, ...`` reset to, the same on every call.
    """
    env = CartPoleBatch(check_integer("episodes", episodes, 1), max_episode_steps=max_episode_steps)
    env.reset(seed=seed)
    states = env.states  # stepped with the batch's dynamics, without its autoreset: each episode is played once
    returns = np.zeros(episodes)
    running = np.ones(episodes, dtype=bool)
    with torch.no_grad():
        for _ in range(max_episode_steps):
            actions = actor(torch.from_numpy(states.astype(np.float32))).argmax(dim=-1).numpy()
            states, terminated = step_states(states, actions)
            returns += running  # +1 for every step an episode is still running, the one that ends it included
            running &= ~terminated
            if not running.any():
                break
    return returns


def run_ppo(
    config: PPOConfig,
    *,
    gae_masks: Callable[..., Any],
    bootstrap_values: Callable[..., Any],
    gae_advantages: Callable[..., Any],
    ppo_update: Callable[..., dict[str, float]],
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Train an actor–critic with PPO on CartPole under ``config``, with the student's functions.

    Returns a dict: ``final_evaluation_mean`` / ``final_evaluation_std`` / ``final_evaluation_returns`` (greedy
    evaluation after the last update), ``history`` (one list per key of :data:`HISTORY_KEYS`, one entry per update;
    ``evaluation_mean``/``evaluation_std`` are NaN where the update was not evaluated), ``environment_steps``,
    ``wall_time`` (seconds), ``config`` (the config as a dict), ``actor`` and ``critic``. ``progress``, if given, is
    called with each update's history row, in order, once the row is complete (its evaluation, if any, has run).
    """
    if not isinstance(config, PPOConfig):
        raise ValueError(f"config must be a PPOConfig (see profile_config); got {type(config).__name__}")
    with torch_threads(config.torch_threads):
        started = time.perf_counter()
        # Independent random streams for independent purposes, all from the one seed, so that changing one (say,
        # evaluation) never shifts another: NumPy for the environments, torch for the rest.
        names = ("environment", "acting", "initialisation", "shuffling", "evaluation")
        children = np.random.SeedSequence(config.seed).spawn(len(names))
        seeds = {name: int(child.generate_state(1, dtype=np.uint32)[0]) for name, child in zip(names, children)}
        init_generator = torch.Generator().manual_seed(seeds["initialisation"])
        actor = Actor(OBSERVATION_SIZE, ACTION_COUNT, config.hidden_sizes, init_generator)
        critic = Critic(OBSERVATION_SIZE, config.hidden_sizes, init_generator)
        # One optimizer over both networks, so that one gradient-norm clip covers both.
        optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=config.learning_rate, eps=config.adam_epsilon)
        acting_generator = torch.Generator().manual_seed(seeds["acting"])
        shuffle_generator = torch.Generator().manual_seed(seeds["shuffling"])
        env = CartPoleBatch(config.num_envs, max_episode_steps=config.max_episode_steps)
        observations, _ = env.reset(seed=seeds["environment"])
        steps, n = config.rollout_steps, config.num_envs
        rows: list[dict[str, Any]] = []
        final_returns = np.full(config.evaluation_episodes, np.nan)

        for update in range(1, config.num_updates + 1):
            # The learning rate falls linearly, from its full value at the first update to 1/N of it at the last.
            learning_rate = config.learning_rate
            if config.anneal_learning_rate:
                learning_rate *= 1.0 - (update - 1) / config.num_updates
            for group in optimizer.param_groups:
                group["lr"] = learning_rate

            # 1. Collect: `steps` steps of the n environments with actions sampled from the current policy, stored
            # time-major (row t is step t of every environment). An environment that ends an episode resets itself,
            # so the next stored observation is the next episode's first: the one that ended the episode is kept
            # apart, in final_observations (zeros where no episode ended). Termination (the pole fell, the cart
            # left) and truncation (the time limit) stay apart too: both can hold at once.
            buffer = np.empty((steps, n, OBSERVATION_SIZE), dtype=np.float32)  # where actions[t] was taken
            actions = np.empty((steps, n), dtype=np.int64)
            rewards = np.empty((steps, n))
            terminated = np.empty((steps, n), dtype=bool)
            truncated = np.empty((steps, n), dtype=bool)
            final_observations = np.zeros((steps, n, OBSERVATION_SIZE), dtype=np.float32)
            episode_returns: list[float] = []
            for t in range(steps):
                buffer[t] = observations
                with torch.no_grad():
                    probabilities = torch.softmax(actor(torch.from_numpy(observations)), dim=-1)
                actions[t] = torch.multinomial(probabilities, 1, generator=acting_generator).squeeze(1).numpy()
                observations, rewards[t], terminated[t], truncated[t], info = env.step(actions[t])
                if "final_observation" in info:
                    done = terminated[t] | truncated[t]
                    final_observations[t][done] = info["final_observation"][done]
                    episode_returns.extend(info["episode_returns"][done].tolist())

            # 2. Value everything in one pass without gradient: the old log-probabilities log π_old(a_t|s_t), and
            # from one critic call V(s_t), V(final observation) where an episode ended, and V(last observation),
            # where the buffer's last step leads.
            done = terminated | truncated
            ended = int(done.sum())
            with torch.no_grad():
                flat_observations = torch.from_numpy(buffer.reshape(steps * n, OBSERVATION_SIZE))
                flat_actions = torch.from_numpy(actions.reshape(-1))
                old_log_probs = action_log_probs(actor(flat_observations), flat_actions)
                after = torch.from_numpy(np.concatenate([final_observations[done], observations]))
                all_values = critic(torch.cat([flat_observations, after]))
                values = all_values[: steps * n].reshape(steps, n)
                final_values = torch.zeros(steps, n)
                final_values[torch.from_numpy(done)] = all_values[steps * n: steps * n + ended]
                last_values = all_values[steps * n + ended:]

            # 3. GAE, with the student's functions: the flags become GAE's two masks and V(s_{t+1}), then the
            # advantages; the returns the critic regresses on are advantages + V(s_t).
            terminated_mask, trace_cuts = gae_masks(torch.from_numpy(terminated), torch.from_numpy(truncated))
            next_values = bootstrap_values(values, final_values, last_values, torch.from_numpy(terminated),
                                           torch.from_numpy(truncated))
            advantages = gae_advantages(torch.from_numpy(rewards).float(), values, next_values, terminated_mask,
                                        trace_cuts, config.gamma, config.gae_lambda)
            # Plain float32 data for the update, whatever the student's function returned (NumPy, a tensor with grad).
            advantages = torch.as_tensor(advantages, dtype=torch.float32).detach()
            returns = advantages + values

            # 4. PPO's update, the student's function: epochs of shuffled minibatches on the flattened batch.
            batch = RolloutBatch(observations=flat_observations, actions=flat_actions, old_log_probs=old_log_probs,
                                 old_values=values.reshape(-1), advantages=advantages.reshape(-1),
                                 returns=returns.reshape(-1))
            diagnostics = ppo_update(
                actor, critic, optimizer, batch,
                epochs=config.epochs, minibatch_size=config.minibatch_size, clip_epsilon=config.clip_epsilon,
                value_clip_epsilon=config.value_clip_epsilon, value_coefficient=config.value_coefficient,
                entropy_coefficient=config.entropy_coefficient, max_grad_norm=config.max_grad_norm,
                normalize_advantages=config.normalize_advantages, target_kl=config.target_kl,
                generator=shuffle_generator,
            )

            # 5. Log the update. Explained variance 1 - Var(returns - V) / Var(returns): 1 is a perfect critic,
            # 0 one no better than a constant (NaN if the returns do not vary).
            returns_variance = float(batch.returns.var(unbiased=False))
            explained_variance = math.nan if returns_variance == 0.0 else 1.0 - float(
                (batch.returns - batch.old_values).var(unbiased=False)) / returns_variance
            row: dict[str, Any] = {
                "update": update,
                "environment_steps": update * config.batch_size,
                "learning_rate": learning_rate,
                **{key: float(diagnostics[key]) for key in UPDATE_DIAGNOSTICS},
                "explained_variance": explained_variance,
                "training_episode_return": float(np.mean(episode_returns)) if episode_returns else math.nan,
                "evaluation_mean": math.nan,
                "evaluation_std": math.nan,
                "wall_time": time.perf_counter() - started,
            }
            rows.append(row)

            # 6. Evaluate, every evaluation_every updates and after the last: the policy as it is now, greedy, on
            # evaluation_episodes episodes that start alike every time. The row is reported once it is complete.
            if update % config.evaluation_every == 0 or update == config.num_updates:
                final_returns = evaluate_greedy(actor, config.evaluation_episodes, seeds["evaluation"],
                                                config.max_episode_steps)
                row["evaluation_mean"], row["evaluation_std"] = float(final_returns.mean()), float(final_returns.std())
            if progress is not None:
                progress(row)

    return {
        "final_evaluation_mean": float(final_returns.mean()),
        "final_evaluation_std": float(final_returns.std()),
        "final_evaluation_returns": final_returns,
        "history": {key: [row[key] for row in rows] for key in HISTORY_KEYS},
        "environment_steps": config.num_updates * config.batch_size,
        "wall_time": time.perf_counter() - started,
        "config": dataclasses.asdict(config),
        "actor": actor,
        "critic": critic,
    }
