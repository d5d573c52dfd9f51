"""The frame's layout: every module of kata/ is short enough for a maintainer to read in one sitting."""

from __future__ import annotations

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
