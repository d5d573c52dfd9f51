"""The frame of the RLOO loop: profiles, the records it keeps, the evaluation schedule and the loop itself.

The loop is the same for every implementation; what changes is the two functions it is handed, the package's own
``sample_responses`` and ``rloo_iteration``. Each iteration:

1. every prompt ``group_size`` times, prompt-major (:func:`kata.rl.sequence_task.prompt_batch`);
2. ``sample_responses`` completes each row with a response ended by EOS and padded;
3. the verifier scores every row (:func:`kata.rl.sequence_task.sequence_rewards`);
4. ``rloo_iteration`` turns rewards into RLOO advantages per prompt group, freezes the old token log-probs and runs
   the PPO epochs.

Evaluation samples from its own generator, so how often the run evaluates never changes what it learns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kata import PROFILES
from kata.arrays import REDUCTIONS, check_choice, check_integer, check_positive, to_numpy
from kata.rl import Adam, torch_threads
from kata.rl.sequence_task import (
    MAX_NEW_TOKENS,
    PROMPT_LENGTH,
    evaluate_policy,
    make_policy,
    prompt_batch,
    sequence_rewards,
)

_PROFILES: dict[str, dict[str, Any]] = {
    # smoke: reaches exact-response success 1.0 (how often and how fast: benchmarks/rloo_loop.py, docs/benchmarks.md).
    "smoke": dict(
        iterations=60,
        group_size=16,
        ppo_epochs=4,
        learning_rate=0.01,
        clip_epsilon=0.2,
        reduction="token_mean",
        hidden_size=64,
        evaluation_every=2,
        evaluation_samples=32,
    ),
}
# full: more iterations, and success measured on more samples; everything else as in smoke.
_PROFILES["full"] = dict(_PROFILES["smoke"], iterations=200, evaluation_every=5, evaluation_samples=128)


def sequence_profile_config(mode: str) -> dict[str, Any]:
    """Keyword arguments of ``train_tiny_sequence_policy`` for ``mode`` (``"smoke"`` or ``"full"``); a new dict."""
    check_choice("mode", mode, PROFILES)
    return dict(_PROFILES[mode])


@dataclass(frozen=True)
class IterationResult:
    """What one ``rloo_iteration`` reports.

    Attributes:
        advantages: float64 NumPy ``[B]``: the RLOO advantage of each row (sums to 0 within each prompt group).
        response_mask: 0/1 ``[B, T - 1]`` aligned with the labels ``input_ids[:, 1:]``, EOS included.
        old_log_probs: ``[B, T - 1]``: the sampling policy's token log-probs, frozen before the first epoch.
        epoch_losses: the loss of each PPO epoch, before that epoch's step.
    """

    advantages: np.ndarray
    response_mask: torch.Tensor
    old_log_probs: torch.Tensor
    epoch_losses: tuple[float, ...]


@dataclass(frozen=True)
class SequenceBatch:
    """One iteration's rollout as the lab prints it (``first_batch``).

    Attributes:
        prompt_classes: int64 NumPy ``[B]``, prompt-major groups.
        input_ids: int64 tensor ``[B, T]``: prompt, response, EOS, padding.
        prompt_lengths: int64 tensor ``[B]``.
        rewards: float64 NumPy ``[B]``: the verifier's rewards.
        advantages: float64 NumPy ``[B]``: RLOO advantages, summing to 0 within each prompt group.
        response_mask: tensor ``[B, T - 1]`` aligned with ``input_ids[:, 1:]``.
    """

    prompt_classes: np.ndarray
    input_ids: torch.Tensor
    prompt_lengths: torch.Tensor
    rewards: np.ndarray
    advantages: np.ndarray
    response_mask: torch.Tensor


def run_rloo(
    seed: int,
    *,
    sample_responses: Callable[..., Any],
    rloo_iteration: Callable[..., IterationResult],
    iterations: int,
    group_size: int,
    ppo_epochs: int,
    learning_rate: float,
    clip_epsilon: float,
    reduction: str = "token_mean",
    hidden_size: int = 64,
    evaluation_every: int = 5,
    evaluation_samples: int = 32,
    evaluation_deterministic: bool = False,
) -> dict[str, Any]:
    """Train a fresh :class:`~kata.rl.sequence_task.SequencePolicy` with RLOO and token-level PPO.

    Evaluation (``evaluation_samples`` sampled responses per prompt, or greedy ones with
    ``evaluation_deterministic``) runs before the first iteration, every ``evaluation_every`` iterations and after
    the last one.

    Returns:
        ``model``; ``first_batch`` (:class:`SequenceBatch` of iteration 0); ``history``, a dict of lists, one entry
        per evaluation: ``iteration`` (updates done), ``evaluation_mean_reward``, ``success_rate``,
        ``train_mean_reward`` (the latest rollout's mean reward; NaN before any), ``min_exact_probability`` (the
        least probability, over the prompts, of sampling the exact response), ``elapsed_seconds`` (wall time
        since the start; the only entry a seed does not fix); ``final_evaluation`` (the last evaluation's dict, see
        :func:`kata.rl.sequence_task.evaluate_policy`); ``config`` (the arguments).
    """
    config = dict(
        iterations=check_integer("iterations", iterations, 0),
        group_size=check_integer("group_size", group_size, 2),
        ppo_epochs=check_integer("ppo_epochs", ppo_epochs, 1),
        learning_rate=check_positive("learning_rate", learning_rate),
        clip_epsilon=check_positive("clip_epsilon", clip_epsilon),
        reduction=check_choice("reduction", reduction, REDUCTIONS),
        hidden_size=check_integer("hidden_size", hidden_size, 1),
        evaluation_every=check_integer("evaluation_every", evaluation_every, 1),
        evaluation_samples=check_integer("evaluation_samples", evaluation_samples, 1),
        evaluation_deterministic=bool(evaluation_deterministic),
    )
    seed = check_integer("seed", seed, 0)
    started = time.perf_counter()
    with torch_threads(1):
        model = make_policy(seed, hidden_size=config["hidden_size"])
        optimizer = Adam(model.parameters(), lr=config["learning_rate"])
        generator = torch.Generator().manual_seed(seed)
        classes, prompts = prompt_batch(config["group_size"])
        prompt_lengths = torch.full((classes.shape[0],), PROMPT_LENGTH, dtype=torch.int64)

        history: dict[str, list[float]] = {
            "iteration": [],
            "evaluation_mean_reward": [],
            "success_rate": [],
            "train_mean_reward": [],
            "min_exact_probability": [],
            "elapsed_seconds": [],
        }
        first_batch: SequenceBatch | None = None
        train_mean_reward = float("nan")

        def evaluate(iteration: int) -> dict[str, Any]:
            result = evaluate_policy(
                model,
                sample_responses,
                samples_per_prompt=config["evaluation_samples"],
                deterministic=config["evaluation_deterministic"],
                seed=seed * 1_000_003 + iteration,  # its own stream: evaluating never changes training
            )
            history["iteration"].append(iteration)
            history["evaluation_mean_reward"].append(result["mean_reward"])
            history["success_rate"].append(result["success_rate"])
            history["train_mean_reward"].append(train_mean_reward)
            history["min_exact_probability"].append(float(result["exact_response_probability"].min()))
            history["elapsed_seconds"].append(time.perf_counter() - started)
            return result

        final_evaluation = evaluate(0)
        for iteration in range(1, config["iterations"] + 1):
            with torch.no_grad():
                input_ids = torch.as_tensor(
                    sample_responses(model, prompts, MAX_NEW_TOKENS, deterministic=False, generator=generator)
                )
            rewards = sequence_rewards(classes, input_ids)
            result = rloo_iteration(
                model,
                optimizer,
                input_ids,
                prompt_lengths,
                rewards,
                group_size=config["group_size"],
                ppo_epochs=config["ppo_epochs"],
                clip_epsilon=config["clip_epsilon"],
                reduction=config["reduction"],
            )
            train_mean_reward = float(rewards.mean())
            if first_batch is None:
                first_batch = SequenceBatch(
                    prompt_classes=classes.copy(),
                    input_ids=input_ids,
                    prompt_lengths=prompt_lengths,
                    rewards=rewards,
                    advantages=np.asarray(to_numpy(result.advantages), dtype=np.float64),
                    response_mask=torch.as_tensor(result.response_mask),
                )
            if iteration % config["evaluation_every"] == 0 or iteration == config["iterations"]:
                final_evaluation = evaluate(iteration)
    return {
        "model": model,
        "first_batch": first_batch,
        "history": history,
        "final_evaluation": final_evaluation,
        "config": config,
    }
