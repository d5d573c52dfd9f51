import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import value_inputs


def clipped_value_loss(values, old_values, returns, clip_epsilon):
    new, old, target, epsilon = value_inputs(values, old_values, returns, clip_epsilon)
    old, target = old.detach(), target.detach()
    unclipped = ((new - target) ** 2).mean()
    clipped = ((old + torch.clamp(new - old, -epsilon, epsilon) - target) ** 2).mean()
    return like_inputs(0.5 * torch.maximum(unclipped, clipped), values, old_values, returns)  # max after the means
