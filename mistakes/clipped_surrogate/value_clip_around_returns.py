import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import value_inputs


def clipped_value_loss(values, old_values, returns, clip_epsilon):
    new, old, target, epsilon = value_inputs(values, old_values, returns, clip_epsilon)
    target = target.detach()
    unclipped = (new - target) ** 2
    clipped_prediction = target + torch.clamp(new - target, -epsilon, epsilon)
    clipped = (clipped_prediction - target) ** 2
    return like_inputs(0.5 * torch.maximum(unclipped, clipped).mean(), values, old_values, returns)
