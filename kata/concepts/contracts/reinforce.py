"""Input checks for the `reinforce` concept."""

from __future__ import annotations

from typing import NamedTuple

import torch

from kata.concepts.arrays import (
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_ndim,
    check_probability,
    check_same_shape,
)


def _non_empty(name: str, tensor: torch.Tensor) -> None:
    if tensor.numel() == 0:
        raise ValueError(f"{name} must hold at least one value; got shape {tuple(tensor.shape)}")


class ReinforceLossInputs(NamedTuple):
    log_probs: torch.Tensor
    advantages: torch.Tensor


def surrogate_inputs(log_probs: ArrayLike, advantages: ArrayLike) -> ReinforceLossInputs:
    """``log_probs`` and ``advantages`` as floating tensors of one shape and one dtype (autograd kept)."""
    log_probs_t = as_float_tensor(log_probs, "log_probs")
    advantages_t = as_float_tensor(advantages, "advantages", like=log_probs_t)
    _non_empty("log_probs", log_probs_t)
    check_same_shape("log_probs", log_probs_t, advantages=advantages_t)
    dtype = torch.promote_types(log_probs_t.dtype, advantages_t.dtype)
    return ReinforceLossInputs(log_probs_t.to(dtype), advantages_t.to(dtype))


class RewardToGoInputs(NamedTuple):
    rewards: torch.Tensor
    episode_ends: torch.Tensor
    gamma: float


def reward_to_go_inputs(rewards: ArrayLike, episode_ends: ArrayLike, gamma: float) -> RewardToGoInputs:
    """``rewards`` as a floating ``[T]`` or ``[T, N]`` tensor, ``episode_ends`` as a bool tensor of that shape, and
    ``gamma`` in [0, 1]."""
    rewards_t = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", rewards_t, (1, 2))
    ends = check_binary_mask("episode_ends", episode_ends)
    check_same_shape("rewards", rewards_t, episode_ends=ends)
    return RewardToGoInputs(rewards_t, ends, check_probability("gamma", gamma))


def entropy_inputs(logits: ArrayLike) -> torch.Tensor:
    """``logits`` as a floating tensor ``[..., K]`` with ``K >= 1``: no NaN, no +inf, and at least one finite logit
    per distribution (-inf marks an action that cannot be taken)."""
    logits_t = as_float_tensor(logits, "logits")
    if logits_t.ndim < 1 or logits_t.shape[-1] < 1:
        raise ValueError(f"logits must have a last axis of K >= 1 actions; got shape {tuple(logits_t.shape)}")
    plain = logits_t.detach()
    # One reduction on the common path (every logit finite): the training loops call this every minibatch.
    if not bool(torch.isfinite(plain).all()):
        if torch.isnan(plain).any() or (plain == float("inf")).any():
            raise ValueError(
                "logits must not hold NaN or +inf (use -inf, or a large negative number, to mask an action)"
            )
        if not torch.isfinite(plain).any(dim=-1).all():
            raise ValueError("logits must have at least one finite logit per distribution; got a row of -inf only")
    return logits_t
