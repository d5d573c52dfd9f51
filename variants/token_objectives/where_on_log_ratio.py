from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    zero = new.new_zeros(())
    log_ratio = torch.where(bool_mask, new - old.detach(), zero)
    ratio = log_ratio.exp()
    token_advantages = torch.where(bool_mask, adv.detach()[:, None].expand_as(ratio), zero)
    unclipped = ratio * token_advantages
    clipped = ratio.clamp(1 - epsilon, 1 + epsilon) * token_advantages
    pessimistic = torch.minimum(unclipped, clipped)
    return like_inputs((ratio, unclipped, clipped, pessimistic), new_log_probs, old_log_probs, advantages, mask)
