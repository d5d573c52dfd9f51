from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    log_ratio = torch.where(bool_mask, new - old.detach(), new.new_zeros(())).sum(dim=1)
    ratio = torch.exp(log_ratio.to(torch.float64)).to(log_ratio.dtype)
    return like_inputs(ratio, new_log_probs, old_log_probs, mask)
