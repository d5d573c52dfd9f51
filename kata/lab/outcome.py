"""What running one part of the lab gives (a value, a stub's skip, or an error), and its results as plain data."""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Outcome:
    """What running one part of the lab gave: its value, or why it has none (picklable, for worker processes)."""

    value: Any = None
    skipped: str | None = None  # the stub's (or the import error's) one-line message
    error: str | None = None  # "Type: message" and the end of the traceback


def guarded(function: Callable[..., Any], *args: Any) -> Outcome:
    """Run ``function(*args)``; a stub's NotImplementedError or a module that does not import becomes a skip."""
    from kata.concepts.impl import ImplementationImportError
    from kata.concepts.stub import is_stub_error

    try:
        return Outcome(value=function(*args))
    except NotImplementedError as error:
        if is_stub_error(error):
            return Outcome(skipped=str(error))
        return Outcome(error=error_text(error))
    except ImplementationImportError as error:
        return Outcome(skipped=str(error))
    except Exception as error:  # noqa: BLE001 - a student's bug must not stop the other sections
        return Outcome(error=error_text(error))


def error_text(error: BaseException) -> str:
    frames = traceback.format_tb(error.__traceback__)[-3:]
    return f"{type(error).__name__}: {error}\n" + "".join(frames).rstrip()


def skip_line(message: str) -> str:
    """``not implemented yet: gae_advantages — GUIDE.md §3 (...)`` -> ``skipped: gae_advantages is not
    implemented yet — GUIDE.md §3 (...)``; any other message is kept after ``skipped:``."""
    from kata.concepts.stub import NOT_IMPLEMENTED_PREFIX

    if message.startswith(NOT_IMPLEMENTED_PREFIX):
        name, dash, where = message[len(NOT_IMPLEMENTED_PREFIX):].strip().partition(" — ")
        if dash:
            return f"skipped: {name} is not implemented yet — {where}"
    return f"skipped: {message}"


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: arrays and tensors become lists, NumPy scalars numbers, NaN and inf None."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def float_array(values: Any) -> np.ndarray:
    """A float64 array of ``values`` in which None (a NaN in results.json) is NaN again."""
    return np.array([math.nan if v is None else v for v in np.asarray(values, dtype=object).ravel()],
                    dtype=np.float64).reshape(np.shape(values))


def as_numpy(value: Any) -> np.ndarray:
    """A tensor or array as a NumPy array (a tensor detached and on the CPU)."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)
