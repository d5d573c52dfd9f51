import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import ratio_inputs


def approximate_kl(new_log_probs, old_log_probs):
    new, old = ratio_inputs(new_log_probs, old_log_probs)
    with torch.no_grad():  # "only a diagnostic": but the contract keeps the gradient into new_log_probs
        log_ratio = new - old
        per_sample = torch.expm1(log_ratio) - log_ratio
    return like_inputs(per_sample.mean(), new_log_probs, old_log_probs)
