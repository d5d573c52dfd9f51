from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.rloo_loop import grouped_rewards


def group_rloo_advantages(rewards, group_size):
    tensor, group_size = grouped_rewards(rewards, group_size)
    groups = tensor.reshape(-1, group_size)
    return like_inputs((groups - groups.mean(dim=1, keepdim=True)).reshape(-1), rewards)
