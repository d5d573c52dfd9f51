from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import token_log_prob_inputs


def token_log_probs(logits, input_ids):
    scores, ids = token_log_prob_inputs(logits, input_ids)
    log_probs = torch.log_softmax(scores[:, :-1].to(torch.float64), dim=-1)
    gathered = log_probs.gather(-1, ids[:, 1:, None]).squeeze(-1)
    return like_inputs(gathered.to(scores.dtype), logits, input_ids)
