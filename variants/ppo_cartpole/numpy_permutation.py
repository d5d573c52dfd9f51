from __future__ import annotations

import numpy as np
import torch

from kata.concepts.contracts.ppo_cartpole import minibatch_inputs


def minibatch_indices(batch_size, minibatch_size, generator):
    size, minibatch, generator = minibatch_inputs(batch_size, minibatch_size, generator)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    permutation = torch.from_numpy(np.random.default_rng(seed).permutation(size))
    return list(permutation.split(minibatch))
