from __future__ import annotations

import torch

from kata.rl.networks import action_log_probs
from solutions.clipped_surrogate import clipped_value_loss, ppo_loss
from solutions.reinforce import categorical_entropy


def _minibatch_loss(actor, critic, batch, indices, *, clip_epsilon, value_clip_epsilon, value_coefficient,
                    entropy_coefficient, normalize_advantages):
    observations = batch.observations[indices]
    logits = actor(observations)
    values = critic(observations)
    new_log_probs = action_log_probs(logits, batch.actions[indices])
    old_log_probs = batch.old_log_probs[indices]
    advantages = batch.advantages[indices]
    if normalize_advantages:
        advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8)
    entropy = categorical_entropy(logits if entropy_coefficient > 0 else logits.detach())
    ratio = torch.exp(new_log_probs - old_log_probs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    policy_loss = torch.max(unclipped, clipped).mean()
    value_loss = clipped_value_loss(values, batch.old_values[indices], batch.returns[indices], value_clip_epsilon)
    loss = ppo_loss(policy_loss, value_loss, entropy, value_coefficient, entropy_coefficient)
    return loss, policy_loss, value_loss, entropy, new_log_probs, old_log_probs
