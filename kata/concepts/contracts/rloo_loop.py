"""Input checks for the `rloo_loop` concept."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from kata.concepts.arrays import (
    REDUCTIONS,
    ArrayLike,
    as_float_tensor,
    as_tensor,
    as_token_ids,
    check_choice,
    check_integer,
    check_ndim,
    check_positive,
)


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
    prompts = as_token_ids(prompt_ids, "prompt_ids")
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


class GroupedRewards(NamedTuple):
    rewards: torch.Tensor
    group_size: int


def grouped_rewards(rewards: ArrayLike, group_size: int) -> GroupedRewards:
    """``rewards`` as a floating ``[B]`` tensor with ``B`` a multiple of ``group_size >= 2``, and ``group_size``."""
    group_size = check_integer("group_size", group_size, 2)
    tensor = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", tensor, (1,))
    if tensor.shape[0] < 1 or tensor.shape[0] % group_size:
        raise ValueError(
            f"rewards must be [B] with B a positive multiple of group_size = {group_size} (prompt-major groups); "
            f"got shape {tuple(tensor.shape)}"
        )
    return GroupedRewards(tensor, group_size)


class LossInputs(NamedTuple):
    """Checked arguments of ``sequence_policy_loss``: floating ``logits [B, T, V]``, int64 ``input_ids [B, T]``,
    floating ``old_log_probs [B, T - 1]`` and ``advantages [B]``."""

    logits: torch.Tensor
    input_ids: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    clip_epsilon: float
    reduction: str


def check_loss_arguments(
    logits: ArrayLike,
    input_ids: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    clip_epsilon: float,
    reduction: str,
) -> LossInputs:
    """Shapes of ``sequence_policy_loss``'s arguments: logits ``[B, T, V]``, the rest aligned with them."""
    scores = as_tensor(logits, "logits")
    if not torch.is_floating_point(scores):
        raise ValueError(f"logits must be floating point; got dtype {scores.dtype}")
    check_ndim("logits", scores, (3,))
    ids = as_token_ids(input_ids, "input_ids")
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
    return LossInputs(scores, ids, old, adv, check_positive("clip_epsilon", clip_epsilon),
                      check_choice("reduction", reduction, REDUCTIONS))


class IterationInputs(NamedTuple):
    """Checked arguments of ``rloo_iteration``: int64 ``input_ids [B, T]`` and ``prompt_lengths [B]``, floating
    ``rewards [B]`` in groups of ``group_size``."""

    model: Any
    optimizer: Any
    input_ids: torch.Tensor
    prompt_lengths: torch.Tensor
    rewards: torch.Tensor
    group_size: int
    ppo_epochs: int


def check_iteration_arguments(
    model: Any,
    optimizer: Any,
    input_ids: ArrayLike,
    prompt_lengths: ArrayLike,
    rewards: ArrayLike,
    group_size: int,
    ppo_epochs: int,
) -> IterationInputs:
    """The arguments of ``rloo_iteration`` that no concept function checks for it."""
    if not callable(model):
        raise ValueError(f"model must be callable (input_ids -> logits); got {type(model).__name__}")
    if not (callable(getattr(optimizer, "zero_grad", None)) and callable(getattr(optimizer, "step", None))):
        raise ValueError(
            f"optimizer must have zero_grad() and step(), like a torch.optim.Optimizer; got {type(optimizer).__name__}"
        )
    ids = as_token_ids(input_ids, "input_ids")
    check_ndim("input_ids", ids, (2,))
    lengths = as_token_ids(prompt_lengths, "prompt_lengths")
    if tuple(lengths.shape) != (ids.shape[0],):
        raise ValueError(f"prompt_lengths must be [B] = ({ids.shape[0]},); got {tuple(lengths.shape)}")
    reward_tensor, group_size = grouped_rewards(rewards, group_size)
    if reward_tensor.shape[0] != ids.shape[0]:
        raise ValueError(
            f"rewards must hold one reward per row of input_ids ({ids.shape[0]}); got {reward_tensor.shape[0]}"
        )
    return IterationInputs(model, optimizer, ids, lengths, reward_tensor, group_size,
                           check_integer("ppo_epochs", ppo_epochs, 1))
