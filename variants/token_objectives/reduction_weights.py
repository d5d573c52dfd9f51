from __future__ import annotations

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import check_reduction, token_ppo_inputs
from solutions.token_objectives import masked_token_ppo_terms


def masked_token_ppo_objective(new_log_probs, old_log_probs, advantages, mask, clip_epsilon, reduction):
    check_reduction(reduction)
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    *_, pessimistic = masked_token_ppo_terms(new, old, adv, bool_mask, epsilon)
    m = bool_mask.to(pessimistic.dtype)
    rows = m.shape[0]
    if reduction == "token_mean":
        weights = m / m.sum().clamp(min=1.0)
    elif reduction == "sequence_mean":
        weights = m / (m.sum(dim=1, keepdim=True).clamp(min=1.0) * rows)
    else:
        weights = m / rows
    return like_inputs((weights * pessimistic).sum(), new_log_probs, old_log_probs, advantages, mask)
