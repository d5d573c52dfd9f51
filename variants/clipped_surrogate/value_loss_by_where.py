from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import value_inputs


def clipped_value_loss(values, old_values, returns, clip_epsilon):
    new, old, target, epsilon = value_inputs(values, old_values, returns, clip_epsilon)
    old, target = old.detach(), target.detach()
    step = new - old
    clipped_prediction = torch.where(step > epsilon, old + epsilon, torch.where(step < -epsilon, old - epsilon, new))
    losses = torch.maximum((new - target) ** 2, (clipped_prediction - target) ** 2)
    return like_inputs(losses.mean() / 2, values, old_values, returns)
