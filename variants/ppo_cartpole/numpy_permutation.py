"""Each epoch's permutation drawn by NumPy from a seed taken off the torch generator.

Valid: ``numpy.random.Generator.permutation`` is a uniform permutation, cut into the same minibatches, so every
sample is used once per epoch. The seed is drawn from ``generator``, which therefore still fixes the shuffle (the
same state gives the same minibatches) and advances between epochs (each epoch shuffles differently). Only the
random stream differs from ``torch.randperm``'s.
"""

from __future__ import annotations

import numpy as np
import torch

from kata.concepts.contracts.ppo_cartpole import minibatch_inputs


def minibatch_indices(batch_size, minibatch_size, generator):
    size, minibatch, generator = minibatch_inputs(batch_size, minibatch_size, generator)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    permutation = torch.from_numpy(np.random.default_rng(seed).permutation(size))
    return list(permutation.split(minibatch))
