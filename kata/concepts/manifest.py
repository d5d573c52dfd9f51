"""The course as the tools read it: the concepts of kata/concepts/course.toml, in teaching order.

The data file is the one place where a concept's title, points, public names, hints, mistakes and variants are
written. What can be derived is derived here and nowhere else: a concept's number is its place in the file, its
section of the study guide is ``GUIDE.md §<number>``, and the point total is the sum of the points. The command
line, the grader, the packages' exports, the pytest markers, the catalogues and the guide's headings all read it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kata import COURSE_FILE

GUIDE = "GUIDE.md"


@dataclass(frozen=True)
class Mistake:
    """A wrong implementation kept in ``mistakes/<concept>/<name>.diff``; the concept's tests must catch it."""

    name: str
    misunderstanding: str  # what a student whose code behaves like this one misunderstood, in a phrase
    hint: int  # the level of `kata hint <concept>` that addresses it (1-based)


@dataclass(frozen=True)
class Variant:
    """A valid implementation kept in ``variants/<concept>/<name>.diff``; every test of the concept must pass on it."""

    name: str
    summary: str  # what it does differently from the reference
    reason: str  # why it is valid: why every test must accept it


@dataclass(frozen=True)
class Concept:
    number: int  # its place in the course, from 1
    name: str  # module name in exercises/ and solutions/, test module tests/test_<name>.diff, and the pytest marker
    title: str
    points: float
    exports: tuple[str, ...]  # public names the concept module defines; the package re-exports them
    hints: tuple[str, ...]  # from a gentle nudge to nearly the answer
    mistakes: tuple[Mistake, ...]
    variants: tuple[Variant, ...] = ()

    @property
    def guide_section(self) -> str:
        """``GUIDE.md §3``: where the study guide explains the concept."""
        return f"{GUIDE} §{self.number}"

    @property
    def guide_heading(self) -> str:
        """The concept's heading in GUIDE.md (after ``## ``)."""
        return f"{self.number}. {self.title}"

    @property
    def guide_anchor(self) -> str:
        """The heading's anchor as GitHub renders it (lower case, punctuation dropped, spaces to hyphens)."""
        slug = re.sub(r"[^\w\- ]", "", self.guide_heading.lower())
        return slug.replace(" ", "-")


def prose(text: str) -> str:
    """A text of the data file as one line: its line breaks and runs of spaces read as one space."""
    return " ".join(text.split())


def load_course(path: Path = COURSE_FILE) -> tuple[Concept, ...]:
    """The concepts of the data file at ``path``, numbered in order; ValueError names what is malformed."""
    with open(path, "rb") as stream:
        data: dict[str, Any] = tomllib.load(stream)
    concepts = []
    for number, entry in enumerate(data.get("concepts", []), start=1):
        try:
            concepts.append(Concept(
                number=number,
                name=entry["name"],
                title=prose(entry["title"]),
                points=float(entry["points"]),
                exports=tuple(entry["exports"]),
                hints=tuple(prose(hint) for hint in entry["hints"]),
                mistakes=tuple(Mistake(m["name"], prose(m["misunderstanding"]), int(m["hint"]))
                               for m in entry.get("mistakes", [])),
                variants=tuple(Variant(v["name"], prose(v["summary"]), prose(v["reason"]))
                               for v in entry.get("variants", [])),
            ))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: concept {number} ({entry.get('name', '?')}) is malformed: "
                             f"{type(error).__name__} {error}") from None
    names = [c.name for c in concepts]
    if not concepts or len(set(names)) != len(names):
        raise ValueError(f"{path}: expected one or more concepts with distinct names; got {names}")
    return tuple(concepts)


def load_frame_exports(path: Path = COURSE_FILE) -> dict[str, str]:
    """The frame's public names that every package exports, each with the module of kata/ that defines it."""
    with open(path, "rb") as stream:
        return dict(tomllib.load(stream).get("frame_exports", {}))


CONCEPTS: tuple[Concept, ...] = load_course()
FRAME_EXPORTS: dict[str, str] = load_frame_exports()
CONCEPTS_BY_NAME: dict[str, Concept] = {concept.name: concept for concept in CONCEPTS}
MAX_POINTS: float = float(sum(concept.points for concept in CONCEPTS))


def concept(name: str) -> Concept:
    """The concept called ``name``; a ValueError lists the valid names otherwise."""
    try:
        return CONCEPTS_BY_NAME[name]
    except KeyError:
        valid = ", ".join(c.name for c in CONCEPTS)
        raise ValueError(f"unknown concept {name!r}; expected one of: {valid}") from None


def concept_of_export(public_name: str) -> Concept:
    """The concept whose module defines ``public_name``."""
    for candidate in CONCEPTS:
        if public_name in candidate.exports:
            return candidate
    raise KeyError(public_name)


def catalogued_mistake(entry: str) -> Mistake:
    """The catalogue's ``"concept/name"``; a ValueError names what is wrong otherwise."""
    concept_name, _, name = entry.partition("/")
    for mistake in concept(concept_name).mistakes:
        if mistake.name == name:
            return mistake
    raise ValueError(f"no catalogued mistake {entry!r}: expected concept/name with a mistake in "
                     f"kata/concepts/course.toml")
