"""Package-level exports for ``exercises``, ``solutions`` and any folder laid out like them.

A package's ``__init__`` calls :func:`export_concepts`: its public names are the manifest's, and each is imported
from its concept module only when first asked for. A student whose ``gae.py`` does not import still gets
``from exercises import rloo_advantages``, and the tests of every other concept still run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kata.concepts.manifest import CONCEPTS


def export_map() -> dict[str, str]:
    """Public name -> concept module name, for every concept in the manifest."""
    return {public: concept.name for concept in CONCEPTS for public in concept.exports}


def export_concepts(package_name: str) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for the package called ``package_name``."""
    where = export_map()

    def __getattr__(name: str) -> Any:
        if name in where:
            module = importlib.import_module(f"{package_name}.{where[name]}")
            return getattr(module, name)
        raise AttributeError(f"module {package_name!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(where)

    return sorted(where), __getattr__, __dir__
