import torch

from kata.concepts.contracts.ppo_cartpole import update_inputs
from kata.rl.networks import action_log_probs
from solutions.clipped_surrogate import active_clip_fraction, approximate_kl, ratio_outside_fraction
from solutions.ppo_cartpole import _clipped_step, _minibatch_loss, minibatch_indices


def ppo_update(actor, critic, optimizer, batch, *, epochs, minibatch_size, clip_epsilon, value_clip_epsilon,
               value_coefficient, entropy_coefficient, max_grad_norm, normalize_advantages=True, target_kl=None,
               generator):
    update_inputs(batch, epochs, minibatch_size, clip_epsilon, value_clip_epsilon, value_coefficient,
                  entropy_coefficient, max_grad_norm, target_kl, generator)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    totals = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "grad_norm": 0.0}
    steps = epochs_completed = 0
    for _ in range(epochs):
        epoch_kl = []
        for indices in minibatch_indices(batch.actions.shape[0], minibatch_size, generator):
            loss, policy_loss, value_loss, entropy, new_log_probs, old_log_probs = _minibatch_loss(
                actor, critic, batch, indices, clip_epsilon=clip_epsilon, value_clip_epsilon=value_clip_epsilon,
                value_coefficient=value_coefficient, entropy_coefficient=entropy_coefficient,
                normalize_advantages=normalize_advantages)
            grad_norm = _clipped_step(optimizer, parameters, loss, max_grad_norm)
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
    # The clip fraction judged with standardised advantages, whose signs differ from the batch's own.
    standardised = (batch.advantages - batch.advantages.mean()) / (batch.advantages.std(unbiased=False) + 1e-8)
    with torch.no_grad():
        final_log_probs = action_log_probs(actor(batch.observations), batch.actions)
        diagnostics["approx_kl"] = float(approximate_kl(final_log_probs, batch.old_log_probs))
        diagnostics["active_clip_fraction"] = float(
            active_clip_fraction(final_log_probs, batch.old_log_probs, standardised, clip_epsilon))
        diagnostics["ratio_outside_fraction"] = float(
            ratio_outside_fraction(final_log_probs, batch.old_log_probs, clip_epsilon))
    diagnostics["epochs_completed"] = float(epochs_completed)
    diagnostics["minibatch_steps"] = float(steps)
    return diagnostics
