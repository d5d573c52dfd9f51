from __future__ import annotations

import torch

from kata.concepts.arrays import like_inputs
from kata.concepts.contracts.clipped_surrogate import surrogate_inputs


def clipped_policy_loss(new_log_probs, old_log_probs, advantages, clip_epsilon):
    new, old, adv, epsilon = surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    logratio = new - old.detach()
    ratio = logratio.exp()
    pg_loss1 = -adv.detach() * ratio
    pg_loss2 = -adv.detach() * torch.clamp(ratio, 1 - epsilon, 1 + epsilon)
    return like_inputs(torch.max(pg_loss1, pg_loss2).mean(), new_log_probs, old_log_probs, advantages)
