from __future__ import annotations

import torch

from kata.concepts.contracts.ppo_cartpole import minibatch_inputs


def minibatch_indices(batch_size, minibatch_size, generator):
    size, minibatch, generator = minibatch_inputs(batch_size, minibatch_size, generator)
    return list(torch.argsort(torch.rand(size, generator=generator)).split(minibatch))
