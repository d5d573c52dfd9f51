from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.token_objectives import token_log_prob_pair


def sequence_log_probability_ratio(new_log_probs, old_log_probs, mask):
    new, old, _ = token_log_prob_pair(new_log_probs, old_log_probs, mask)
    return like_inputs((new - old.detach()).sum(dim=1), new_log_probs, old_log_probs, mask)
