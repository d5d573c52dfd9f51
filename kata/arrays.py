"""Arrays in, arrays out, and the argument checks every implementation shares.

The lab passes NumPy arrays; the training loops pass torch tensors that must keep their gradients. Every concept
function therefore converts its inputs with :func:`as_tensor`, computes in torch, and hands its result back with
:func:`like_inputs`: NumPy in, NumPy out; a tensor in, a tensor out (with autograd intact).

The checks raise ``ValueError`` naming the argument and what was expected. None of them copies or changes its
input, and no concept function may change its inputs in place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

ArrayLike = Any  # np.ndarray | torch.Tensor | nested lists of numbers


def any_tensor(*values: Any) -> bool:
    """True if any of ``values`` is a torch tensor: the caller then gets tensors back."""
    return any(isinstance(value, torch.Tensor) for value in values)


def as_tensor(value: ArrayLike, name: str, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``value`` as a tensor (no copy where none is needed; gradients kept).

    NumPy floating arrays keep their precision (float64 stays float64); Python lists become float64 unless
    ``dtype`` says otherwise. Anything that is not numeric array data is a ValueError naming ``name``.
    """
    if isinstance(value, torch.Tensor):
        tensor = value
    else:
        try:
            array = np.asarray(value)
        except Exception as error:  # ragged lists and the like
            raise ValueError(f"{name} must be an array of numbers; got {type(value).__name__}") from error
        if array.dtype == object or not (
            np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)
        ):
            raise ValueError(f"{name} must be an array of numbers; got dtype {array.dtype}")
        if isinstance(value, (list, tuple)) and np.issubdtype(array.dtype, np.floating):
            array = array.astype(np.float64)
        usable = array.flags.c_contiguous and min(array.strides, default=0) >= 0  # from_numpy: C order, no stride < 0
        tensor = torch.from_numpy(array if usable else np.array(array, order="C"))  # ascontiguousarray makes 0-d 1-d
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor


def as_float_tensor(value: ArrayLike, name: str, *, like: torch.Tensor | None = None) -> torch.Tensor:
    """``value`` as a floating tensor: integer and boolean input becomes ``like``'s float dtype (else float64)."""
    tensor = as_tensor(value, name)
    if not torch.is_floating_point(tensor):
        target = like.dtype if like is not None and torch.is_floating_point(like) else torch.float64
        tensor = tensor.to(target)
    return tensor


def as_token_ids(value: ArrayLike, name: str) -> torch.Tensor:
    """``value`` as an int64 tensor of token ids; boolean, floating or complex data is a ValueError naming ``name``."""
    tensor = as_tensor(value, name)
    if tensor.dtype == torch.bool or torch.is_floating_point(tensor) or torch.is_complex(tensor):
        raise ValueError(f"{name} must hold integer token ids; got dtype {tensor.dtype}")
    return tensor.to(torch.int64)


def like_inputs(result: Any, *inputs: Any) -> Any:
    """``result`` (a tensor, or a tuple of them) as NumPy unless one of ``inputs`` was a tensor."""
    if any_tensor(*inputs):
        return result
    if isinstance(result, tuple):
        return tuple(like_inputs(part, *inputs) for part in result)
    if isinstance(result, torch.Tensor):
        return result.detach().cpu().numpy()
    return result


def to_numpy(value: ArrayLike) -> np.ndarray:
    """A NumPy view of ``value`` (detached from autograd) for code that only reads it."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


# ---------------------------------------------------------------------------------------------------------------
# Argument checks: each raises ValueError("<argument> ...: expected ..., got ...").
# ---------------------------------------------------------------------------------------------------------------


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape)


def check_ndim(name: str, value: Any, allowed: Sequence[int]) -> None:
    if value.ndim not in allowed:
        expected = " or ".join(f"{n}-D" for n in allowed)
        raise ValueError(f"{name} must be {expected}; got shape {_shape(value)}")


def check_same_shape(reference_name: str, reference: Any, **others: Any) -> None:
    """Every array in ``others`` has exactly ``reference``'s shape (no broadcasting)."""
    for name, value in others.items():
        if _shape(value) != _shape(reference):
            raise ValueError(
                f"{name} must have the same shape as {reference_name} {_shape(reference)}; got {_shape(value)}"
            )


def check_shape(name: str, value: Any, expected: tuple[int, ...], what: str = "") -> None:
    if _shape(value) != tuple(expected):
        because = f" ({what})" if what else ""
        raise ValueError(f"{name} must have shape {tuple(expected)}{because}; got {_shape(value)}")


def check_binary_mask(name: str, value: Any) -> torch.Tensor:
    """``value`` is boolean or holds only 0 and 1; returns it as a bool tensor."""
    tensor = as_tensor(value, name)
    if tensor.dtype == torch.bool:
        return tensor
    if torch.is_floating_point(tensor) and not torch.isfinite(tensor).all():
        raise ValueError(f"{name} must hold only 0/1 or booleans; got non-finite values")
    if not ((tensor == 0) | (tensor == 1)).all():
        bad = tensor[(tensor != 0) & (tensor != 1)].flatten()[0].item()
        raise ValueError(f"{name} must hold only 0/1 or booleans; got the value {bad}")
    return tensor != 0


def check_finite(name: str, value: Any) -> None:
    tensor = value if isinstance(value, torch.Tensor) else as_tensor(value, name)
    if torch.is_floating_point(tensor) and not torch.isfinite(tensor.detach()).all():
        raise ValueError(f"{name} must be finite; got NaN or infinity")


def check_probability(name: str, value: float) -> float:
    """A number in [0, 1] (a discount, a trace decay)."""
    number = _scalar(name, value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must be in [0, 1]; got {number}")
    return number


def check_positive(name: str, value: float) -> float:
    number = _scalar(name, value)
    if not number > 0.0:
        raise ValueError(f"{name} must be > 0; got {number}")
    return number


def check_non_negative(name: str, value: float) -> float:
    number = _scalar(name, value)
    if not number >= 0.0:
        raise ValueError(f"{name} must be >= 0; got {number}")
    return number


def check_integer(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}")
    return int(value)


def check_choice(name: str, value: Any, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(repr(v) for v in valid)}; got {value!r}")
    return value


# How a batch of responses' token objective may be reduced to a scalar: token_objectives and rloo_loop accept each,
# the RLOO loop and the lab offer them.
REDUCTIONS: tuple[str, ...] = ("token_mean", "sequence_mean", "sequence_sum_mean")


def _scalar(name: str, value: Any) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number; got {value!r}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{name} must be a number; got NaN")
    return number
