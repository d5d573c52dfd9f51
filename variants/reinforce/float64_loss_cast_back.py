from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import surrogate_inputs


def reinforce_surrogate_loss(log_probs, advantages):
    log_probs_t, advantages_t = surrogate_inputs(log_probs, advantages)
    product = log_probs_t.to(torch.float64) * advantages_t.detach().to(torch.float64)
    loss = -(product.sum() / product.numel())
    return like_inputs(loss.to(log_probs_t.dtype), log_probs, advantages)
