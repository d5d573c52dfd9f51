"""Exercise 5 — Complete PPO on CartPole (GUIDE.md §5).

The frame (``kata.rl.ppo``) collects rollouts from the course's CartPole, values them, evaluates and logs. This
module holds the parts the concept teaches, and ``train_ppo`` hands them, with this package's own ``gae`` function,
to the frame's loop:

- ``gae_masks``: three environment flags become GAE's two masks. Only ``terminated`` forbids the bootstrap; the
  trace is cut by ``terminated``, ``truncated`` (the 500-step limit) and the rollout buffer's last step alike.
- ``bootstrap_values``: ``V(s_{t+1})`` for every record. After an autoreset the next stored observation belongs
  to the next episode, so a record that ended an episode takes the value of its *final* observation.
- ``minibatch_indices``: one epoch is one permutation of the batch cut into minibatches: every sample exactly once.
- ``ppo_update``: epochs of shuffled minibatches with the clipped policy loss, the clipped value loss and the
  entropy bonus, gradient-norm clipping between ``backward()`` and ``step()``, diagnostics, and an optional early
  stop when the approximate KL of an epoch exceeds ``target_kl``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kata.arrays import (
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_integer,
    check_ndim,
    check_non_negative,
    check_positive,
    check_same_shape,
    check_shape,
    like_inputs,  # noqa: F401 - like_inputs returns what you were given
)
from kata.rl import Optimizer
from kata.rl.cartpole import action_log_probs  # noqa: F401 - for your update
from kata.rl.ppo import PPOConfig, RolloutBatch, run_ppo
from kata.concepts.stub import not_implemented

from .clipped_surrogate import (  # noqa: F401 - your concept 4 functions, for the update
    active_clip_fraction,
    approximate_kl,
    categorical_entropy,
    clipped_policy_loss,
    clipped_value_loss,
    ppo_loss,
    ratio_outside_fraction,
)
from .gae import gae_advantages

__all__ = ["gae_masks", "bootstrap_values", "minibatch_indices", "ppo_update", "train_ppo"]


def gae_masks(terminated: ArrayLike, truncated: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
    """GAE's two masks from the environment's flags: ``(terminated, trace_cuts)``.

    Args:
        terminated: bool or 0/1, ``[T]`` or time-major ``[T, N]``: the task ended at step t (pole fell, cart left).
        truncated: the same shape: the time limit ended the episode at step t (it may coincide with terminated).

    The rollout buffer ends after the last row, ``t = T - 1``: the record there is followed by nothing in this
    buffer, so the recursion must stop there too, though it may still bootstrap.

    Returns:
        ``(terminated, trace_cuts)``: bool arrays of the input's shape (tensors if either flag is a tensor, else
        NumPy), where
        ``terminated`` is the bootstrap mask (only a real terminal forbids bootstrapping) and ``trace_cuts`` is
        ``terminated or truncated or t == T - 1``.

    Raises:
        ValueError: the flags are not 0/1, differ in shape, are not 1-D or 2-D, or are empty.

    Example:
        >>> import numpy as np
        >>> gae_masks(np.array([False, True, False, False]), np.array([False, False, True, False]))
        (array([False,  True, False, False]), array([False,  True,  True,  True]))
    """
    terminated_t, truncated_t = _flags(terminated, truncated)
    # terminated_t, truncated_t: bool tensors of one shape [T] or [T, N]; time is axis 0. Return
    # like_inputs((bootstrap_mask, trace_cuts), terminated, truncated) so NumPy callers get NumPy back.
    raise not_implemented("gae_masks")


def bootstrap_values(values: ArrayLike, final_values: ArrayLike, last_values: ArrayLike, terminated: ArrayLike,
                     truncated: ArrayLike) -> ArrayLike:
    """``V(s_{t+1})`` for every record of a rollout: the ``next_values`` GAE bootstraps from.

    Args:
        values: ``V(s_t)``, ``[T]`` or time-major ``[T, N]``, for the observation each action was taken at.
        final_values: the same shape: ``V(final observation)`` where an episode ended at step t (any value
            elsewhere). After an autoreset, ``s_{t+1}`` in the buffer is the next episode's first observation;
            the final observation is the one the step really produced.
        last_values: ``[]`` or ``[N]``: V of the observation after the buffer's last step.
        terminated, truncated: bool or 0/1 flags of ``values``' shape.

    Returns:
        ``next_values`` of ``values``' shape, a tensor if any of ``values``, ``final_values`` and ``last_values`` is
        one (else NumPy), in their promoted floating dtype: ``final_values[t]`` where an episode ended at t (terminated
        or truncated; GAE ignores it where terminated), ``values[t + 1]`` inside an episode, ``last_values`` at the
        buffer's last step.

    Raises:
        ValueError: shapes do not match, or flags are not 0/1.

    Example:
        >>> import numpy as np
        >>> bootstrap_values(np.array([1.0, 2.0, 3.0]), np.array([0.0, 9.0, 0.0]), np.array(4.0),
        ...                  np.array([False, False, False]), np.array([False, True, False]))
        array([2., 9., 4.])
    """
    terminated_t, truncated_t = _flags(terminated, truncated)
    values_t = as_float_tensor(values, "values")
    final_values_t = as_float_tensor(final_values, "final_values")
    last_values_t = as_float_tensor(last_values, "last_values")
    check_same_shape("terminated", terminated_t, values=values_t, final_values=final_values_t)
    check_shape("last_values", last_values_t, tuple(terminated_t.shape[1:]),
                "one value per environment: V(observation after the rollout's last step)")
    dtype = torch.promote_types(torch.promote_types(values_t.dtype, final_values_t.dtype), last_values_t.dtype)
    values_t, final_values_t, last_values_t = values_t.to(dtype), final_values_t.to(dtype), last_values_t.to(dtype)
    # values_t, final_values_t: floating tensors [T] or [T, N]; last_values_t: [] or [N]; terminated_t,
    # truncated_t: bool tensors. Build the result without in-place writes, then
    # return like_inputs(next_values, values, final_values, last_values).
    raise not_implemented("bootstrap_values")


def minibatch_indices(batch_size: int, minibatch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch's minibatches: a random permutation of ``range(batch_size)`` cut into pieces.

    Args:
        batch_size: number of samples, >= 1.
        minibatch_size: samples per minibatch, >= 1; the last minibatch is smaller if it does not divide.
        generator: a ``torch.Generator``; the same generator state gives the same minibatches.

    Returns:
        A list of int64 tensors whose concatenation holds every index exactly once, all orders equally likely.

    Example:
        >>> [len(m) for m in minibatch_indices(10, 4, torch.Generator().manual_seed(0))]
        [4, 4, 2]
    """
    size = check_integer("batch_size", batch_size, 1)
    minibatch = check_integer("minibatch_size", minibatch_size, 1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator (it fixes the shuffles); got {type(generator).__name__}")
    # Draw the shuffle from `generator` (torch.randperm accepts one) so a seed fixes every epoch's minibatches.
    raise not_implemented("minibatch_indices")


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
    """PPO's update on one rollout: ``epochs`` passes of shuffled minibatches, one optimizer step each.

    Each epoch is a fresh uniform permutation of the batch drawn from ``generator`` and cut into minibatches, as
    :func:`minibatch_indices` does. For every minibatch: ``actor`` and ``critic`` are each called once (with gradient),
    on the minibatch's observations only; advantages are standardised within the minibatch if asked; the loss is
    ``ppo_loss(clipped_policy_loss(..., clip_epsilon), clipped_value_loss(..., value_clip_epsilon), entropy,
    value_coefficient, entropy_coefficient)``; gradients are zeroed before ``backward()`` (a caller's leftover ``.grad``
    changes nothing) and their norm over exactly the optimizer's parameters is clipped to ``max_grad_norm`` before
    ``step()``. ``batch.old_log_probs`` and ``old_values`` are data: never recomputed, never changed. After an epoch
    whose mean approximate KL (:func:`approximate_kl` of each minibatch, on the forward pass before its step) exceeds
    ``target_kl`` (if given; equal does not), no more epochs run: the check comes after a whole epoch only.

    Args:
        actor: observations ``[B, obs]`` -> logits ``[B, actions]``.
        critic: observations ``[B, obs]`` -> values ``[B]``.
        optimizer: steps the trained parameters (usually both networks'); the norm clip covers exactly these.
        batch: a :class:`kata.rl.ppo.RolloutBatch`.
        epochs, minibatch_size: passes over the batch and samples per minibatch (>= 1).
        clip_epsilon, value_clip_epsilon: ε of the policy ratio clip and of the value clip (> 0).
        value_coefficient, entropy_coefficient: ``c_v``, ``c_e`` (>= 0).
        max_grad_norm: bound on the total gradient norm of each step (> 0).
        normalize_advantages: standardise advantages per minibatch, ``(A - mean) / (std + 1e-8)`` with the
            population or the sample std (libraries use either); a minibatch of one sample gets advantage 0, never
            NaN.
        target_kl: optional early-stop threshold on an epoch's mean approximate KL (> 0).
        generator: the ``torch.Generator`` for the shuffles.

    Returns:
        Floats for logging: means over the minibatch steps taken of ``policy_loss``, ``value_loss``, ``entropy``
        and ``grad_norm`` (before clipping), each minibatch's measured before its step; ``approx_kl``,
        ``active_clip_fraction`` (judged with the batch's own advantages, not standardised ones) and
        ``ratio_outside_fraction`` of the updated policy against ``old_log_probs`` on the whole batch (one
        forward pass without gradient after the last epoch: how far this update moved the policy); and
        ``epochs_completed`` and ``minibatch_steps``.

    Raises:
        ValueError: a malformed batch or an out-of-range hyperparameter.
    """
    fields = ("observations", "actions", "old_log_probs", "old_values", "advantages", "returns")
    missing = [name for name in fields if not isinstance(getattr(batch, name, None), torch.Tensor)]
    if missing:
        raise ValueError(f"batch must be a RolloutBatch of tensors (kata.rl.ppo); missing or not tensors: "
                         f"{', '.join(missing)}")
    if batch.actions.ndim != 1 or batch.actions.shape[0] < 1:
        raise ValueError(f"batch.actions must be 1-D with at least one sample; got shape {tuple(batch.actions.shape)}")
    size = batch.actions.shape[0]
    if batch.observations.ndim != 2 or batch.observations.shape[0] != size:
        raise ValueError(f"batch.observations must be [{size}, obs]; got {tuple(batch.observations.shape)}")
    for name in fields[2:]:
        check_shape(f"batch.{name}", getattr(batch, name), (size,))
    check_integer("epochs", epochs, 1)
    check_integer("minibatch_size", minibatch_size, 1)
    check_positive("clip_epsilon", clip_epsilon)
    check_positive("value_clip_epsilon", value_clip_epsilon)
    check_positive("max_grad_norm", max_grad_norm)
    check_non_negative("value_coefficient", value_coefficient)
    check_non_negative("entropy_coefficient", entropy_coefficient)
    if target_kl is not None:
        check_positive("target_kl", target_kl)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator (it fixes the shuffles); got {type(generator).__name__}")
    # All parameters the optimizer steps (for the gradient-norm clip):
    #     parameters = [p for group in optimizer.param_groups for p in group["params"]]
    # log pi(a|s) of the batch's actions: action_log_probs(actor(observations), actions). The losses and
    # diagnostics, and the entropy, come from this package's clipped_surrogate module.
    raise not_implemented("ppo_update")


def train_ppo(config: PPOConfig) -> dict[str, Any]:
    """Train PPO on CartPole with this package's functions; see :func:`kata.rl.ppo.run_ppo` for the result.

    ``config`` comes from :func:`kata.rl.ppo.profile_config` (``dataclasses.replace`` changes any field). The result has
    ``final_evaluation_mean``, ``final_evaluation_std``, ``history`` (per update: ``update``,
    ``environment_steps``, ``approx_kl``, ``active_clip_fraction``, ``ratio_outside_fraction``, ``entropy``, the
    losses, ``explained_variance``, ``evaluation_mean`` where evaluated) and ``wall_time``.
    """
    # The frame's loop runs this module's functions, whatever they hold: a student's code, or the reference with a
    # catalogued patch applied.
    return run_ppo(config, gae_masks=gae_masks, bootstrap_values=bootstrap_values, gae_advantages=gae_advantages,
                   ppo_update=ppo_update)


def _flags(terminated: ArrayLike, truncated: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
    """``terminated`` and ``truncated`` as bool tensors of one shape ``[T]`` or time-major ``[T, N]``, T >= 1."""
    terminated_t = check_binary_mask("terminated", terminated)
    truncated_t = check_binary_mask("truncated", truncated)
    check_ndim("terminated", terminated_t, (1, 2))
    check_same_shape("terminated", terminated_t, truncated=truncated_t)
    if terminated_t.shape[0] == 0:
        raise ValueError("terminated must hold at least one time step; got shape (0, ...)")
    return terminated_t, truncated_t
