import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import token_log_prob_inputs


def token_log_probs(logits, input_ids):
    scores, ids = token_log_prob_inputs(logits, input_ids)
    probabilities = torch.softmax(scores[:, :-1], dim=-1)  # underflows to 0 for logits far below the largest
    return like_inputs(torch.log(probabilities.gather(-1, ids[:, 1:, None]).squeeze(-1)), logits, input_ids)
