"""The PPO loop's frame: configuration, rollout storage, evaluation, logging, and the loop itself.

The loop :func:`run_ppo` is the same for every implementation: it receives the concept functions the student writes
(``gae_masks``, ``bootstrap_values``, ``gae_advantages``, ``ppo_update``) as arguments, so ``exercises.train_ppo``
trains with the student's code and ``solutions.train_ppo`` with the reference. It never imports ``solutions``.

One update of the loop:

1. collect ``rollout_steps`` steps from ``num_envs`` CartPoles with the current policy (a NumPy snapshot of the
   actor, so acting costs no autograd); keep ``terminated``, ``truncated`` and the buffer's end distinct and keep the
   observation that ended each episode;
2. value everything in one batched pass: ``V(s_t)``, ``V(final observation)`` where an episode ended, and
   ``V(last observation)`` for the buffer's end; the old log-probabilities ``log π_old(a_t|s_t)`` likewise;
3. ``gae_masks`` and ``bootstrap_values`` (student) turn the flags into GAE's two masks and ``V(s_{t+1})``;
   ``gae_advantages`` (student) gives the advantages, and the returns are ``advantages + values``;
4. ``ppo_update`` (student) runs the epochs of minibatches on the flattened batch;
5. every ``evaluation_every`` updates, and after the last, a greedy evaluation on separate environments of the policy
   as it is after that update. The policies wait (as NumPy snapshots) and are evaluated together, up to
   ``evaluations_per_batch`` at a time: stepping ten policies' environments in one NumPy call costs about as much as
   stepping one's, and a good policy's evaluation is 500 steps long.

Every random choice comes from generators derived from ``config.seed`` (NumPy for environments and action sampling,
``torch.Generator`` for initialisation and minibatch shuffles), and torch runs on ``config.torch_threads`` threads
for the run, so a seed reproduces the history bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from kata.arrays import check_choice, check_integer, check_non_negative, check_positive, check_probability
from kata.cartpole import ACTION_COUNT, MAX_EPISODE_STEPS, OBSERVATION_SIZE, CartPoleBatch, step_states
from kata.manifest import PROFILES
from kata.networks import Actor, Critic, PolicySnapshot, action_log_probs
from kata.optim import Adam
from kata.runtime import torch_threads

SOLVED_RETURN = 475.0  # CartPole-v1's published "solved" threshold, on the 500-step ceiling


@dataclass(frozen=True)
class PPOConfig:
    """Everything one PPO run depends on. ``dataclasses.replace(config, field=value)`` re-checks the fields.

    Budget: ``total_steps`` environment transitions in ``total_steps // (num_envs * rollout_steps)`` updates.
    """

    seed: int = 0
    total_steps: int = 29_696  # 58 updates: the smoke profile, within the curriculum's 30,000 steps
    num_envs: int = 16
    rollout_steps: int = 32
    epochs: int = 8
    minibatch_size: int = 128
    learning_rate: float = 2.5e-3
    anneal_learning_rate: bool = True  # linearly to 0 over the run: the last updates barely move the policy
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2
    value_clip_epsilon: float = 10.0  # in return units; returns here reach ~100, so 0.2 would freeze the critic
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
    evaluations_per_batch: int = 10  # snapshots evaluated together; 1 evaluates each right after its update
    evaluation_episodes: int = 10
    max_episode_steps: int = MAX_EPISODE_STEPS
    torch_threads: int | None = 1  # None leaves torch's setting alone; tiny networks run fastest on one thread

    def __post_init__(self) -> None:
        check_integer("seed", self.seed, 0)
        for name in ("total_steps", "num_envs", "rollout_steps", "epochs", "minibatch_size", "evaluation_every",
                     "evaluations_per_batch", "evaluation_episodes", "max_episode_steps"):
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

    Both evaluate greedily on 10 episodes capped at 500 steps. ValueError for any other ``mode``.
    Smoke: 16 environments x 32 steps per update, 8 epochs of 4 minibatches of 128, 29,696 steps: 58 updates and
    1,856 gradient steps, evaluated every 2 updates. Full: the same updates over 49,152 steps (96 updates),
    evaluated every 4. Robustness on held-out seeds: ``benchmarks/training_robustness.py``.
    """
    check_choice("mode", mode, PROFILES)
    if mode == "smoke":
        return PPOConfig(seed=seed, evaluation_every=2)
    return PPOConfig(seed=seed, total_steps=49_152, evaluation_every=4)


# ---- rollout storage -------------------------------------------------------------------------------------------


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


@dataclass
class Rollout:
    """Time-major storage of one rollout: ``T = rollout_steps`` rows, ``N = num_envs`` columns.

    ``observations[t]`` is where action ``actions[t]`` was taken. ``terminated[t]`` / ``truncated[t]``: the episode
    ended at step t by the task / by the time limit (both can hold). ``final_observations[t]`` is the observation
    that ended the episode where one ended (zeros elsewhere): after an autoreset ``observations[t + 1]`` is the next
    episode's first observation instead. ``last_observations`` ``[N, 4]`` follow the buffer's last step.
    """

    observations: np.ndarray  # float32 [T, N, 4]
    actions: np.ndarray  # int64 [T, N]
    rewards: np.ndarray  # float64 [T, N]
    terminated: np.ndarray  # bool [T, N]
    truncated: np.ndarray  # bool [T, N]
    final_observations: np.ndarray  # float32 [T, N, 4]
    last_observations: np.ndarray  # float32 [N, 4]
    episode_returns: list[float]


def collect_rollout(env: CartPoleBatch, observations: np.ndarray, policy: PolicySnapshot, steps: int,
                    rng: np.random.Generator, timer: dict[str, float]) -> Rollout:
    """Run ``policy``'s stochastic actions for ``steps`` steps from ``observations``; time env and acting apart."""
    n = env.num_envs
    stored = np.empty((steps, n, OBSERVATION_SIZE), dtype=np.float32)
    actions = np.empty((steps, n), dtype=np.int64)
    rewards = np.empty((steps, n))
    terminated = np.empty((steps, n), dtype=bool)
    truncated = np.empty((steps, n), dtype=bool)
    finals = np.zeros((steps, n, OBSERVATION_SIZE), dtype=np.float32)
    episode_returns: list[float] = []
    uniforms = rng.random((steps, n))
    for t in range(steps):
        started = time.perf_counter()
        stored[t] = observations
        probabilities = policy.probabilities(observations)
        # Inverse-CDF sampling from one uniform per environment.
        cumulative = np.cumsum(probabilities, axis=-1)[:, :-1]
        actions[t] = (uniforms[t][:, None] >= cumulative).sum(axis=-1)
        acted = time.perf_counter()
        observations, rewards[t], terminated[t], truncated[t], info = env.step(actions[t])
        if "final_observation" in info:
            done = terminated[t] | truncated[t]
            finals[t][done] = info["final_observation"][done]
            episode_returns.extend(info["episode_returns"][done].tolist())
        timer["acting"] += acted - started
        timer["environment"] += time.perf_counter() - acted
    return Rollout(stored, actions, rewards, terminated, truncated, finals, observations, episode_returns)


def value_rollout(rollout: Rollout, actor: Actor, critic: Critic) -> dict[str, torch.Tensor]:
    """One batched pass: old log-probs, ``V(s_t)``, ``V(final observation)`` and ``V(last observation)``.

    Returns float32 tensors ``log_probs`` ``[T, N]``, ``values`` ``[T, N]``, ``final_values`` ``[T, N]`` (0 where no
    episode ended) and ``last_values`` ``[N]``.
    """
    steps, n = rollout.actions.shape
    done = rollout.terminated | rollout.truncated
    with torch.no_grad():
        observations = torch.from_numpy(rollout.observations.reshape(steps * n, OBSERVATION_SIZE))
        logits = actor(observations)
        log_probs = action_log_probs(logits, torch.from_numpy(rollout.actions.reshape(-1))).reshape(steps, n)
        extra = np.concatenate([rollout.final_observations[done], rollout.last_observations])
        all_values = critic(torch.cat([observations, torch.from_numpy(extra)]))
        values = all_values[: steps * n].reshape(steps, n)
        final_values = torch.zeros(steps, n)
        final_values[torch.from_numpy(done)] = all_values[steps * n: steps * n + int(done.sum())]
        last_values = all_values[steps * n + int(done.sum()):]
    return {"log_probs": log_probs, "values": values, "final_values": final_values, "last_values": last_values}


# ---- evaluation ------------------------------------------------------------------------------------------------


def evaluate_greedy(actor: Actor, episodes: int, seed: int, max_episode_steps: int = MAX_EPISODE_STEPS,
                    ) -> np.ndarray:
    """Returns of ``episodes`` greedy (argmax) episodes, run side by side on separate environments.

    The environments are seeded with ``seed, seed + 1, ...`` so every call with the same actor gives the same
    returns. Returns float64 ``[episodes]``, each at most ``max_episode_steps``.
    """
    return evaluate_policies([actor.snapshot()], episodes, seed, max_episode_steps)[0]


def evaluate_policies(policies: Sequence[PolicySnapshot], episodes: int, seed: int,
                      max_episode_steps: int = MAX_EPISODE_STEPS) -> np.ndarray:
    """Greedy returns of several policies at once: float64 ``[len(policies), episodes]``.

    Every policy plays the same ``episodes`` starts (environments seeded ``seed, seed + 1, ...``), and row p equals
    ``evaluate_greedy`` of policy p bit for bit. All of them step together: a NumPy call on a few dozen numbers
    costs its overhead, not its arithmetic, so ten policies take little longer than one. A good policy runs
    ``max_episode_steps`` steps, and a run evaluates dozens of times, so this is a large share of a smoke run.
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


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """``1 - Var(targets - predictions) / Var(targets)``: 1 is perfect, 0 no better than a constant; NaN if
    the targets do not vary."""
    variance = float(targets.var(unbiased=False))
    if variance == 0.0:
        return math.nan
    return 1.0 - float((targets - predictions).var(unbiased=False)) / variance


# ---- the loop --------------------------------------------------------------------------------------------------

HISTORY_KEYS = (
    "update", "environment_steps", "learning_rate", "policy_loss", "value_loss", "entropy", "approx_kl",
    "active_clip_fraction", "ratio_outside_fraction", "grad_norm", "epochs_completed", "explained_variance",
    "training_episode_return", "evaluation_mean", "evaluation_std", "wall_time",
)
UPDATE_DIAGNOSTICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "active_clip_fraction",
                      "ratio_outside_fraction", "grad_norm", "epochs_completed")


def _seeds(seed: int) -> dict[str, int]:
    # Independent streams for independent purposes, so changing one (say, evaluation) never shifts another.
    names = ("environment", "acting", "initialisation", "shuffling", "evaluation")
    children = np.random.SeedSequence(seed).spawn(len(names))
    return {name: int(child.generate_state(1, dtype=np.uint32)[0]) for name, child in zip(names, children)}


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
    ``wall_time`` (seconds), ``time_split`` (seconds spent in ``environment``, ``acting``, ``update``,
    ``evaluation``), ``config`` (the config as a dict), ``actor`` and ``critic``. ``progress``, if given, is called
    with each update's history row, in order, once the row is complete (its evaluation, if any, has run).
    """
    if not isinstance(config, PPOConfig):
        raise ValueError(f"config must be a PPOConfig (see profile_config); got {type(config).__name__}")
    with torch_threads(config.torch_threads):
        return _run(config, gae_masks, bootstrap_values, gae_advantages, ppo_update, progress)


def _run(config: PPOConfig, gae_masks, bootstrap_values, gae_advantages, ppo_update, progress) -> dict[str, Any]:
    started = time.perf_counter()
    seeds = _seeds(config.seed)
    timer = {"environment": 0.0, "acting": 0.0, "update": 0.0, "evaluation": 0.0}
    init_generator = torch.Generator().manual_seed(seeds["initialisation"])
    actor = Actor(OBSERVATION_SIZE, ACTION_COUNT, config.hidden_sizes, init_generator)
    critic = Critic(OBSERVATION_SIZE, config.hidden_sizes, init_generator)
    optimizer = Adam([*actor.parameters(), *critic.parameters()], lr=config.learning_rate, eps=config.adam_epsilon)
    shuffle_generator = torch.Generator().manual_seed(seeds["shuffling"])
    acting_rng = np.random.default_rng(seeds["acting"])
    env = CartPoleBatch(config.num_envs, max_episode_steps=config.max_episode_steps)
    observations, _ = env.reset(seed=seeds["environment"])
    rows: list[dict[str, Any]] = []
    waiting: list[tuple[int, PolicySnapshot]] = []  # (row, policy after that update), not evaluated yet
    delivered = 0  # rows handed to ``progress``: only complete ones, in order
    evaluation = np.full(config.evaluation_episodes, np.nan)
    steps_done = 0

    for update in range(1, config.num_updates + 1):
        learning_rate = config.learning_rate
        if config.anneal_learning_rate:
            learning_rate *= 1.0 - (update - 1) / config.num_updates
        for group in optimizer.param_groups:
            group["lr"] = learning_rate

        rollout = collect_rollout(env, observations, actor.snapshot(), config.rollout_steps, acting_rng, timer)
        observations = rollout.last_observations
        steps_done += config.batch_size

        update_started = time.perf_counter()
        valued = value_rollout(rollout, actor, critic)
        terminated_mask, trace_cuts = gae_masks(torch.from_numpy(rollout.terminated),
                                                torch.from_numpy(rollout.truncated))
        next_values = bootstrap_values(valued["values"], valued["final_values"], valued["last_values"],
                                       torch.from_numpy(rollout.terminated), torch.from_numpy(rollout.truncated))
        advantages = gae_advantages(torch.from_numpy(rollout.rewards).float(), valued["values"], next_values,
                                    terminated_mask, trace_cuts, config.gamma, config.gae_lambda)
        advantages = torch.as_tensor(advantages, dtype=torch.float32).detach()
        returns = advantages + valued["values"]
        batch = RolloutBatch(
            observations=torch.from_numpy(rollout.observations.reshape(-1, OBSERVATION_SIZE)),
            actions=torch.from_numpy(rollout.actions.reshape(-1)),
            old_log_probs=valued["log_probs"].reshape(-1),
            old_values=valued["values"].reshape(-1),
            advantages=advantages.reshape(-1),
            returns=returns.reshape(-1),
        )
        diagnostics = ppo_update(
            actor, critic, optimizer, batch,
            epochs=config.epochs, minibatch_size=config.minibatch_size, clip_epsilon=config.clip_epsilon,
            value_clip_epsilon=config.value_clip_epsilon, value_coefficient=config.value_coefficient,
            entropy_coefficient=config.entropy_coefficient, max_grad_norm=config.max_grad_norm,
            normalize_advantages=config.normalize_advantages, target_kl=config.target_kl,
            generator=shuffle_generator,
        )
        timer["update"] += time.perf_counter() - update_started

        row: dict[str, Any] = {
            "update": update,
            "environment_steps": steps_done,
            "learning_rate": learning_rate,
            **{key: float(diagnostics[key]) for key in UPDATE_DIAGNOSTICS},
            "explained_variance": explained_variance(batch.old_values, batch.returns),
            "training_episode_return": float(np.mean(rollout.episode_returns)) if rollout.episode_returns
            else math.nan,
            "evaluation_mean": math.nan,
            "evaluation_std": math.nan,
        }
        row["wall_time"] = time.perf_counter() - started
        rows.append(row)
        if update % config.evaluation_every == 0 or update == config.num_updates:
            waiting.append((len(rows) - 1, actor.snapshot()))
        if waiting and (len(waiting) == config.evaluations_per_batch or update == config.num_updates):
            evaluation_started = time.perf_counter()
            evaluated = evaluate_policies([policy for _, policy in waiting], config.evaluation_episodes,
                                          seeds["evaluation"], config.max_episode_steps)
            timer["evaluation"] += time.perf_counter() - evaluation_started
            for (index, _), episode_returns in zip(waiting, evaluated):
                rows[index]["evaluation_mean"] = float(episode_returns.mean())
                rows[index]["evaluation_std"] = float(episode_returns.std())
            evaluation = evaluated[-1]
            waiting.clear()
        if progress is not None:
            complete = waiting[0][0] if waiting else len(rows)
            for complete_row in rows[delivered:complete]:
                progress(complete_row)
            delivered = max(delivered, complete)

    history = {key: [row[key] for row in rows] for key in HISTORY_KEYS}
    return {
        "final_evaluation_mean": float(evaluation.mean()),
        "final_evaluation_std": float(evaluation.std()),
        "final_evaluation_returns": evaluation,
        "history": history,
        "environment_steps": steps_done,
        "wall_time": time.perf_counter() - started,
        "time_split": timer,
        "config": dataclasses.asdict(config),
        "actor": actor,
        "critic": critic,
    }


# ---- several runs ----------------------------------------------------------------------------------------------


def evaluation_curve(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(environment_steps, evaluation_mean)`` of one run's evaluated updates only."""
    history = run["history"]
    steps = np.asarray(history["environment_steps"], dtype=np.int64)
    means = np.asarray(history["evaluation_mean"], dtype=np.float64)
    evaluated = np.isfinite(means)
    return steps[evaluated], means[evaluated]


def late_evaluation_minimum(run: dict[str, Any], fraction: float = 0.2) -> float:
    """The lowest evaluation mean among those in the last ``fraction`` of the run's environment steps."""
    steps, means = evaluation_curve(run)
    late = steps >= (1.0 - fraction) * run["environment_steps"]
    return float(means[late].min()) if late.any() else math.nan


def solved_and_held(run: dict[str, Any], threshold: float = SOLVED_RETURN) -> bool:
    """The one definition of "solved" used by the tests, the lab, the benchmarks and the guide: the final greedy
    evaluation reaches ``threshold`` and so does every evaluation in the last fifth of the run's steps."""
    late = late_evaluation_minimum(run)
    return bool(run["final_evaluation_mean"] >= threshold and math.isfinite(late) and late >= threshold)


def first_step_reaching(run: dict[str, Any], threshold: float = SOLVED_RETURN) -> float:
    """Environment steps at the first evaluation whose mean reaches ``threshold`` (NaN if none does)."""
    steps, means = evaluation_curve(run)
    reached = np.flatnonzero(means >= threshold)
    return float(steps[reached[0]]) if reached.size else math.nan


def aggregate_training_runs(runs: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Evaluation curves of several runs on one step axis, with their median and quartiles.

    ``environment_steps``: int64 ``[S]``, every step count at which some run was evaluated, ascending.
    ``all_curves``: float64 ``[R, S]``, run r's evaluation mean at that step, NaN where run r has no evaluation
    there. ``median``, ``q25``, ``q75``: float64 ``[S]`` over the runs evaluated at that step (NaN if none).
    ValueError if ``runs`` is empty or a run has no ``history``.
    """
    if len(runs) == 0:
        raise ValueError("runs must hold at least one training run (the dicts train_ppo returns)")
    curves = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or "history" not in run:
            raise ValueError(f"runs[{i}] must be a dict returned by train_ppo, with a 'history'")
        curves.append(evaluation_curve(run))
    steps = np.unique(np.concatenate([s for s, _ in curves])).astype(np.int64)
    all_curves = np.full((len(runs), steps.size), np.nan)
    for r, (run_steps, means) in enumerate(curves):
        all_curves[r, np.searchsorted(steps, run_steps)] = means
    quartiles = np.full((3, steps.size), np.nan)
    for s in range(steps.size):
        column = all_curves[:, s]
        column = column[np.isfinite(column)]
        if column.size:  # never an all-NaN slice: no RuntimeWarning for the lab to print
            quartiles[:, s] = np.quantile(column, [0.25, 0.5, 0.75])
    return {
        "environment_steps": steps,
        "median": quartiles[1],
        "q25": quartiles[0],
        "q75": quartiles[2],
        "all_curves": all_curves,
    }
