"""The epoch's permutation drawn as ``argsort`` of uniform noise from the same generator: a uniform permutation,
as valid as ``randperm``, but a different random stream."""

from __future__ import annotations

import torch

from kata.concepts.contracts.ppo_cartpole import minibatch_inputs


def minibatch_indices(batch_size, minibatch_size, generator):
    size, minibatch, generator = minibatch_inputs(batch_size, minibatch_size, generator)
    return list(torch.argsort(torch.rand(size, generator=generator)).split(minibatch))
