"""The fresh copy each grading run works in, and the per-concept views of a submission.

A run never sees this repository itself. It runs in a temporary folder holding a copy of what grading needs (the
``kata`` package, ``tests/``, ``conftest.py`` and the pytest configuration), without ``solutions/``, ``mistakes/``,
``variants/`` or ``exercises/``; the answers the submission is graded against are copied only into the views, under
a private package name. The copy is fingerprinted before and after the run, so a submission that changes the tests or
the grader's code is caught and reported, and cannot affect any other submission: the next run gets a fresh copy.

Per-concept views (the default): view ``C`` is the submission's folder with every concept module other than ``C``
replaced by the reference's, so concept ``C`` is graded on the student's ``C`` and the reference's concepts it builds
on. :func:`kata.concepts.impl.load` reads a folder of views (marked by :data:`kata.concepts.impl.VIEWS_MARKER`) and
resolves each public name in the view of the concept that exports it.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from kata.concepts.impl import REPOSITORY_ROOT, VIEWS_MARKER
from kata.concepts.manifest import CONCEPTS, Concept, concept
from kata.grading.results import printable

COPIED = ("tests", "conftest.py", "pyproject.toml", "pytest.ini")  # what a grading run needs, and the grader's kata
KATA_PACKAGE = Path(__file__).resolve().parents[1]
REFERENCE = "solutions"
NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", ".kata", ".hypothesis", "frame", "parity", "release")


def submission_files(source: Path, destination: Path) -> Path:
    """Copy a submission's Python files and packages (not its data, caches or other files) to ``destination``."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n == "__pycache__" or (not n.endswith(".py") and not (Path(folder) / n).is_dir())}

    shutil.copytree(source, destination, ignore=ignore, symlinks=False)
    return destination


def repository_copy(destination: Path, repository: Path = REPOSITORY_ROOT) -> Path:
    """What a grading run needs from ``repository`` (and this ``kata`` package), copied to ``destination``."""
    destination.mkdir(parents=True)
    shutil.copytree(KATA_PACKAGE, destination / "kata", ignore=NOT_COPIED)
    for name in COPIED:
        source = repository / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=NOT_COPIED)
        elif source.is_file():
            shutil.copy2(source, destination / name)
    return destination


def concept_views(submission: Path, destination: Path, concepts: Iterable[Concept],
                  reference: Path = REPOSITORY_ROOT / REFERENCE) -> Path:
    """A folder of views, one per concept: the submission with every other concept module the reference's."""
    destination.mkdir(parents=True)
    for graded in concepts:
        view = submission_files(submission, destination / graded.name)
        for other in CONCEPTS:
            if other.name != graded.name and (reference / f"{other.name}.py").exists():
                shutil.copy2(reference / f"{other.name}.py", view / f"{other.name}.py")
    (destination / VIEWS_MARKER).write_text("one folder per concept: the submission's own module for it, the "
                                            "reference's for every other\n")
    return destination


def layout_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be graded as a submission (one line, the concept modules expected), or None: it is not
    a folder, it is empty (hidden files aside), or it holds none of the concept modules."""
    expected = ", ".join(f"{c.name}.py" for c in CONCEPTS)
    shown = printable(folder)
    if not folder.is_dir():
        return f"{shown} is not a folder"
    if all(entry.name.startswith(".") for entry in folder.iterdir()):
        return f"{shown} is empty: nothing was handed in (expected the concept modules: {expected})"
    if not any((folder / f"{c.name}.py").exists() for c in CONCEPTS):
        return f"{shown} holds none of the concept modules ({expected})"
    return None


def fingerprint(root: Path) -> dict[str, str]:
    """SHA-256 of every file of a run's copy (caches aside: __pycache__, Hypothesis's .hypothesis), by relative
    path."""
    digests = {}
    for top in ("kata", *COPIED):
        for path in sorted([root / top] if (root / top).is_file() else (root / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digests[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files added, removed or changed between two fingerprints."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


@lru_cache(maxsize=None)
def _imports(reference: Path) -> dict[str, tuple[str, ...]]:
    """Per concept, the concepts its reference module imports from its own package (``from .gae import ...``)."""
    names = {c.name for c in CONCEPTS}
    found = {}
    for c in CONCEPTS:
        path = reference / f"{c.name}.py"
        tree = ast.parse(path.read_text()) if path.exists() else ast.Module(body=[], type_ignores=[])
        found[c.name] = tuple(sorted({node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                                      and node.level == 1 and node.module in names}))
    return found


def builds_on(name: str, reference: Path = REPOSITORY_ROOT / REFERENCE) -> tuple[str, ...]:
    """The concepts ``name`` builds on, directly or through another, in teaching order."""
    imports = _imports(reference)
    seen: set[str] = set()
    pending = list(imports[concept(name).name])
    while pending:
        current = pending.pop()
        if current not in seen:
            seen.add(current)
            pending.extend(imports[current])
    return tuple(c.name for c in CONCEPTS if c.name in seen)


def concepts_named(names: Sequence[str]) -> list[Concept]:
    return [concept(name) for name in names]
