import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, bool_mask = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    zero = new.new_zeros(())
    new_probability = torch.exp(torch.where(bool_mask, new, zero).sum(dim=1))
    old_probability = torch.exp(torch.where(bool_mask, old.detach(), zero).sum(dim=1))
    return like_inputs(new_probability / old_probability, new_log_probs, old_log_probs, mask)
