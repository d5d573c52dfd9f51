"""Exercise 7 — Token-level PPO: masked terms, reductions and exact sequence ratios (GUIDE.md §7).

Every array here is ``[B, L]`` with columns aligned with the labels ``input_ids[:, 1:]`` and a 0/1 ``mask`` from
``response_token_mask``. Positions outside the mask (prompt, padding, after EOS) may hold any value, even extreme
ones (``±inf``, NaN, ``1e4``): they never reach an output or a gradient. At response positions a log-prob may be
any finite value ``<= 0``, even one whose ``exp`` underflows to 0 (below about -745 in float64, -104 in float32).

Every function returns NumPy when every array argument is NumPy, and a tensor if any of them is a tensor. Old
log-probs, advantages and the mask are data: gradient reaches ``new_log_probs`` only, even when another argument
requires grad.
"""

from __future__ import annotations

import torch

from kata.arrays import (
    REDUCTIONS,
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_choice,
    check_ndim,
    check_positive,
    like_inputs,
)
from kata.concepts.stub import not_implemented

from .clipped_surrogate import clipped_surrogate_terms


def masked_token_ppo_terms(
    new_log_probs: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    clip_epsilon: float,
) -> tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike]:
    """PPO's per-token ratio and surrogate terms for a batch of responses, with masked positions neutralised.

    Args:
        new_log_probs: floating ``[B, L]``, log-probs of the labels under the policy being optimised (gradients
            kept).
        old_log_probs: floating ``[B, L]``, the same under the policy that sampled the responses (data: no
            gradient reaches it).
        advantages: floating ``[B]``: one advantage per response, shared by all its tokens (data).
        mask: ``[B, L]`` of 0/1 (integer or floating) or bool: 1 for the response tokens the loss scores (data).
        clip_epsilon: the clip range ``eps > 0``.

    Returns:
        ``(ratio, unclipped, clipped, pessimistic)``, each ``[B, L]`` in the promoted floating dtype of
        ``new_log_probs``, ``old_log_probs`` and ``advantages`` (the mask's dtype plays no part; integer inputs
        count as ``new_log_probs``' floating dtype): at a response token, exactly ``clipped_surrogate_terms`` of
        that token with its response's advantage (the ratio is ``exp(new - old)``, finite however far below 0 both
        log-probs are); at a masked position, ``ratio == 1`` and the three terms ``== 0`` exactly, whatever
        ``new_log_probs`` and ``old_log_probs`` hold there, and no gradient reaches those positions. NumPy when
        every array is NumPy, a tensor if any is.

    Raises:
        ValueError: arrays that are not numbers, log-probs that are not ``[B, L]`` with ``B, L >= 1``, shapes that
            do not match (no broadcasting), a mask that is not 0/1, ``clip_epsilon <= 0``.
    """
    new, old, adv, bool_mask = _surrogate_inputs(new_log_probs, old_log_probs, advantages, mask)
    epsilon = check_positive("clip_epsilon", clip_epsilon)
    # new, old: floating tensors [B, L] of one dtype (new keeps its gradient); adv: [B]; bool_mask: bool [B, L];
    # epsilon: float. Neutralise the masked positions BEFORE anything is exponentiated, then hand the rest to
    # clipped_surrogate_terms. Return like_inputs(tuple_of_four, new_log_probs, old_log_probs, advantages, mask).
    raise not_implemented("masked_token_ppo_terms")


def masked_token_ppo_objective(
    new_log_probs: ArrayLike,
    old_log_probs: ArrayLike,
    advantages: ArrayLike,
    mask: ArrayLike,
    clip_epsilon: float,
    reduction: str,
) -> ArrayLike:
    """The clipped PPO objective of a batch of responses, reduced to a scalar: an OBJECTIVE to maximise.

    The loss to minimise is its negative. With ``p`` the ``pessimistic`` term of :func:`masked_token_ppo_terms`,
    ``m`` the mask and ``n_i = sum_j m_ij`` the response length of row ``i``:

    - ``token_mean``: ``sum_ij m_ij p_ij / sum_ij m_ij``, every response token of the batch weighs the same (a long
      response weighs more than a short one);
    - ``sequence_mean``: ``(1/B) sum_i (sum_j m_ij p_ij / n_i)``, every response weighs the same (each token of a
      long response weighs less);
    - ``sequence_sum_mean``: ``(1/B) sum_i sum_j m_ij p_ij``, each token weighs ``1/B`` whatever its response's
      length.

    When every row has ``n`` response tokens, ``token_mean == sequence_mean == sequence_sum_mean / n``.

    An empty response (``n_i == 0``) has no token whose probability the policy could change: it contributes 0 to
    every reduction and no gradient. It still counts in ``B`` for ``sequence_mean`` and ``sequence_sum_mean``, so a
    row's weight ``1/B`` never depends on the other rows (the usual ``sum / max(n_i, 1)`` then ``mean``). A batch
    with no response token at all gives 0 for ``token_mean`` too. Nothing divides 0 by 0; the result is never NaN
    for finite values at response positions.

    Args:
        new_log_probs, old_log_probs, advantages, mask, clip_epsilon: as in :func:`masked_token_ppo_terms`.
        reduction: one of ``"token_mean"``, ``"sequence_mean"``, ``"sequence_sum_mean"``.

    Returns:
        A 0-d value in the promoted floating dtype of ``new_log_probs``, ``old_log_probs`` and ``advantages``: a
        tensor (with gradient into ``new_log_probs`` only, an all-empty batch included) if any array argument is
        a tensor, else a NumPy scalar array.

    Raises:
        ValueError: as :func:`masked_token_ppo_terms`, and an unknown ``reduction`` (the message lists the valid
            ones).
    """
    check_choice("reduction", reduction, REDUCTIONS)
    new, old, adv, bool_mask = _surrogate_inputs(new_log_probs, old_log_probs, advantages, mask)
    epsilon = check_positive("clip_epsilon", clip_epsilon)
    # Call masked_token_ppo_terms on these tensors, then reduce its pessimistic term as the docstring says.
    # Return like_inputs(value, new_log_probs, old_log_probs, advantages, mask).
    raise not_implemented("masked_token_ppo_objective")


def sequence_log_probability_ratio(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, mask: ArrayLike
) -> ArrayLike:
    """The exact log-ratio of each whole response: ``sum_j m_ij (new_ij - old_ij)``, shape ``[B]``.

    A response's probability is the product of its tokens' probabilities, so its log-ratio is the sum of the token
    log-ratios over the response (masked positions, whatever they hold, add nothing). An empty response gives 0.
    The result is in the promoted floating dtype of ``new_log_probs`` and ``old_log_probs``; gradients flow into
    ``new_log_probs`` only (``old_log_probs`` and ``mask`` are data). NumPy when every array is NumPy, a tensor if
    any is.

    Raises:
        ValueError: arrays that are not numbers, log-probs that are not ``[B, L]`` with ``B, L >= 1``, shapes that
            do not match, a mask that is not 0/1.
    """
    new, old, bool_mask = _log_prob_pair(new_log_probs, old_log_probs, mask)
    # new, old: floating tensors [B, L] of one dtype; bool_mask: bool [B, L].
    # Return like_inputs(result, new_log_probs, old_log_probs, mask).
    raise not_implemented("sequence_log_probability_ratio")


def sequence_probability_ratio(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, mask: ArrayLike
) -> ArrayLike:
    """The exact probability ratio of each whole response, ``pi_new(y|x) / pi_old(y|x)``, shape ``[B]``.

    The product of the token ratios, computed as ``exp`` of :func:`sequence_log_probability_ratio`: summing in log
    space and exponentiating once never overflows or underflows on the way (a product of 1,000 token ratios
    could). A log-ratio beyond the float range still gives ``inf`` or ``0`` (never NaN, never a warning): prefer
    the log-ratio for anything numeric. An empty response gives 1. Dtype, gradients and containers as
    :func:`sequence_log_probability_ratio`.

    Raises:
        ValueError: arrays that are not numbers, log-probs that are not ``[B, L]`` with ``B, L >= 1``, shapes that
            do not match, a mask that is not 0/1.
    """
    _log_prob_pair(new_log_probs, old_log_probs, mask)
    # Build on sequence_log_probability_ratio. Return like_inputs(result, new_log_probs, old_log_probs, mask).
    raise not_implemented("sequence_probability_ratio")


def _log_prob_pair(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, mask: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probs ``[B, L]`` (``B, L >= 1``) of one floating dtype and the mask as bool ``[B, L]``; no broadcasting."""
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
    return new.to(dtype), old.to(dtype).to(new.device), bool_mask


def _surrogate_inputs(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, mask: ArrayLike
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`_log_prob_pair`'s tensors and ``advantages`` ``[B]``, the three floating ones in one dtype."""
    new, old, bool_mask = _log_prob_pair(new_log_probs, old_log_probs, mask)
    adv = as_float_tensor(advantages, "advantages", like=new)
    check_ndim("advantages", adv, (1,))
    if adv.shape[0] != new.shape[0]:
        raise ValueError(
            f"advantages must hold one value per response, shape ({new.shape[0]},) for new_log_probs "
            f"{tuple(new.shape)}; got {tuple(adv.shape)}"
        )
    dtype = torch.promote_types(new.dtype, adv.dtype)
    return new.to(dtype), old.to(dtype), adv.to(dtype).to(new.device), bool_mask
