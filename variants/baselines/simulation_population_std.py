from __future__ import annotations

import numpy as np

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
    rng = np.random.default_rng(seed)
    actions = rng.normal(0.0, 1.0, size=(groups, group_size))
    rewards = REWARD_OFFSET + actions - 0.5 * actions**2
    result = {"true_gradient": TRUE_GRADIENT}
    for name, advantages in (("plain", no_baseline_advantages), ("same_group", group_mean_advantages),
                             ("rloo", rloo_advantages)):
        estimates = (actions * advantages(rewards)).mean(axis=1)
        result[f"{name}_mean"] = float(estimates.mean())
        result[f"{name}_std"] = float(estimates.std())  # ddof = 0: 0.0 for one group by itself
    result["predicted_scale"] = (group_size - 1) / group_size
    result["observed_scale"] = result["same_group_mean"] / TRUE_GRADIENT
    return result
