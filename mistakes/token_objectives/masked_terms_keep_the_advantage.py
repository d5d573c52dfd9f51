import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs
from solutions.clipped_surrogate import clipped_surrogate_terms


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    zero = new.new_zeros(())
    terms = clipped_surrogate_terms(torch.where(bool_mask, new, zero), torch.where(bool_mask, old, zero),
                                    adv[:, None].expand_as(new), epsilon)
    return like_inputs(tuple(terms), new_log_probs, old_log_probs, advantages, mask)
