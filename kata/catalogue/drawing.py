"""How the diagnosis's probe cases are drawn: from the tests' own strategies, the same examples on every run and in
every process, whatever modules a submission has imported (kata.catalogue.probes says which cases each function
gets)."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable
from typing import Any

PROBES_PER_FUNCTION = 24
STRATEGY_SEED = 20261202


def strategies():
    from kata.testing import strategies

    return strategies


def strategy_named(name: str):
    """The strategy ``name`` of kata.testing.probe_strategies (the probes' own), else of kata.testing.strategies."""
    from kata.testing import probe_strategies

    return getattr(probe_strategies, name) if hasattr(probe_strategies, name) else getattr(strategies(), name)


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


def drawn(strategy_name: str, *, count: int = PROBES_PER_FUNCTION, extra: Callable[[], list[Any]] | None = None,
          arguments: tuple = (), build: Callable[[Any], Any] | None = None) -> Callable[[], list[Any]]:
    """Cases from the strategy ``strategy_name`` (``(*arguments)`` applied, or the strategy itself), then
    ``extra()``."""

    def cases() -> list[Any]:
        strategy = strategy_named(strategy_name)
        if arguments or callable(strategy) and not hasattr(strategy, "example"):
            strategy = strategy(*arguments)
        drawn = draw(strategy, count, strategy_name + repr(arguments))
        if build is not None:
            drawn = [build(case) for case in drawn]
        return drawn + (extra() if extra else [])

    return cases
