from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def active_clip_fraction(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    with torch.no_grad():
        ratio = torch.exp(new - old)
        binds = ((adv > 0) & (ratio > 1.0 + epsilon)) | ((adv < 0) & (ratio < 1.0 - epsilon))
        fraction = binds.float().mean()  # CleanRL's `.float().mean()`: float32 whatever the inputs
    return like_inputs(fraction, new_log_probs, old_log_probs, advantages)
