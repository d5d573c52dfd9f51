import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_ppo_inputs


def masked_token_ppo_terms(new_log_probs, old_log_probs, advantages, mask, clip_epsilon):
    new, old, adv, bool_mask, epsilon = token_ppo_inputs(new_log_probs, old_log_probs, advantages, mask, clip_epsilon)
    zero = new.new_zeros(())
    ratio = torch.exp(torch.where(bool_mask, new, zero)) / torch.exp(torch.where(bool_mask, old.detach(), zero))
    token_advantages = torch.where(bool_mask, adv.detach()[:, None].expand_as(new), zero)
    unclipped = ratio * token_advantages
    clipped = ratio.clamp(1 - epsilon, 1 + epsilon) * token_advantages
    return like_inputs((ratio, unclipped, clipped, torch.minimum(unclipped, clipped)),
                       new_log_probs, old_log_probs, advantages, mask)
