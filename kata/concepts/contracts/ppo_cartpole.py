"""Input checks for the `ppo_cartpole` concept."""

from __future__ import annotations

from functools import reduce
from typing import Any, NamedTuple

import torch

from kata.concepts.arrays import (
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_integer,
    check_ndim,
    check_non_negative,
    check_positive,
    check_same_shape,
    check_shape,
)


class FlagInputs(NamedTuple):
    terminated: torch.Tensor
    truncated: torch.Tensor


def flag_inputs(terminated: ArrayLike, truncated: ArrayLike) -> FlagInputs:
    """``terminated`` and ``truncated`` as bool tensors of one shape ``[T]`` or time-major ``[T, N]``, T >= 1."""
    terminated_t = check_binary_mask("terminated", terminated)
    truncated_t = check_binary_mask("truncated", truncated)
    check_ndim("terminated", terminated_t, (1, 2))
    check_same_shape("terminated", terminated_t, truncated=truncated_t)
    if terminated_t.shape[0] == 0:
        raise ValueError("terminated must hold at least one time step; got shape (0, ...)")
    return FlagInputs(terminated_t, truncated_t)


class BootstrapInputs(NamedTuple):
    values: torch.Tensor
    final_values: torch.Tensor
    last_values: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor


def bootstrap_inputs(values: ArrayLike, final_values: ArrayLike, last_values: ArrayLike, terminated: ArrayLike,
                     truncated: ArrayLike) -> BootstrapInputs:
    """Floating ``values``/``final_values`` ``[T]`` or ``[T, N]``, ``last_values`` ``[]`` or ``[N]``, flags alike."""
    terminated_t, truncated_t = flag_inputs(terminated, truncated)
    floats = [as_float_tensor(x, name) for x, name in
              ((values, "values"), (final_values, "final_values"), (last_values, "last_values"))]
    check_same_shape("terminated", terminated_t, values=floats[0], final_values=floats[1])
    check_shape("last_values", floats[2], tuple(terminated_t.shape[1:]), "one value per environment: V(observation "
                "after the rollout's last step)")
    dtype = reduce(torch.promote_types, (x.dtype for x in floats))
    values_t, final_t, last_t = (x.to(dtype) for x in floats)
    return BootstrapInputs(values_t, final_t, last_t, terminated_t, truncated_t)


class MinibatchInputs(NamedTuple):
    batch_size: int
    minibatch_size: int
    generator: torch.Generator


def minibatch_inputs(batch_size: int, minibatch_size: int, generator: Any) -> MinibatchInputs:
    size = check_integer("batch_size", batch_size, 1)
    minibatch = check_integer("minibatch_size", minibatch_size, 1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator (it fixes the shuffles); got {type(generator).__name__}")
    return MinibatchInputs(size, minibatch, generator)


_BATCH_FIELDS = ("observations", "actions", "old_log_probs", "old_values", "advantages", "returns")


class UpdateInputs(NamedTuple):
    batch: Any  # a kata.rl.ppo.RolloutBatch
    epochs: int
    minibatch_size: int
    clip_epsilon: float
    value_clip_epsilon: float
    value_coefficient: float
    entropy_coefficient: float
    max_grad_norm: float
    target_kl: float | None
    generator: torch.Generator


def update_inputs(batch: Any, epochs: int, minibatch_size: int, clip_epsilon: float, value_clip_epsilon: float,
                  value_coefficient: float, entropy_coefficient: float, max_grad_norm: float,
                  target_kl: float | None, generator: Any) -> UpdateInputs:
    """Check ``ppo_update``'s arguments: a RolloutBatch of matching tensors and valid hyperparameters."""
    missing = [name for name in _BATCH_FIELDS if not isinstance(getattr(batch, name, None), torch.Tensor)]
    if missing:
        raise ValueError(f"batch must be a RolloutBatch of tensors (kata.rl.ppo); missing or not tensors: "
                         f"{', '.join(missing)}")
    size = batch.actions.shape[0] if batch.actions.ndim == 1 else -1
    if size < 1:
        raise ValueError(f"batch.actions must be 1-D with at least one sample; got shape {tuple(batch.actions.shape)}")
    if batch.observations.ndim != 2 or batch.observations.shape[0] != size:
        raise ValueError(f"batch.observations must be [{size}, obs]; got {tuple(batch.observations.shape)}")
    for name in _BATCH_FIELDS[2:]:
        check_shape(f"batch.{name}", getattr(batch, name), (size,))
    epochs = check_integer("epochs", epochs, 1)
    minibatch_size = check_integer("minibatch_size", minibatch_size, 1)
    clip_epsilon = check_positive("clip_epsilon", clip_epsilon)
    value_clip_epsilon = check_positive("value_clip_epsilon", value_clip_epsilon)
    max_grad_norm = check_positive("max_grad_norm", max_grad_norm)
    value_coefficient = check_non_negative("value_coefficient", value_coefficient)
    entropy_coefficient = check_non_negative("entropy_coefficient", entropy_coefficient)
    if target_kl is not None:
        target_kl = check_positive("target_kl", target_kl)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator (it fixes the shuffles); got {type(generator).__name__}")
    return UpdateInputs(batch, epochs, minibatch_size, clip_epsilon, value_clip_epsilon, value_coefficient,
                        entropy_coefficient, max_grad_norm, target_kl, generator)
