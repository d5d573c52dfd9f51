import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import entropy_inputs


def categorical_entropy(logits):
    logits_t = entropy_inputs(logits)
    probabilities = torch.softmax(logits_t, dim=-1)
    # xlogy(0, 0) = 0 repairs the value, but its backward pass still multiplies log 0 = -inf by 0: NaN gradients.
    entropy = -torch.special.xlogy(probabilities, probabilities).sum(dim=-1)
    return like_inputs(entropy, logits)
