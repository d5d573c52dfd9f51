from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import entropy_inputs


def categorical_entropy(logits):
    logits_t = entropy_inputs(logits)
    entropy = torch.distributions.Categorical(logits=logits_t, validate_args=False).entropy()
    return like_inputs(entropy, logits)
