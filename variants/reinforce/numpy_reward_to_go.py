from __future__ import annotations

import numpy as np
import torch

from kata.concepts.contracts.reinforce import reward_to_go_inputs
from solutions.reinforce import discounted_reward_to_go as torch_reward_to_go


def discounted_reward_to_go(rewards, episode_ends, gamma):
    if isinstance(rewards, torch.Tensor) or isinstance(episode_ends, torch.Tensor):
        return torch_reward_to_go(rewards, episode_ends, gamma)
    rewards_t, ends, gamma_value = reward_to_go_inputs(rewards, episode_ends, gamma)
    r = rewards_t.numpy()
    carries = ~ends.numpy()
    returns = np.empty_like(r)
    following = np.zeros_like(r[0])
    for t in range(r.shape[0] - 1, -1, -1):
        following = r[t] + gamma_value * carries[t] * following
        returns[t] = following
    return returns
