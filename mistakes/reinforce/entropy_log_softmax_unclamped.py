import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import entropy_inputs


def categorical_entropy(logits):
    logits_t = entropy_inputs(logits)
    log_p = torch.log_softmax(logits_t, dim=-1)  # -inf where p = 0, and p * -inf is NaN
    entropy = -(log_p.exp() * log_p).sum(dim=-1)
    return like_inputs(entropy, logits)
