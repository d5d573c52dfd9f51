import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def active_clip_fraction(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, _adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    ratio = torch.exp(new.detach() - old.detach())
    return like_inputs(((ratio - 1.0).abs() > epsilon).to(new.dtype).mean(), new_log_probs, old_log_probs,
                       advantages)
