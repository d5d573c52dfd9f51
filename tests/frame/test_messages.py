"""The concept tests' messages take a catalogued mistake's sentence from the course data, never a copy of it.

A reading that a catalogued mistake computes is keyed by ``tests.assertions.mistake("concept/name")``; most are
built only when a test fails, so a name the catalogue lacks would surface in a student's failure, not here: each
name is checked against kata/concepts/course.toml instead.
"""

from __future__ import annotations

import ast

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.manifest import CONCEPTS, catalogued_mistake
from tests.assertions import mistake

pytestmark = pytest.mark.frame


def named_mistakes(source: str) -> list[str]:
    """The entries of every ``mistake("concept/name")`` call in ``source``."""
    return [node.args[0].value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "mistake"
            and node.args and isinstance(node.args[0], ast.Constant)]


@pytest.mark.parametrize("name", [c.name for c in CONCEPTS])
def test_every_mistake_a_message_names_is_catalogued(name):
    for entry in named_mistakes((ROOT / "tests" / f"test_{name}.py").read_text(encoding="utf-8")):
        try:
            catalogued_mistake(entry)
        except ValueError as error:
            raise AssertionError(f"tests/test_{name}.py names {entry!r}: {error}") from None


def test_a_reading_quotes_the_course_datas_sentence():
    sentence = catalogued_mistake("gae/lambda_not_applied").misunderstanding
    assert sentence in mistake("gae/lambda_not_applied"), (
        f"a reading's description holds the misunderstanding as kata/concepts/course.toml writes it: {sentence!r}")
    with pytest.raises(ValueError, match="no catalogued mistake"):
        mistake("gae/no_such_mistake")
