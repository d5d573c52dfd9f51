"""Input checks for the `clipped_surrogate` concept."""

from __future__ import annotations

from functools import reduce
from typing import NamedTuple

import torch

from kata.concepts.arrays import ArrayLike, as_float_tensor, check_non_negative, check_positive, check_same_shape


def _same_shape_floats(reference: tuple[str, ArrayLike], *others: tuple[str, ArrayLike]) -> list[torch.Tensor]:
    """Floating tensors of ``reference``'s shape (no broadcasting), non-empty, promoted to one dtype."""
    given = [reference[1], *(value for _, value in others)]
    # The training loops' case, every minibatch: tensors that already agree pass through untouched.
    if all(isinstance(value, torch.Tensor) for value in given) and _agree(given):
        return given
    first = as_float_tensor(reference[1], reference[0])
    if first.numel() == 0:
        raise ValueError(f"{reference[0]} must hold at least one value; got shape {tuple(first.shape)}")
    rest = [as_float_tensor(value, name, like=first) for name, value in others]
    check_same_shape(reference[0], first, **{name: tensor for (name, _), tensor in zip(others, rest, strict=True)})
    tensors = [first, *rest]
    dtype = reduce(torch.promote_types, (t.dtype for t in tensors))
    return [t.to(dtype) for t in tensors]


def _agree(tensors: list[torch.Tensor]) -> bool:
    first = tensors[0]
    return (first.is_floating_point() and first.numel() > 0
            and all(t.dtype == first.dtype and t.shape == first.shape for t in tensors[1:]))


class RatioInputs(NamedTuple):
    new_log_probs: torch.Tensor
    old_log_probs: torch.Tensor


def ratio_inputs(new_log_probs: ArrayLike, old_log_probs: ArrayLike) -> RatioInputs:
    """New and old log-probabilities: floating tensors of one shape and dtype (autograd kept)."""
    return RatioInputs(*_same_shape_floats(("new_log_probs", new_log_probs), ("old_log_probs", old_log_probs)))


class SurrogateInputs(NamedTuple):
    new_log_probs: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    clip_epsilon: float


def surrogate_inputs(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, clip_epsilon: float
) -> SurrogateInputs:
    """New and old log-probabilities and advantages of one shape and dtype, and ``clip_epsilon > 0``."""
    new, old, adv = _same_shape_floats(
        ("new_log_probs", new_log_probs), ("old_log_probs", old_log_probs), ("advantages", advantages)
    )
    return SurrogateInputs(new, old, adv, check_positive("clip_epsilon", clip_epsilon))


class ValueInputs(NamedTuple):
    values: torch.Tensor
    old_values: torch.Tensor
    returns: torch.Tensor
    clip_epsilon: float


def value_inputs(values: ArrayLike, old_values: ArrayLike, returns: ArrayLike, clip_epsilon: float) -> ValueInputs:
    """Values, old values and returns of one shape and dtype, and ``clip_epsilon > 0``."""
    new, old, ret = _same_shape_floats(("values", values), ("old_values", old_values), ("returns", returns))
    return ValueInputs(new, old, ret, check_positive("clip_epsilon", clip_epsilon))


def _scalar_tensor(name: str, value: ArrayLike) -> torch.Tensor:
    tensor = as_float_tensor(value, name)
    if tensor.ndim == 0:
        return tensor
    if tensor.numel() != 1:
        raise ValueError(f"{name} must be a scalar (one number); got shape {tuple(tensor.shape)}")
    return tensor.reshape(())


class PPOLossInputs(NamedTuple):
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    value_coefficient: float
    entropy_coefficient: float


def ppo_loss_inputs(
    policy_loss: ArrayLike,
    value_loss: ArrayLike,
    entropy: ArrayLike,
    value_coefficient: float,
    entropy_coefficient: float,
) -> PPOLossInputs:
    """Two scalar losses, a non-empty entropy array, and non-negative coefficients; tensors in one dtype."""
    policy = _scalar_tensor("policy_loss", policy_loss)
    value = _scalar_tensor("value_loss", value_loss)
    entropy_t = as_float_tensor(entropy, "entropy")
    if entropy_t.numel() == 0:
        raise ValueError(f"entropy must hold at least one value; got shape {tuple(entropy_t.shape)}")
    dtype = reduce(torch.promote_types, (policy.dtype, value.dtype, entropy_t.dtype))
    return PPOLossInputs(
        policy.to(dtype),
        value.to(dtype),
        entropy_t.to(dtype),
        check_non_negative("value_coefficient", value_coefficient),
        check_non_negative("entropy_coefficient", entropy_coefficient),
    )
