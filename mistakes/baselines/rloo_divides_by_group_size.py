from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.baselines import group_rewards


def rloo_advantages(rewards):
    tensor = group_rewards(rewards, minimum_group_size=2)
    leave_one_out_mean = (tensor.sum(dim=1, keepdim=True) - tensor) / tensor.shape[1]
    return like_inputs(tensor - leave_one_out_mean, rewards)
