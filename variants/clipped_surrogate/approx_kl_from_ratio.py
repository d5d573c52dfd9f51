from __future__ import annotations

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import ratio_inputs


def approximate_kl(new_log_probs, old_log_probs):
    new, old = ratio_inputs(new_log_probs, old_log_probs)
    logratio = new - old.detach()
    ratio = logratio.exp()
    return like_inputs(((ratio - 1) - logratio).mean(), new_log_probs, old_log_probs)
