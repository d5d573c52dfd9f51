"""Comparisons the concept tests share: a failure caused only by dtype says so instead of blaming the arithmetic."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import torch

from kata.concepts.manifest import catalogued_mistake
from kata.testing.calls import unnoted


PRECISION = {np.float32: 1e-5, np.float64: 1e-9}  # rtol a result in that dtype meets (float32: a few ulps of sums)


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
          expected_dtype=np.float64, readings: dict[str, object] | Callable[[], dict[str, object]] | None = None,
          ) -> None:
    """``actual`` equals ``expected`` to ``rtol`` (relative, and absolute on the scale ``1 + max|expected|``).

    A failure's first line is ``message``, then what was found and what was expected (the whole values when they
    are small, else the first element that differs), then each of ``readings`` (a misreading's description -> the
    value it gives on this input, or a function that returns them, called only on failure) that the value found
    equals: a misreading is named only when the failure implies it. NumPy's full comparison follows on the next
    lines.

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
    except AssertionError as failure:
        narrower = dtype is not None and np.finfo(dtype).bits < np.finfo(expected_dtype).bits
        if narrower:
            loose = 4 * float(np.finfo(dtype).eps)
            if np.allclose(as_numpy(actual).astype(np.float64), expected, rtol=loose, atol=loose * scale):
                raise AssertionError(
                    f"{dtype} where {np.dtype(expected_dtype)} was expected: the values agree to {dtype} precision, "
                    f"so the arithmetic is right but it ran (or was cast) in {dtype}; keep the inputs' dtype "
                    f"(what was checked: {message})"
                ) from None
        line = f"{message} ({found_and_expected(actual, expected, rtol, rtol * scale)})"
        if callable(readings):
            readings = readings()
        line += which_reading(actual, expected, readings or {}, rtol=max(rtol, 1e-9), atol=max(rtol * scale, 1e-12))
        raise AssertionError(f"{line}\n{failure}") from None


def mistake(entry: str) -> str:
    """A reading's description for the catalogued mistake ``"concept/name"``: its misunderstanding in the words of
    kata/concepts/course.toml, the one place it is written (``kata diagnose`` and the class report quote it too).

    A reading keyed by this is named only as the others are, when the value found is that mistake's value on the
    input; a reading no catalogued mistake computes keeps a description of its own.
    """
    return f"what the catalogued mistake '{catalogued_mistake(entry).misunderstanding}' gives"


SMALL = 6  # values of at most this many elements are shown whole in a failure's first line


def found_and_expected(actual, expected, rtol: float = 1e-9, atol: float = 1e-9) -> str:
    """``"found [1, 2], expected [2, 1]"``; for larger values the first element that differs and how many do."""
    try:
        found = np.asarray(as_numpy(actual), dtype=np.float64)
        wanted = np.asarray(expected, dtype=np.float64)
    except (TypeError, ValueError):
        return f"found {plain(actual)}, expected {plain(expected)}"
    if found.shape != wanted.shape:
        try:
            wanted = np.broadcast_to(wanted, found.shape)
        except ValueError:
            return f"found shape {found.shape}, expected shape {wanted.shape}"
        if found.size <= SMALL:
            return f"found {distinct(found, wanted)}, expected {plain(np.asarray(expected))}"
    if found.size <= SMALL:
        return f"found {distinct(found, wanted)}, expected {distinct(wanted, found)}"
    with np.errstate(invalid="ignore"):
        differs = ~np.isclose(found, wanted, rtol=rtol, atol=atol)
    index = tuple(int(i) for i in np.argwhere(differs)[0]) if differs.any() else ()
    where = ", ".join(map(str, index))
    return (f"found {distinct(found[index], wanted[index])}, expected {distinct(wanted[index], found[index])} at "
            f"[{where}]; {int(differs.sum())} of {found.size} elements differ")


def distinct(value, other) -> str:
    """``value`` by :func:`plain`, with as many digits as it takes to read differently from ``other``."""
    for digits in (6, 9, 12, 17):
        if plain(value, digits) != plain(other, digits):
            break
    return plain(value, digits)


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


def matching(actual, expected, readings: dict[str, object], rtol: float = 1e-9, atol: float = 1e-12) -> list[str]:
    """The readings (a description -> the value it gives) that ``actual`` equals and ``expected`` does not.

    A reading is named in a message only when the value found is that reading's value on this very input: the
    failure then implies it. Readings of another shape than ``actual``, and readings with no finite element, never
    match.
    """
    found, wanted = np.asarray(as_numpy(actual), dtype=np.float64), np.asarray(expected, dtype=np.float64)
    names = []
    for name, value in readings.items():
        value = np.asarray(as_numpy(value), dtype=np.float64)
        if not np.isfinite(value).any():
            continue  # NaN matches NaN, but a reading that is nothing but NaN or inf says nothing
        if (value.shape == found.shape and np.allclose(found, value, rtol=rtol, atol=atol, equal_nan=True)
                and not (value.shape == wanted.shape and np.allclose(wanted, value, rtol=rtol, atol=atol))):
            names.append(name)
    return names


def which_reading(actual, expected, readings: dict[str, object], rtol: float = 1e-9, atol: float = 1e-12,
                  lead: str = "; it equals ") -> str:
    """``lead`` + the matching readings (:func:`matching`), or "" when none matches; on a small input several
    readings may give the same value, and each is named."""
    names = matching(actual, expected, readings, rtol, atol)
    return (lead + "; equally, ".join(names)) if names else ""


def confirmed_readings(function: Callable[..., object], readings_of: Callable[[dict], dict[str, object]],
                       case: dict, witnesses: list[dict], rtol: float = 1e-7, atol: float = 1e-9,
                       ) -> dict[str, object]:
    """The readings of ``case`` (``readings_of(case)``: a description -> its value) that ``function`` also gives
    on every one of ``witnesses``, inputs on which the readings differ from one another and from the contract.

    On a small shrunk input two readings, or a reading and another mistake, often give the same value; a match
    there is a coincidence. A reading that ``function`` reproduces on the witnesses as well is what the code does.
    Called only on failure (pass ``lambda: confirmed_readings(...)`` to :func:`close`).
    """
    with unnoted():  # the witnesses' calls are not the call that failed (kata.testing.calls)
        return _confirmed(function, readings_of, case, witnesses, rtol, atol)


def _confirmed(function, readings_of, case: dict, witnesses: list[dict], rtol: float, atol: float) -> dict[str, object]:
    candidates = readings_of(case)
    confirmed = {}
    for name, value in candidates.items():
        for witness in witnesses:
            try:
                found = np.asarray(as_numpy(function(**witness)), dtype=np.float64)
            except Exception:  # a function that fails on a witness confirms nothing
                break
            wanted = np.asarray(as_numpy(readings_of(witness)[name]), dtype=np.float64)
            if found.shape != wanted.shape or not np.allclose(found, wanted, rtol=rtol, atol=atol, equal_nan=True):
                break
        else:
            confirmed[name] = value
    return confirmed


LOSES_AUTOGRAD = ("for example, a result computed through NumPy, .item() or float(), rebuilt with torch.tensor(...) "
                  "from numbers, or .detach()ed loses autograd")


def assert_differentiable(value, what: str, inputs: str) -> None:
    """Before ``backward()``: ``value`` is a tensor that carries autograd back to ``inputs`` (which require grad).

    Without this check a result that lost its graph fails inside torch ("element 0 of tensors does not require
    grad"), which says nothing about the function under test.
    """
    if not isinstance(value, torch.Tensor):
        raise AssertionError(f"{what} is a {type(value).__name__}, expected a tensor: a tensor in must give a tensor "
                             f"out, with autograd back to {inputs}")
    if not value.requires_grad:
        raise AssertionError(f"{what}: requires_grad is False although {inputs} requires grad, so no gradient can "
                             f"flow back to {inputs} ({LOSES_AUTOGRAD})")


def gradient(tensor: torch.Tensor, name: str) -> np.ndarray:
    """``tensor.grad`` as NumPy after ``backward()``; a readable failure when no gradient reached ``tensor``."""
    if tensor.grad is None:
        raise AssertionError(f"no gradient reached {name}: the result does not depend on it through autograd")
    return tensor.grad.detach().cpu().numpy()


def word(name: str) -> str:
    """A pattern for ``name`` standing in a message as a word of its own (not inside another name)."""
    return rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])"


def blames(argument: str, *facts: str) -> str:
    """A pattern for a ValueError that names ``argument`` first, then states each of ``facts`` (what was expected,
    what was given) in that order, in whatever words: the contract is the argument and the facts, not the phrasing.
    A fact that is a name (another argument, a field) must stand as a word of its own."""
    return "^" + word(argument) + "".join(
        r"[\s\S]*" + (word(fact) if fact.isidentifier() else re.escape(fact)) for fact in facts)
