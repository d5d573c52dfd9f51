import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def active_clip_fraction(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    ratio = torch.exp(new.detach() - old.detach())
    adv = adv.detach()
    binds = ((adv >= 0) & (ratio > 1.0 + epsilon)) | ((adv <= 0) & (ratio < 1.0 - epsilon))
    return like_inputs(binds.to(new.dtype).mean(), new_log_probs, old_log_probs, advantages)
