from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.gae import gae_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    x = gae_inputs(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
    wide = torch.float64
    bootstrap = torch.where(x.terminated, torch.zeros((), dtype=wide), x.gamma * x.next_values.to(wide))
    deltas = x.rewards.to(wide) + bootstrap - x.values.to(wide)
    advantages = []
    following = torch.zeros_like(deltas[0])
    for t in reversed(range(deltas.shape[0])):
        following = deltas[t] + torch.where(x.trace_cuts[t], 0.0, x.gamma * x.gae_lambda * following)
        advantages.append(following)
    result = torch.stack(advantages[::-1]).to(x.rewards.dtype)
    return like_inputs(result, rewards, values, next_values, terminated, trace_cuts)
