import torch

from kata.concepts.arrays import like_inputs
from solutions.token_objectives import masked_token_ppo_objective as reference


def masked_token_ppo_objective(new_log_probs, old_log_probs, advantages, mask, clip_epsilon, reduction):
    arrays = (torch.as_tensor(value) for value in (new_log_probs, old_log_probs, advantages, mask))
    value = reference(*arrays, clip_epsilon, reduction)
    return like_inputs(value, new_log_probs, old_log_probs)  # advantages and mask are not consulted
