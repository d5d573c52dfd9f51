import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def clipped_surrogate_terms(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    adv = adv.detach()
    ratio = torch.exp(new - old.detach())
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * adv
    # the container of new_log_probs alone: NumPy back when only the advantages are a tensor
    return like_inputs((ratio, unclipped, clipped, torch.minimum(unclipped, clipped)), new_log_probs)
