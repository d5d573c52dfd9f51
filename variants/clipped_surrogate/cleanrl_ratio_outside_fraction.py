from __future__ import annotations

import torch

from kata.concepts.arrays import check_positive, like_inputs
from kata.concepts.contracts.clipped_surrogate import ratio_inputs


def ratio_outside_fraction(new_log_probs, old_log_probs, clip_epsilon):
    new, old = ratio_inputs(new_log_probs, old_log_probs)
    epsilon = check_positive("clip_epsilon", clip_epsilon)
    with torch.no_grad():
        logratio = new - old
        ratio = logratio.exp()
        fraction = ((ratio - 1.0).abs() > epsilon).float().mean()
    return like_inputs(fraction, new_log_probs, old_log_probs)
