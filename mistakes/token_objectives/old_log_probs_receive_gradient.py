import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_log_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    log_ratio = torch.where(bool_mask, new - old, new.new_zeros(())).sum(dim=1)
    return like_inputs(log_ratio, new_log_probs, old_log_probs, mask)
