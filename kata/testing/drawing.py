"""How the diagnosis's probe cases are drawn: from the tests' own strategies, the same examples on every run and in
every process, whatever modules a submission has imported (each concept's module of kata.testing.strategies says
which cases each of its functions gets). A draw is seeded by its name: a probe set keeps its cases while its name
stays."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

PROBES_PER_FUNCTION = 24
STRATEGY_SEED = 20261202


def only_global_constants() -> None:
    """Make Hypothesis draw from its own constants only, from now on in this process.

    Hypothesis (6.13x on) also draws constants it finds in the source of the local modules imported so far (any
    module outside site-packages and the standard library): the same derandomized test then runs other examples in
    this repository than in the student edition, the autograder or the Classroom workflow, and a student's own
    constants choose which examples grade them. conftest.py calls this before any test runs, and every probe draw
    calls it too: the examples depend on the test, its strategies and the profile, nothing else."""
    try:
        from hypothesis.internal.conjecture import providers
        empty = type(providers.GLOBAL_CONSTANTS)()
    except (ImportError, AttributeError):  # an older Hypothesis: no local constants
        return
    if getattr(providers._get_local_constants, "kata_shut", False):
        return

    def no_local_constants():
        return empty

    no_local_constants.kata_shut = True
    providers._get_local_constants = no_local_constants
    providers.CONSTANTS_CACHE.cache.clear()


def draw(strategy, count: int, name: str) -> list[Any]:
    """``count`` examples of ``strategy``, the same ones on every run: Hypothesis seeded by ``name``."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    examples: list[Any] = []

    @seed(STRATEGY_SEED + zlib.crc32(name.encode()))
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example):
        examples.append(example)

    only_global_constants()
    collect()
    return examples


def drawn(strategy, name: str, *, count: int = PROBES_PER_FUNCTION, extra: Callable[[], list[Any]] | None = None,
          build: Callable[[Any], Any] | None = None) -> Callable[[], list[Any]]:
    """The cases of a probe set, drawn when called: ``count`` examples of ``strategy`` (a strategy, or a function
    that returns one when called without arguments), each passed through ``build``, then ``extra()``. The draw is
    seeded by ``name + "()"``, the spelling of the call, as it has been since the probes were first drawn."""

    def cases() -> list[Any]:
        chosen = strategy() if callable(strategy) and not hasattr(strategy, "example") else strategy
        drawn = draw(chosen, count, name + "()")
        if build is not None:
            drawn = [build(case) for case in drawn]
        return drawn + (extra() if extra else [])

    return cases
