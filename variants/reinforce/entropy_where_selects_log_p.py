from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import entropy_inputs


def categorical_entropy(logits):
    logits_t = entropy_inputs(logits)
    log_p = torch.log_softmax(logits_t, dim=-1)
    p = log_p.exp()
    safe = torch.where(p > 0, log_p, torch.zeros_like(log_p))
    return like_inputs(-(p * safe).sum(dim=-1), logits)
