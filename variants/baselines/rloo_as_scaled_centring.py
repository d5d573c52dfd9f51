from __future__ import annotations

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def rloo_advantages(rewards):
    tensor = group_rewards(rewards, minimum_group_size=2)
    group_size = tensor.shape[1]
    centred = tensor - tensor.mean(dim=1, keepdim=True)
    return like_inputs(centred * (group_size / (group_size - 1)), rewards)
