import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    token_ratios = torch.exp(torch.where(bool_mask, new - old.detach(), new.new_zeros(())))
    mean = (token_ratios * bool_mask).sum(dim=1) / bool_mask.sum(dim=1).clamp(min=1)
    return like_inputs(torch.where(bool_mask.any(dim=1), mean, 1.0), new_log_probs, old_log_probs, mask)
