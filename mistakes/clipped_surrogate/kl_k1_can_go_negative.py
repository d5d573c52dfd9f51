from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import ratio_inputs


def approximate_kl(new_log_probs, old_log_probs):
    new, old = ratio_inputs(new_log_probs, old_log_probs)
    return like_inputs((old.detach() - new).mean(), new_log_probs, old_log_probs)
