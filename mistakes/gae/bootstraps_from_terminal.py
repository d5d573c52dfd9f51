import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.gae import gae_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    x = gae_inputs(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
    deltas = x.rewards + x.gamma * x.next_values - x.values  # no terminal mask at all
    decay = x.gamma * x.gae_lambda
    advantages, following = [], torch.zeros_like(deltas[0])
    nothing = torch.zeros_like(following)
    for t in reversed(range(deltas.shape[0])):
        following = deltas[t] + torch.where(x.trace_cuts[t], nothing, decay * following)
        advantages.insert(0, following)
    return like_inputs(torch.stack(advantages), rewards, values, next_values, terminated, trace_cuts)
