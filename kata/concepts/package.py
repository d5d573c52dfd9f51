"""Package-level exports for ``exercises``, ``solutions`` and any folder laid out like them.

A package's ``__init__`` calls :func:`export_concepts`: its public names are each concept's ``exports`` in
course.toml, and each is imported from its concept module only when first asked for. A student whose ``gae.py`` does
not import still gets ``from exercises import rloo_advantages``, and the tests of every other concept still run.
The names are read from the data file itself: importing a package does not build the manifest (kata.concepts.manifest,
which checks the same file whole) for them.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

COURSE_FILE = Path(__file__).with_name("course.toml")


def export_map() -> dict[str, str]:
    """Public name -> concept module name, for every concept of course.toml."""
    with open(COURSE_FILE, "rb") as stream:
        concepts = tomllib.load(stream)["concepts"]
    return {public: concept["name"] for concept in concepts for public in concept["exports"]}


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
