from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    dtype = new.dtype
    zero = torch.zeros((), dtype=torch.float64)
    log_ratio = torch.where(bool_mask, new.to(torch.float64) - old.detach().to(torch.float64), zero)
    ratio = torch.exp(log_ratio)
    token_advantages = torch.where(bool_mask, adv.detach().to(torch.float64)[:, None].expand_as(ratio), zero)
    unclipped = ratio * token_advantages
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * token_advantages
    terms = (ratio, unclipped, clipped, torch.minimum(unclipped, clipped))
    return like_inputs(tuple(term.to(dtype) for term in terms), new_log_probs, old_log_probs, advantages, mask)
