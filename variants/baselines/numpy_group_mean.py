from __future__ import annotations

import torch

from kata.concepts.contracts.baselines import group_rewards


def group_mean_advantages(rewards):
    tensor = group_rewards(rewards)
    if isinstance(rewards, torch.Tensor):
        return tensor - tensor.mean(dim=1, keepdim=True)
    array = tensor.numpy()
    return array - array.mean(axis=1, keepdims=True)
