import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs
from solutions.clipped_surrogate import clipped_surrogate_terms


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    weights = bool_mask.to(new.dtype)
    ratio, unclipped, clipped, pessimistic = clipped_surrogate_terms(new, old, adv[:, None].expand_as(new), epsilon)
    ratio = ratio * weights + (1.0 - weights)
    terms = (ratio, unclipped * weights, clipped * weights, pessimistic * weights)
    return like_inputs(terms, new_log_probs, old_log_probs, advantages, mask)
