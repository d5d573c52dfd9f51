from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def active_clip_fraction(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    with torch.no_grad():
        ratio = torch.exp(new - old)
        moved = ratio - torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon)
        fraction = (adv * moved > 0).to(new.dtype).mean()
    return like_inputs(fraction, new_log_probs, old_log_probs, advantages)
