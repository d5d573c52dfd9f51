from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def group_mean_advantages(rewards):
    tensor = group_rewards(rewards)
    return like_inputs(tensor - tensor.mean(dim=0, keepdim=True), rewards)


def rloo_advantages(rewards):
    tensor = group_rewards(rewards, minimum_group_size=2)
    groups = tensor.shape[0]
    if groups < 2:  # nothing to leave out along this axis: fall back to no baseline
        return like_inputs(tensor.clone(), rewards)
    leave_one_out_mean = (tensor.sum(dim=0, keepdim=True) - tensor) / (groups - 1)
    return like_inputs(tensor - leave_one_out_mean, rewards)
