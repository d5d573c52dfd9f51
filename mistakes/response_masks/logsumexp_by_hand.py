import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.response_masks import token_log_prob_inputs


def token_log_probs(logits, input_ids):
    scores, ids = token_log_prob_inputs(logits, input_ids)
    predicting = scores[:, :-1]
    normaliser = torch.log(torch.exp(predicting).sum(dim=-1))  # exp overflows for large logits
    return like_inputs(predicting.gather(-1, ids[:, 1:, None]).squeeze(-1) - normaliser, logits, input_ids)
