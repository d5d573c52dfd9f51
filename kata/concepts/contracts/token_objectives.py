"""Input checks for the `token_objectives` concept."""

from __future__ import annotations

from functools import reduce
from typing import NamedTuple

import torch

from kata.concepts.arrays import ArrayLike, as_float_tensor, check_binary_mask, check_choice, check_ndim, check_positive

REDUCTIONS: tuple[str, ...] = ("token_mean", "sequence_mean", "sequence_sum_mean")


class TokenLogProbs(NamedTuple):
    """Checked log-probabilities ``[B, L]`` of one floating dtype, and the mask as a bool tensor ``[B, L]``."""

    new_log_probs: torch.Tensor
    old_log_probs: torch.Tensor
    mask: torch.Tensor


def token_log_prob_pair(new_log_probs: ArrayLike, old_log_probs: ArrayLike, mask: ArrayLike) -> TokenLogProbs:
    """Check ``new_log_probs``, ``old_log_probs`` and ``mask``: all ``[B, L]``, ``B, L >= 1``, no broadcasting."""
    new = as_float_tensor(new_log_probs, "new_log_probs")
    old = as_float_tensor(old_log_probs, "old_log_probs", like=new)
    check_ndim("new_log_probs", new, (2,))
    if new.shape[0] < 1 or new.shape[1] < 1:
        raise ValueError(f"new_log_probs must be [B, L] with B >= 1 and L >= 1; got shape {tuple(new.shape)}")
    bool_mask = check_binary_mask("mask", mask).to(new.device)
    for name, value in (("old_log_probs", old), ("mask", bool_mask)):
        if tuple(value.shape) != tuple(new.shape):
            raise ValueError(
                f"{name} must have the same shape as new_log_probs {tuple(new.shape)} (columns aligned with the "
                f"labels input_ids[:, 1:]); got {tuple(value.shape)}"
            )
    dtype = torch.promote_types(new.dtype, old.dtype)
    return TokenLogProbs(new.to(dtype), old.to(dtype).to(new.device), bool_mask)


class TokenPPOInputs(NamedTuple):
    """Checked inputs of the masked token terms: ``advantages`` ``[B]`` in the log-probs' dtype."""

    new_log_probs: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    clip_epsilon: float


def token_ppo_inputs(
    new_log_probs: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    clip_epsilon: float,
) -> TokenPPOInputs:
    """Check every argument of ``masked_token_ppo_terms``; inputs are never changed."""
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    adv = as_float_tensor(advantages, "advantages", like=new)
    check_ndim("advantages", adv, (1,))
    if adv.shape[0] != new.shape[0]:
        raise ValueError(
            f"advantages must hold one value per response, shape ({new.shape[0]},) for new_log_probs "
            f"{tuple(new.shape)}; got {tuple(adv.shape)}"
        )
    dtype = reduce(torch.promote_types, (new.dtype, adv.dtype))
    return TokenPPOInputs(
        new.to(dtype),
        old.to(dtype),
        adv.to(dtype).to(new.device),
        bool_mask,
        check_positive("clip_epsilon", clip_epsilon),
    )


def check_reduction(reduction: str) -> str:
    """``reduction`` is one of :data:`REDUCTIONS`; the ValueError lists them."""
    return check_choice("reduction", reduction, REDUCTIONS)
