"""Comparisons the concept tests share: a failure caused only by dtype says so instead of blaming the arithmetic."""

from __future__ import annotations

import numpy as np
import torch


def dtype_of(value) -> np.dtype | None:
    """The floating dtype of ``value`` (NumPy or torch), None for anything else (a Python float, an int array)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy() if value.dtype != torch.bfloat16 else value.detach().float().numpy()
    dtype = getattr(value, "dtype", None)
    return dtype if dtype is not None and np.issubdtype(dtype, np.floating) else None


def as_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def close(actual, expected, message: str, rtol: float = 1e-9, *, any_float: bool = False,
          expected_dtype=np.float64) -> None:
    """``actual`` equals ``expected`` to ``rtol`` (relative, and absolute on the scale ``1 + max|expected|``).

    ``expected_dtype`` is the dtype the contract asks for. When ``actual`` is in a narrower floating dtype and agrees
    at that dtype's precision, the failure names the dtype ("float32 where float64 was expected"), not the formula.
    ``any_float``: the contract allows any floating dtype (a fraction k/N): compare at the precision of the dtype
    returned.
    """
    expected = np.asarray(expected, dtype=np.float64)
    scale = 1.0 + np.abs(expected).max(initial=0.0)
    dtype = dtype_of(actual)
    if any_float and dtype is not None:
        rtol = max(rtol, 4 * float(np.finfo(dtype).eps))
    try:
        np.testing.assert_allclose(as_numpy(actual), expected, rtol=rtol, atol=rtol * scale, err_msg=message)
    except AssertionError:
        narrower = dtype is not None and np.finfo(dtype).bits < np.finfo(expected_dtype).bits
        if narrower:
            loose = 4 * float(np.finfo(dtype).eps)
            if np.allclose(as_numpy(actual).astype(np.float64), expected, rtol=loose, atol=loose * scale):
                raise AssertionError(
                    f"{dtype} where {np.dtype(expected_dtype)} was expected: the values agree to {dtype} precision, "
                    f"so the arithmetic is right but it ran (or was cast) in {dtype}; keep the inputs' dtype "
                    f"(what was checked: {message})"
                ) from None
        raise


def plain(value, digits: int = 6) -> str:
    """``value`` as a reader writes it: ``1``, ``0.5``, ``[0, 1, 1]``, never ``np.int64(1)`` or ``tensor(0.5000)``.

    NumPy and torch scalars and arrays, Python numbers, lists and tuples of them; floats to ``digits`` significant
    digits; anything else by ``str``.
    """
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().float().numpy() if value.dtype == torch.bfloat16 else value.detach().cpu().numpy()
    if isinstance(value, (list, tuple)) and not value:
        return "[]"
    if not isinstance(value, (np.ndarray, np.generic, list, tuple, bool, int, float)):
        return str(value)
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind not in "biuf":
        return str(value)
    if array.ndim:
        return "[" + ", ".join(plain(item, digits) for item in array) + "]"
    item = array.item()
    if isinstance(item, float):
        return f"{item:.{digits}g}"
    return str(item)
