import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import ratio_inputs


def approximate_kl(new_log_probs, old_log_probs):
    new, old = ratio_inputs(new_log_probs, old_log_probs)
    log_ratio = old.detach() - new
    return like_inputs((torch.expm1(log_ratio) - log_ratio).mean(), new_log_probs, old_log_probs)
