from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def no_baseline_advantages(rewards):
    tensor = group_rewards(rewards)
    advantages = torch.empty_like(tensor)
    for row in range(tensor.shape[0]):
        advantages[row] = tensor[row]
    return like_inputs(advantages, rewards)
