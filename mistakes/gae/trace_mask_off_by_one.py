import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.gae import gae_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    x = gae_inputs(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda)
    zero = torch.zeros_like(x.next_values)
    deltas = x.rewards + torch.where(x.terminated, zero, x.gamma * x.next_values) - x.values
    # the cut read from the record after t (as a `dones` that flags the next observation), not from t itself
    cuts = torch.cat([x.trace_cuts[1:], torch.ones_like(x.trace_cuts[:1])])
    decay = x.gamma * x.gae_lambda
    advantages, following = [], torch.zeros_like(deltas[0])
    nothing = torch.zeros_like(following)
    for t in reversed(range(deltas.shape[0])):
        following = deltas[t] + torch.where(cuts[t], nothing, decay * following)
        advantages.insert(0, following)
    return like_inputs(torch.stack(advantages), rewards, values, next_values, terminated, trace_cuts)
