from __future__ import annotations

import numpy as np
import torch

from kata.concepts.contracts.gae import gae_inputs
from solutions.gae import gae_advantages as torch_gae_advantages


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    arguments = (rewards, values, next_values, terminated, trace_cuts)
    if any(isinstance(a, torch.Tensor) for a in arguments):
        return torch_gae_advantages(*arguments, gamma, gae_lambda)
    x = gae_inputs(*arguments, gamma, gae_lambda)
    r, v, nv = x.rewards.numpy(), x.values.numpy(), x.next_values.numpy()
    bootstrap, carries = ~x.terminated.numpy(), ~x.trace_cuts.numpy()
    advantages = np.zeros_like(r)
    following = np.zeros_like(r[0])
    for t in range(r.shape[0] - 1, -1, -1):
        delta = r[t] + np.where(bootstrap[t], x.gamma * nv[t], 0.0) - v[t]
        following = delta + np.where(carries[t], x.gamma * x.gae_lambda * following, 0.0)
        advantages[t] = following
    return advantages
