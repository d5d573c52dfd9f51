from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def rloo_advantages(rewards):
    tensor = group_rewards(rewards, minimum_group_size=2)
    group_size = tensor.shape[1]
    others = (1.0 - torch.eye(group_size, dtype=tensor.dtype)) / (group_size - 1)
    baseline = tensor @ others
    return like_inputs(tensor - baseline, rewards)
