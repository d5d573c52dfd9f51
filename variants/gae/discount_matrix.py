from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.gae import gae_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    x = gae_inputs(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
    bootstrap = torch.where(x.terminated, torch.zeros_like(x.next_values), x.gamma * x.next_values)
    deltas = x.rewards + bootstrap - x.values
    columns = deltas if deltas.ndim == 2 else deltas[:, None]
    cuts = (x.trace_cuts if x.trace_cuts.ndim == 2 else x.trace_cuts[:, None]).to(torch.int64)
    steps = columns.shape[0]
    time = torch.arange(steps)
    cuts_before = torch.cumsum(cuts, dim=0) - cuts
    reachable = (time[None, :] >= time[:, None])[:, :, None] & (cuts_before[:, None, :] == cuts_before[None, :, :])
    decay = torch.tensor(x.gamma * x.gae_lambda, dtype=columns.dtype)
    powers = torch.pow(decay, (time[None, :] - time[:, None]).clamp(min=0))[:, :, None]
    # A sum over the reachable records only: an unreachable one may hold NaN or inf, and 0 · inf is NaN.
    terms = torch.where(reachable, powers * columns[None, :, :], columns.new_zeros(()))
    advantages = terms.sum(dim=1)
    return like_inputs(advantages if deltas.ndim == 2 else advantages[:, 0], rewards, values, next_values,
                       terminated, trace_cuts)
