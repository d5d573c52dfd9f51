"""RLOO with the leave-one-out baseline as a masked mean: each sample averages the others through a ``[G, G]`` mask.

Valid: row i of ``(1 - I) / (G - 1)`` averages every reward but the i-th, which is the definition of the baseline;
the matrix product sums in another order than ``(Σ r - r_i) / (G - 1)``, so only the last bits may differ.
"""

from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def rloo_advantages(rewards):
    tensor = group_rewards(rewards, minimum_group_size=2)
    group_size = tensor.shape[1]
    others = (1.0 - torch.eye(group_size, dtype=tensor.dtype)) / (group_size - 1)
    baseline = tensor @ others
    return like_inputs(tensor - baseline, rewards)
