from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.ppo_cartpole import bootstrap_inputs, flag_inputs


def gae_masks(terminated, truncated):
    terminated_t, truncated_t = flag_inputs(terminated, truncated)
    term, trunc = terminated_t.double(), truncated_t.double()
    buffer_end = torch.zeros_like(term)
    buffer_end[-1] = 1.0
    trace_cuts = torch.maximum(torch.maximum(term, trunc), buffer_end)
    return like_inputs((term > 0.5, trace_cuts > 0.5), terminated, truncated)


def bootstrap_values(values, final_values, last_values, terminated, truncated):
    x = bootstrap_inputs(values, final_values, last_values, terminated, truncated)
    done = (x.terminated.double() + x.truncated.double()) > 0.0
    following = torch.cat([x.values[1:], x.last_values.unsqueeze(0)]).double()
    next_values = torch.where(done, x.final_values.double(), following)
    return like_inputs(next_values.to(x.values.dtype), values, final_values, last_values)
