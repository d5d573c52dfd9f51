from __future__ import annotations

from solutions.ppo_cartpole import _minibatch_loss as _reference


def _minibatch_loss(actor, critic, batch, indices, *, clip_epsilon, value_clip_epsilon, **settings):
    # The policy's clip range reused for the value clip: value_clip_epsilon is never used.
    return _reference(actor, critic, batch, indices, clip_epsilon=clip_epsilon, value_clip_epsilon=clip_epsilon,
                      **settings)
