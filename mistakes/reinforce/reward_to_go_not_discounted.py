import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import reward_to_go_inputs


def discounted_reward_to_go(rewards, episode_ends, gamma):
    rewards_t, ends, _gamma = reward_to_go_inputs(rewards, episode_ends, gamma)
    carries = (~ends).to(rewards_t.dtype)
    returns, following = [], torch.zeros_like(rewards_t[0])
    for t in reversed(range(rewards_t.shape[0])):
        following = rewards_t[t] + carries[t] * following
        returns.insert(0, following)
    return like_inputs(torch.stack(returns), rewards)
