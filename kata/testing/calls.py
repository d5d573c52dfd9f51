"""Every failure shows the arguments the function was called with.

A test may change what Hypothesis drew before it calls the function (a λ set to 1, masks cleared, ids relabelled),
so the drawn example alone would show an input the function never received. The ``impl`` fixture therefore hands
the tests a :class:`NotedImplementation`: each call of a public function inside a Hypothesis test is noted, and
Hypothesis prints the notes of the smallest failing example under it ("gae_advantages was called with ..."), in a
form that pastes into a Python prompt. The arguments are formatted only for that example (``hypothesis.note``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from kata.concepts.impl import FRAME_EXPORTS, Implementation


_quiet = [0]  # calls made while explaining a failure (the witnesses of a reading) are not the call that failed


@contextlib.contextmanager
def unnoted() -> Iterator[None]:
    """Calls made inside this block are not noted: a failure's explanation calls the function on witnesses."""
    _quiet[0] += 1
    try:
        yield
    finally:
        _quiet[0] -= 1


def _in_a_hypothesis_test() -> bool:
    try:
        from hypothesis.control import currently_in_test_context
    except ImportError:  # an older Hypothesis: no notes
        return False
    return currently_in_test_context()


class _Call:
    """A call's arguments, formatted only when Hypothesis prints the note."""

    def __init__(self, name: str, args: tuple, kwargs: dict) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def __repr__(self) -> str:
        import numpy as np

        with np.printoptions(threshold=200, precision=17, floatmode="maxprec"):
            shown = [repr(value) for value in self.args] + [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"{self.name} was called with: {self.name}({', '.join(shown)})"


def noting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def noted(*args: Any, **kwargs: Any) -> Any:
        if not _quiet[0] and _in_a_hypothesis_test():
            from hypothesis import note

            note(_Call(name, args, kwargs))
        return function(*args, **kwargs)

    return noted


class NotedImplementation(Implementation):
    """An :class:`Implementation` whose public functions note each call made inside a Hypothesis test."""

    def __getattr__(self, name: str) -> Any:
        value = super().__getattr__(name)
        if name in FRAME_EXPORTS or not callable(value) or isinstance(value, type):
            return value
        return noting(name, value)


def noted(implementation: Implementation) -> Implementation:
    """``implementation`` with its calls noted: the same object, its class (ConceptViews included, whose modules
    live in a package of their own) given :class:`NotedImplementation`'s attribute access first."""
    kind = type(implementation)
    if not issubclass(kind, NotedImplementation):
        implementation.__class__ = type(f"Noted{kind.__name__}", (NotedImplementation, kind), {})
    return implementation
