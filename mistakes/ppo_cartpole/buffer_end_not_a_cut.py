from __future__ import annotations

import torch

from kata.concepts.arrays import ArrayLike, like_inputs
from kata.concepts.contracts.ppo_cartpole import flag_inputs


def gae_masks(terminated: ArrayLike, truncated: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
    terminated_t, truncated_t = flag_inputs(terminated, truncated)
    buffer_end = torch.zeros_like(terminated_t)
    trace_cuts = terminated_t | truncated_t | buffer_end
    return like_inputs((terminated_t.clone(), trace_cuts), terminated, truncated)
