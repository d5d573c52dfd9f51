from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.rloo_loop import grouped_rewards
from solutions.baselines import rloo_advantages


def group_rloo_advantages(rewards, group_size):
    tensor, group_size = grouped_rewards(rewards, group_size)
    prompts = tensor.shape[0] // group_size
    # [G, prompts] then transposed: row k gathers rows k, k + prompts, k + 2 * prompts, ...
    groups = tensor.reshape(group_size, prompts).T
    return like_inputs(rloo_advantages(groups).T.reshape(-1), rewards)
