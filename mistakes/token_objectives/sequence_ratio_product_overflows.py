import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    token_ratios = torch.exp(torch.where(bool_mask, new - old.detach(), new.new_zeros(())))
    return like_inputs(torch.prod(token_ratios, dim=1), new_log_probs, old_log_probs, mask)
