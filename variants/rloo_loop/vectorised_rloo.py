"""RLOO advantages in closed form, ``G / (G - 1) · (r_i - mean of the group)``, one reshape and no loop.

Valid: ``r_i - (sum_j r_j - r_i) / (G - 1) = (G·r_i - sum_j r_j) / (G - 1) = G / (G - 1) · (r_i - mean)``, the same
leave-one-out advantage up to float64 rounding; each group still sums to zero and touches no other group.
"""

from __future__ import annotations

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.rloo_loop import grouped_rewards


def group_rloo_advantages(rewards, group_size):
    tensor, group_size = grouped_rewards(rewards, group_size)
    groups = tensor.reshape(-1, group_size)
    advantages = group_size / (group_size - 1) * (groups - groups.mean(dim=1, keepdim=True))
    return like_inputs(advantages.reshape(-1), rewards)
