"""Input checks for the `rloo_loop` concept."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from kata.arrays import (
    ArrayLike,
    as_float_tensor,
    as_tensor,
    check_choice,
    check_integer,
    check_ndim,
    check_positive,
)
from kata.contracts.token_objectives import REDUCTIONS


def _token_ids(value: ArrayLike, name: str) -> torch.Tensor:
    tensor = as_tensor(value, name)
    if tensor.dtype == torch.bool or torch.is_floating_point(tensor) or torch.is_complex(tensor):
        raise ValueError(f"{name} must hold integer token ids; got dtype {tensor.dtype}")
    return tensor.to(torch.int64)


class SamplingInputs(NamedTuple):
    """Checked arguments of ``sample_responses``: int64 ``prompt_ids [B, P]`` (a copy is never needed)."""

    prompt_ids: torch.Tensor
    max_new_tokens: int
    eos_token_id: int
    pad_token_id: int
    deterministic: bool
    generator: torch.Generator | None


def sampling_inputs(
    model: Any,
    prompt_ids: ArrayLike,
    max_new_tokens: int,
    eos_token_id: int,
    pad_token_id: int,
    deterministic: bool,
    generator: torch.Generator | None,
) -> SamplingInputs:
    """Check every argument of ``sample_responses``; inputs are never changed."""
    if not callable(model):
        raise ValueError(f"model must be callable (input_ids [B, t] -> logits [B, t, V]); got {type(model).__name__}")
    prompts = _token_ids(prompt_ids, "prompt_ids")
    check_ndim("prompt_ids", prompts, (2,))
    if prompts.shape[0] < 1 or prompts.shape[1] < 1:
        raise ValueError(f"prompt_ids must be [B, P] with B >= 1 and P >= 1; got shape {tuple(prompts.shape)}")
    if not isinstance(deterministic, bool):
        raise ValueError(f"deterministic must be True or False; got {deterministic!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None; got {type(generator).__name__}")
    return SamplingInputs(
        prompts,
        check_integer("max_new_tokens", max_new_tokens, 1),
        check_integer("eos_token_id", eos_token_id, 0),
        check_integer("pad_token_id", pad_token_id, 0),
        deterministic,
        generator,
    )


def grouped_rewards(rewards: ArrayLike, group_size: int) -> tuple[torch.Tensor, int]:
    """``rewards`` as a floating ``[B]`` tensor with ``B`` a multiple of ``group_size >= 2``, and ``group_size``."""
    group_size = check_integer("group_size", group_size, 2)
    tensor = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", tensor, (1,))
    if tensor.shape[0] < 1 or tensor.shape[0] % group_size:
        raise ValueError(
            f"rewards must be [B] with B a positive multiple of group_size = {group_size} (prompt-major groups); "
            f"got shape {tuple(tensor.shape)}"
        )
    return tensor, group_size


def check_loss_arguments(
    logits: ArrayLike,
    input_ids: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    clip_epsilon: float,
    reduction: str,
) -> None:
    """Shapes of ``sequence_policy_loss``'s arguments: logits ``[B, T, V]``, the rest aligned with them."""
    scores = as_tensor(logits, "logits")
    if not torch.is_floating_point(scores):
        raise ValueError(f"logits must be floating point; got dtype {scores.dtype}")
    check_ndim("logits", scores, (3,))
    ids = _token_ids(input_ids, "input_ids")
    if tuple(ids.shape) != tuple(scores.shape[:2]):
        raise ValueError(f"input_ids must be [B, T] matching logits {tuple(scores.shape)}; got {tuple(ids.shape)}")
    old = as_float_tensor(old_log_probs, "old_log_probs")
    expected = (scores.shape[0], scores.shape[1] - 1)
    if tuple(old.shape) != expected:
        raise ValueError(
            f"old_log_probs must be [B, T - 1] = {expected}, aligned with the labels input_ids[:, 1:]; "
            f"got {tuple(old.shape)}"
        )
    adv = as_float_tensor(advantages, "advantages")
    if tuple(adv.shape) != (scores.shape[0],):
        raise ValueError(f"advantages must be [B] = ({scores.shape[0]},), one per row; got {tuple(adv.shape)}")
    check_positive("clip_epsilon", clip_epsilon)
    check_choice("reduction", reduction, REDUCTIONS)


def check_iteration_arguments(
    model: Any,
    optimizer: Any,
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    rewards: ArrayLike,
    group_size: int,
    ppo_epochs: int,
) -> None:
    """The arguments of ``rloo_iteration`` that no concept function checks for it."""
    if not callable(model):
        raise ValueError(f"model must be callable (input_ids -> logits); got {type(model).__name__}")
    if not (callable(getattr(optimizer, "zero_grad", None)) and callable(getattr(optimizer, "step", None))):
        raise ValueError(
            f"optimizer must have zero_grad() and step(), like a torch.optim.Optimizer; got {type(optimizer).__name__}"
        )
    ids = _token_ids(input_ids, "input_ids")
    check_ndim("input_ids", ids, (2,))
    lengths = _token_ids(prompt_lengths, "prompt_lengths")
    if tuple(lengths.shape) != (ids.shape[0],):
        raise ValueError(f"prompt_lengths must be [B] = ({ids.shape[0]},); got {tuple(lengths.shape)}")
    reward_tensor, _ = grouped_rewards(rewards, group_size)
    if reward_tensor.shape[0] != ids.shape[0]:
        raise ValueError(
            f"rewards must hold one reward per row of input_ids ({ids.shape[0]}); got {reward_tensor.shape[0]}"
        )
    check_integer("ppo_epochs", ppo_epochs, 1)
