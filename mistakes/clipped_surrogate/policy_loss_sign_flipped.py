from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs
from solutions.clipped_surrogate import clipped_surrogate_terms


def clipped_policy_loss(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    *_, pessimistic = clipped_surrogate_terms(new, old, adv, epsilon)
    return like_inputs(pessimistic.mean(), new_log_probs, old_log_probs, advantages)
