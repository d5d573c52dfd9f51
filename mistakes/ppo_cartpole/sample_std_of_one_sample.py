from __future__ import annotations

import torch

from solutions.ppo_cartpole import _minibatch_loss as _reference


def _minibatch_loss(actor, critic, batch, indices, *, normalize_advantages, **settings):
    if normalize_advantages:
        advantages = batch.advantages[indices]
        # torch's default std divides by n - 1: a minibatch of one sample gives 0 / 0 = NaN.
        standardised = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        advantages = torch.zeros_like(batch.advantages).index_put((indices,), standardised)
        batch = batch._replace(advantages=advantages)
    return _reference(actor, critic, batch, indices, normalize_advantages=False, **settings)
