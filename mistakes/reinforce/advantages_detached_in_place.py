from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.reinforce import surrogate_inputs


def reinforce_surrogate_loss(log_probs, advantages):
    log_probs_t, advantages_t = surrogate_inputs(log_probs, advantages)
    advantages_t.detach_()  # cuts the caller's own tensor out of its graph
    loss = -(log_probs_t * advantages_t).mean()
    return like_inputs(loss, log_probs, advantages)
