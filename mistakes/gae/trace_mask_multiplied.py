import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.gae import gae_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    x = gae_inputs(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
    zero = torch.zeros_like(x.next_values)
    deltas = x.rewards + torch.where(x.terminated, zero, x.gamma * x.next_values) - x.values
    carries = (~x.trace_cuts).to(x.rewards.dtype)
    advantages, following = [], torch.zeros_like(deltas[0])
    for t in reversed(range(deltas.shape[0])):
        following = deltas[t] + x.gamma * x.gae_lambda * carries[t] * following  # 0 · NaN from past the cut
        advantages.insert(0, following)
    return like_inputs(torch.stack(advantages), rewards, values, next_values, terminated, trace_cuts)
