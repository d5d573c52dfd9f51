import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import reward_to_go_inputs


def discounted_reward_to_go(rewards, episode_ends, gamma):
    rewards_t, ends, gamma_value = reward_to_go_inputs(rewards, episode_ends, gamma)
    carries = (~ends).to(rewards_t.dtype)
    returns, following = [], torch.zeros_like(rewards_t[0])
    for t in reversed(range(rewards_t.shape[0])):
        # The carried return detached: right values, but r_{t+1..} no longer reach G_t through autograd.
        following = rewards_t[t] + gamma_value * carries[t] * following.detach()
        returns.insert(0, following)
    return like_inputs(torch.stack(returns), rewards)
