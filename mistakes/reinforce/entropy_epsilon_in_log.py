import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import entropy_inputs


def categorical_entropy(logits):
    logits_t = entropy_inputs(logits)
    probabilities = torch.softmax(logits_t, dim=-1)
    entropy = -(probabilities * torch.log(probabilities + 1e-8)).sum(dim=-1)  # log(p + ε) is not log p
    return like_inputs(entropy, logits)
