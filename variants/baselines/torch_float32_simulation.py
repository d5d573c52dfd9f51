from __future__ import annotations

import torch

from kata.concepts.arrays import check_integer
from solutions.baselines import (
    REWARD_OFFSET,
    TRUE_GRADIENT,
    group_mean_advantages,
    no_baseline_advantages,
    rloo_advantages,
)


def simulate_group_baseline_bias(group_size, groups, seed):
    group_size = check_integer("group_size", group_size, minimum=2)
    groups = check_integer("groups", groups, minimum=1)
    generator = torch.Generator().manual_seed(seed)
    actions = torch.randn(groups, group_size, generator=generator)  # float32, torch's default
    rewards = REWARD_OFFSET + actions - 0.5 * actions**2
    result = {"true_gradient": TRUE_GRADIENT}
    for name, advantages in (("plain", no_baseline_advantages), ("same_group", group_mean_advantages),
                             ("rloo", rloo_advantages)):
        estimates = (actions * advantages(rewards)).mean(dim=1)
        result[f"{name}_mean"] = float(estimates.mean())
        result[f"{name}_std"] = float(estimates.std()) if groups > 1 else 0.0
    result["predicted_scale"] = (group_size - 1) / group_size
    result["observed_scale"] = result["same_group_mean"] / TRUE_GRADIENT
    return result
