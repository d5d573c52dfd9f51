from __future__ import annotations

import torch

from kata.concepts.arrays import ArrayLike, like_inputs
from kata.concepts.contracts.ppo_cartpole import bootstrap_inputs


def bootstrap_values(values: ArrayLike, final_values: ArrayLike, last_values: ArrayLike, terminated: ArrayLike,
                     truncated: ArrayLike) -> ArrayLike:
    x = bootstrap_inputs(values, final_values, last_values, terminated, truncated)
    following = torch.cat([x.values[1:], x.last_values.unsqueeze(0)])
    next_values = following  # values[t + 1] even across an autoreset
    return like_inputs(next_values, values, final_values, last_values)
