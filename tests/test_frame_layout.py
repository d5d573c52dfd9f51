"""The frame's layout: every module of kata/ is short enough for a maintainer to read in one sitting, and every
assertion of the tests says what broke."""

from __future__ import annotations

import ast

import pytest

from kata.impl import REPOSITORY_ROOT as ROOT

pytestmark = pytest.mark.frame

MAX_MODULE_LINES = 450


def test_no_module_of_kata_is_over_450_lines():
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
               for path in sorted((ROOT / "kata").rglob("*.py")) if "__pycache__" not in path.parts}
    assert len(lengths) > 10, f"kata/ should hold the frame's modules; found {sorted(lengths)}"
    too_long = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    assert not too_long, (f"no module of kata/ may be over {MAX_MODULE_LINES} lines; {too_long} are: move a "
                          "cohesive part into a module of its own (kata/grade_batch.py and kata/cli_grade.py are "
                          "examples)")


def test_every_assertion_of_the_tests_carries_a_message():
    """A bare ``assert`` fails with the expression alone: the student (or maintainer) is left to guess what it
    meant. Every assertion in tests/ and conftest.py says what was expected and why."""
    paths = [*sorted((ROOT / "tests").glob("*.py")), ROOT / "conftest.py"]
    bare = [f"{path.relative_to(ROOT).as_posix()}:{node.lineno}" for path in paths
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Assert) and node.msg is None]
    assert len(paths) > 20, f"tests/ should hold the concept and frame tests; found {len(paths)} files"
    assert not bare, f"every assertion needs a message naming what it checks; these have none: {bare}"
