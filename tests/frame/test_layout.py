"""The frame's layout: every module of kata/ is short enough for a maintainer to read in one sitting, every line of
the repository's Python fits the configured width, and every assertion of the tests says what broke."""

from __future__ import annotations

import ast
import tomllib

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT

pytestmark = pytest.mark.frame

MAX_MODULE_LINES = 450


def test_no_module_of_kata_is_over_450_lines():
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
               for path in sorted((ROOT / "kata").rglob("*.py")) if "__pycache__" not in path.parts}
    assert len(lengths) > 10, f"kata/ should hold the frame's modules; found {sorted(lengths)}"
    too_long = {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES}
    assert not too_long, (f"no module of kata/ may be over {MAX_MODULE_LINES} lines; {too_long} are: move a "
                          "cohesive part into a module of its own (kata/grading/batch.py and kata/grading/commands.py "
                          "are examples)")


def test_every_python_line_fits_the_configured_width():
    """pyproject.toml's ``[tool.ruff] line-length`` is the width every Python file of the repository keeps (the
    catalogues and benchmarks included): a maintainer reading side by side never scrolls."""
    width = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
    folders = ("kata", "solutions", "exercises", "mistakes", "variants", "tests", "benchmarks", "notebooks")
    paths = [ROOT / "conftest.py", *(path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))
                                     if "__pycache__" not in path.parts)]
    too_wide = [f"{path.relative_to(ROOT).as_posix()}:{number} ({len(line)})"
                for path in paths for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if len(line) > width]
    assert len(paths) > 50, f"the repository's Python files should be found; found {len(paths)}"
    assert not too_wide, f"lines wider than pyproject.toml's line-length {width}: {too_wide[:20]}"


def _expected_to_fail(tree: ast.AST) -> set[int]:
    """Line numbers of the statements inside ``with pytest.raises(...)``: assertions meant to fail there (a test
    of how a failure reads) may be bare."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any("raises" in ast.unparse(item.context_expr) for item in node.items):
            inside |= {child.lineno for statement in node.body for child in ast.walk(statement)
                       if hasattr(child, "lineno")}
    return inside


def test_every_assertion_of_the_tests_carries_a_message():
    """A bare ``assert`` (or a NumPy or torch comparison without ``err_msg``/``msg``) fails with the values alone:
    the student or maintainer is left to guess what was meant. Every assertion in tests/ and conftest.py says what
    was expected and why."""
    paths = [*sorted(path for path in (ROOT / "tests").rglob("*.py") if "fixtures" not in path.parts),
             ROOT / "conftest.py"]
    bare = []
    for path in paths:
        tree = ast.parse(path.read_text())
        exempt = _expected_to_fail(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                silent = node.msg is None
            elif isinstance(node, ast.Call) and ast.unparse(node.func).startswith(
                    ("np.testing.assert", "numpy.testing.assert", "torch.testing.assert")):
                silent = not any(keyword.arg in ("err_msg", "msg") for keyword in node.keywords)
            else:
                continue
            if silent and node.lineno not in exempt:
                bare.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno}")
    assert len(paths) > 20, f"tests/ should hold the concept and frame tests; found {len(paths)} files"
    assert not bare, f"every assertion needs a message naming what it checks; these have none: {bare}"


# ---- the loops read in one sitting ---------------------------------------------------------------------------------

READING_PATH_FILES, READING_PATH_LINES = 5, 1000


def _module_file(name: str):
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _module_level_kata_imports(path) -> list[str]:
    """What a reader of ``path`` must open: its top-level imports of kata (``from kata.x import y``, ``y`` itself
    when it is a module). Imports inside a function, such as the speedups switch's, are off the reading path."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("kata"):
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names if alias.name.startswith("kata")]
    return names


def reading_path(solution) -> dict[str, int]:
    """The frame files a solution module pulls in, directly or through one another, with their lengths in lines:
    ``solutions/`` aside (the concept modules it builds on are read as concepts) and package ``__init__.py`` files
    aside (a package's map, not code the loop runs through)."""
    found, pending = {}, _module_level_kata_imports(solution)
    while pending:
        path = _module_file(pending.pop())
        if path is None or path.relative_to(ROOT).as_posix() in found:
            continue
        found[path.relative_to(ROOT).as_posix()] = len(path.read_text().splitlines())
        pending += _module_level_kata_imports(path)
    return {name: lines for name, lines in found.items() if not name.endswith("__init__.py")}


@pytest.mark.parametrize("loop", ["ppo_cartpole", "rloo_loop"])
def test_a_loop_reads_in_one_sitting(loop):
    files = reading_path(ROOT / "solutions" / f"{loop}.py")
    assert len(files) <= READING_PATH_FILES and sum(files.values()) <= READING_PATH_LINES, (
        f"solutions/{loop}.py pulls in {len(files)} frame files, {sum(files.values())} lines ({files}): a learner "
        f"reads the loop in at most {READING_PATH_FILES} files and {READING_PATH_LINES} lines; move what is not on "
        "its path (speed, reporting) behind a switch or into the module that uses it")
