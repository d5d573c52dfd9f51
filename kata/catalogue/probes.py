"""The probe inputs `kata diagnose` runs each public function on, and what it observes of each call, collected from
the concepts themselves.

Each concept's module of kata/testing/strategies/ (the course's concept names, kata.concepts.manifest, say which)
ends with ``PROBES``, one ``Probes`` per public function: its cases, drawn once with a fixed seed from the
strategies the tests use plus boundary cases where catalogued mistakes part from the reference, the name of the
observer that observes a call, and which tolerance applies; and with ``UNPROBED``, the functions that have none (they
train an agent, or the frame provides them) and why. Here each becomes a ``ProbeSet``, whose ``observe(function,
case)``, one of the observers of kata.catalogue.observations wrapped by its ``guarded``, calls the function on a
fresh copy of the case and returns what can be compared across implementations: values, gradients where a mistake is
about them, and for the functions that draw random numbers or update networks only what does not depend on the
random stream (that module's docstring says what exactly).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kata.catalogue.observations import Observation, guarded, observer
from kata.concepts.manifest import CONCEPTS, Concept
from kata.testing.strategies import Probes

STRATEGIES = "kata.testing.strategies"  # the package of the concepts' strategy modules, one per concept name
TOLERANCE = dict(rtol=1e-6, atol=1e-9)
TRAINING_TOLERANCE = dict(rtol=1e-4, atol=1e-6)  # float32 networks: summation order moves the last bits


@dataclass(frozen=True)
class ProbeSet:
    """The probes of one public function."""

    function: str
    concept: str
    draw_cases: Callable[[], list[Any]] = field(repr=False)
    observe: Callable[[Callable[..., Any], Any], Observation] = field(repr=False)
    rtol: float = TOLERANCE["rtol"]
    atol: float = TOLERANCE["atol"]

    def cases(self) -> list[Any]:
        return _cached_cases(self.function, self.draw_cases)


_CASES: dict[str, list[Any]] = {}


def _cached_cases(function: str, draw_cases: Callable[[], list[Any]]) -> list[Any]:
    if function not in _CASES:
        _CASES[function] = draw_cases()
    return _CASES[function]


def probe_set(concept_name: str, probes: Probes) -> ProbeSet:
    """The probe set that ``probes`` (data) describes, for a function of the concept ``concept_name``."""
    observe = guarded(observer(probes.observer, probes.gradients, probes.kinds))
    tolerance = TRAINING_TOLERANCE if probes.training else TOLERANCE
    return ProbeSet(probes.function, concept_name, probes.cases, observe, **tolerance)


def collect(concepts: Iterable[Concept] = CONCEPTS) -> tuple[tuple[ProbeSet, ...], dict[str, str]]:
    """Every probe set of ``concepts``, in teaching order, and every function they leave unprobed with the reason:
    each concept's ``PROBES`` and ``UNPROBED``, from its module of kata.testing.strategies. ValueError names a
    function probed twice or both probed and unprobed."""
    sets: list[ProbeSet] = []
    unprobed: dict[str, str] = {}
    for c in concepts:
        module = importlib.import_module(f"{STRATEGIES}.{c.name}")
        sets += [probe_set(c.name, probes) for probes in module.PROBES]
        unprobed.update(module.UNPROBED)
    names = [probe.function for probe in sets]
    twice = sorted({name for name in names if names.count(name) > 1} | (set(names) & set(unprobed)))
    if twice:
        raise ValueError(f"concepts: {', '.join(twice)} has more than one probe set, or is also in UNPROBED")
    return tuple(sets), unprobed


PROBE_SETS, UNPROBED = collect()
PROBES: dict[str, ProbeSet] = {probe.function: probe for probe in PROBE_SETS}
