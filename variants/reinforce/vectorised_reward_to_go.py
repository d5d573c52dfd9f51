from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import reward_to_go_inputs


def discounted_reward_to_go(rewards, episode_ends, gamma):
    rewards_t, ends, gamma_value = reward_to_go_inputs(rewards, episode_ends, gamma)
    columns = rewards_t if rewards_t.ndim == 2 else rewards_t[:, None]
    ends_2d = ends if ends.ndim == 2 else ends[:, None]
    steps = columns.shape[0]
    time = torch.arange(steps)
    ends_before = torch.cumsum(ends_2d.to(torch.int64), dim=0) - ends_2d.to(torch.int64)  # [T, N]
    later = time[None, :] >= time[:, None]  # [t, s]: s >= t
    same_episode = ends_before[:, None, :] == ends_before[None, :, :]  # [t, s, N]
    powers = torch.pow(torch.tensor(gamma_value, dtype=columns.dtype), (time[None, :] - time[:, None]).clamp(min=0))
    weights = torch.where(later[:, :, None] & same_episode, powers[:, :, None].to(columns.dtype),
                          columns.new_zeros(()))
    returns = torch.einsum("tsn,sn->tn", weights, columns)
    return like_inputs(returns if rewards_t.ndim == 2 else returns[:, 0], rewards)
