"""The argparse types of the ``kata`` command's options (kata.cli, kata.grading.commands): a concept by name, a
number > 0."""

from __future__ import annotations

import argparse

from kata.concepts.manifest import CONCEPTS, Concept, concept


def concept_argument(name: str) -> Concept:
    """argparse type: a concept by name or by the number ``kata list`` shows, or an error listing the valid names."""
    numbered = [c for c in CONCEPTS if name.strip().isdigit() and c.number == int(name)]
    if numbered:
        return numbered[0]
    try:
        return concept(name)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0; got {text}")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {text}")
    return value
