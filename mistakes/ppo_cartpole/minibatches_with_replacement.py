from __future__ import annotations

import torch

from kata.concepts.contracts.ppo_cartpole import minibatch_inputs


def minibatch_indices(batch_size: int, minibatch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    size, minibatch, generator = minibatch_inputs(batch_size, minibatch_size, generator)
    return list(torch.randint(0, size, (size,), generator=generator).split(minibatch))
