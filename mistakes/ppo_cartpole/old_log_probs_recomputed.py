"""The old log-probabilities are recomputed with the current policy inside the update: the ratio is always 1 and the clip never binds."""

from __future__ import annotations

import torch
from torch import nn

from kata.contracts.ppo_cartpole import update_inputs
from kata.networks import action_log_probs
from kata.ppo_frame import RolloutBatch
from kata.optim import Optimizer
from solutions.clipped_surrogate import (
    active_clip_fraction,
    approximate_kl,
    clipped_policy_loss,
    clipped_value_loss,
    ppo_loss,
    ratio_outside_fraction,
)
from solutions.ppo_cartpole import minibatch_indices
from solutions.reinforce import categorical_entropy


def ppo_update(
    actor: nn.Module,
    critic: nn.Module,
    optimizer: Optimizer,
    batch: RolloutBatch,
    *,
    epochs: int,
    minibatch_size: int,
    clip_epsilon: float,
    value_clip_epsilon: float,
    value_coefficient: float,
    entropy_coefficient: float,
    max_grad_norm: float,
    normalize_advantages: bool = True,
    target_kl: float | None = None,
    generator: torch.Generator,
) -> dict[str, float]:
    update_inputs(batch, epochs, minibatch_size, clip_epsilon, value_clip_epsilon, value_coefficient,
                  entropy_coefficient, max_grad_norm, target_kl, generator)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    totals = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "grad_norm": 0.0}
    steps = 0
    epochs_completed = 0
    for _ in range(epochs):
        epoch_kl = []
        for indices in minibatch_indices(batch.actions.shape[0], minibatch_size, generator):
            logits = actor(batch.observations[indices])
            values = critic(batch.observations[indices])
            new_log_probs = action_log_probs(logits, batch.actions[indices])
            old_log_probs = new_log_probs.detach()
            advantages = batch.advantages[indices]
            if normalize_advantages:
                # Population std, so a minibatch of one sample gives 0 rather than NaN.
                advantages = (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8)
            entropy = categorical_entropy(logits)
            policy_loss = clipped_policy_loss(new_log_probs, old_log_probs, advantages, clip_epsilon)
            value_loss = clipped_value_loss(values, batch.old_values[indices], batch.returns[indices],
                                            value_clip_epsilon)
            loss = ppo_loss(policy_loss, value_loss, entropy, value_coefficient, entropy_coefficient)

            optimizer.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
            optimizer.step()

            totals["policy_loss"] += float(policy_loss.detach())
            totals["value_loss"] += float(value_loss.detach())
            totals["entropy"] += float(entropy.detach().mean())
            totals["grad_norm"] += float(grad_norm)
            if target_kl is not None:
                epoch_kl.append(float(approximate_kl(new_log_probs.detach(), old_log_probs)))
            steps += 1
        epochs_completed += 1
        if target_kl is not None and sum(epoch_kl) / len(epoch_kl) > target_kl:
            break

    diagnostics = {key: value / steps for key, value in totals.items()}
    # How far the whole update moved the policy from the one that collected the data: one pass, no gradient.
    with torch.no_grad():
        final_log_probs = action_log_probs(actor(batch.observations), batch.actions)
        diagnostics["approx_kl"] = float(approximate_kl(final_log_probs, batch.old_log_probs))
        diagnostics["active_clip_fraction"] = float(
            active_clip_fraction(final_log_probs, batch.old_log_probs, batch.advantages, clip_epsilon))
        diagnostics["ratio_outside_fraction"] = float(
            ratio_outside_fraction(final_log_probs, batch.old_log_probs, clip_epsilon))
    diagnostics["epochs_completed"] = float(epochs_completed)
    diagnostics["minibatch_steps"] = float(steps)
    return diagnostics
