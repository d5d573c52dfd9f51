"""The kata's shared package: what is neither an exercise nor an answer, laid out by role.

    arrays.py   what every implementation shares: NumPy in, NumPy out; tensor in, tensor out; the argument checks
    concepts/   the course data (course.toml: concepts, hints, mistakes, variants), the stub error, the loader
    rl/         the RL parts: CartPole with its actor and critic, the optimizer, the two loops, the sequence task
    testing/    what the concept tests run on: the pytest plugins, Hypothesis strategies, training verdicts
    student/    the student's tools: list, hint, status, check, watch
    lab/        the lab: the seed notebook's route as one command, its report and figures
    catalogue/  the instructor's catalogue: stub generator, mistakes, variants, diagnosis, selfcheck
    grading/    the instructor's grading: grader, limits, reports, Gradescope autograder, class report
    cli.py      the ``kata`` command, whose subcommands the tool packages add

Each package imports only the packages listed after it here; ``lint-imports`` (pyproject.toml) holds that. Nothing
here ever imports ``solutions`` on behalf of ``exercises``.

Here: :data:`PROFILES`, the sizes of a training run, and :func:`export_concepts`, the package-level names of
``exercises``, ``solutions`` and any folder laid out like them: course.toml's concepts' ``exports`` and the frame's
``frame_exports``, each imported only when first asked for, so a student whose ``gae.py`` does not import still gets
``from exercises import rloo_advantages``. They are read from the data file itself, not the course manifest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

COURSE_FILE = Path(__file__).parent / "concepts" / "course.toml"
PROFILES: tuple[str, ...] = ("smoke", "full")  # the sizes of a training run: a quick end-to-end run; every seed, longer


def export_map() -> dict[str, str]:
    """Public name -> the module that defines it: ``.<concept>`` (relative to the package) for each concept's
    exports, the module of kata/ for the frame's (course.toml's ``frame_exports``)."""
    import tomllib

    with open(COURSE_FILE, "rb") as stream:
        data = tomllib.load(stream)
    concepts = {public: f".{concept['name']}" for concept in data["concepts"] for public in concept["exports"]}
    return {**concepts, **data.get("frame_exports", {})}


def export_concepts(package_name: str) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for the package called ``package_name``."""
    where = export_map()

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name], package_name), name)
        raise AttributeError(f"module {package_name!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(where)

    return sorted(where), __getattr__, __dir__
