"""How the diagnosis's probe cases are drawn: from the tests' own strategies, the same examples on every run and in
every process, whatever modules a submission has imported (each concept's module of kata.testing.strategies says
which cases each of its functions gets). A draw is seeded by its name: a probe set keeps its cases while its name
stays."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from typing import Any

PROBES_PER_FUNCTION = 24
STRATEGY_SEED = 20261202


@contextlib.contextmanager
def _only_global_constants():
    """Hypothesis (6.13x on) also draws constants it finds in the local modules imported so far, so the same seed
    would give other examples after a submission's modules are imported. Probes must not depend on that: while
    drawing, the local constants are empty."""
    try:
        from hypothesis.internal.conjecture import providers
        local, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
        empty = type(providers.GLOBAL_CONSTANTS)()
    except (ImportError, AttributeError):  # an older Hypothesis: no local constants
        yield
        return
    cache.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = local
        cache.cache.clear()


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

    with _only_global_constants():
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
