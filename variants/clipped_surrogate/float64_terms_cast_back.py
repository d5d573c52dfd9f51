from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def clipped_surrogate_terms(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    dtype = new.dtype
    wide = torch.float64
    ratio = torch.exp(new.to(wide) - old.detach().to(wide))
    adv_wide = adv.detach().to(wide)
    unclipped = ratio * adv_wide
    clipped = ratio.clamp(1.0 - epsilon, 1.0 + epsilon) * adv_wide
    pessimistic = torch.where(unclipped <= clipped, unclipped, clipped)
    terms = tuple(t.to(dtype) for t in (ratio, unclipped, clipped, pessimistic))
    return like_inputs(terms, new_log_probs, old_log_probs, advantages)
