from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import surrogate_inputs


def reinforce_surrogate_loss(log_probs, advantages):
    log_probs_t, advantages_t = surrogate_inputs(log_probs, advantages)
    loss = -(log_probs_t * advantages_t.detach()).mean()
    return like_inputs(loss, log_probs)  # NumPy out whenever log_probs is NumPy, even beside tensor advantages
