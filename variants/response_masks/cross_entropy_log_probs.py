from __future__ import annotations

import torch.nn.functional as F

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import token_log_prob_inputs


def token_log_probs(logits, input_ids):
    scores, ids = token_log_prob_inputs(logits, input_ids)
    predicting = scores[:, :-1]  # [B, T-1, V]
    labels = ids[:, 1:]
    log_probs = -F.cross_entropy(predicting.transpose(1, 2), labels, reduction="none")
    return like_inputs(log_probs, logits, input_ids)
