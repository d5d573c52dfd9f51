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

# What reading a loop takes, counted honestly: every module of this repository that importing the solution runs,
# its own concept modules and each package's __init__.py included. PPO's 9: its three concept modules (gae,
# clipped_surrogate with the entropy, ppo_cartpole) and the package that exports them (4 files, written by the
# student), kata/__init__.py (the package map and the exports), kata/arrays.py, and kata/rl's __init__ (the optimizer),
# environment with its networks, and loop. These are the counts to keep or lower.
READING_PATH_LIMITS = {"ppo_cartpole": (9, 1746), "rloo_loop": (11, 2144)}  # files, lines
TOP_LEVEL = ("kata", "solutions", "exercises")


def _module_file(name: str):
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(path) -> list[str]:
    """Every module name ``path`` imports, at module level or inside a function: ``import a.b``, ``from a import b``
    (``a``, and ``a.b`` where that is a module), relative imports resolved against ``path``'s package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # the package a relative import starts from (an __init__.py's is its own folder)
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return names


def reading_path(solution) -> dict[str, int]:
    """The repository's files that ``import solutions.<loop>`` runs, each with its length in lines: the solution,
    everything it imports at any depth, and the ``__init__.py`` of every package on the way."""
    found: dict[str, int] = {}
    pending = [".".join(solution.relative_to(ROOT).with_suffix("").parts)]
    while pending:
        name = pending.pop()
        if name.split(".")[0] not in TOP_LEVEL:
            continue
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
            path = _module_file(".".join(parts[:depth]))
            if path is not None and path.relative_to(ROOT).as_posix() not in found:
                found[path.relative_to(ROOT).as_posix()] = len(path.read_text().splitlines())
                pending += _imported_names(path)
    return dict(sorted(found.items()))


def test_the_reading_path_counts_function_level_imports_and_package_inits():
    files = reading_path(ROOT / "solutions" / "ppo_cartpole.py")
    for expected in ("solutions/__init__.py", "solutions/ppo_cartpole.py", "solutions/gae.py", "kata/__init__.py",
                     "kata/arrays.py", "kata/rl/__init__.py", "kata/rl/ppo.py"):
        assert expected in files, f"importing solutions.ppo_cartpole runs {expected}; the count has {sorted(files)}"


@pytest.mark.parametrize("loop", sorted(READING_PATH_LIMITS))
def test_a_loop_reads_in_one_sitting(loop):
    files = reading_path(ROOT / "solutions" / f"{loop}.py")
    most_files, most_lines = READING_PATH_LIMITS[loop]
    listing = ", ".join(f"{name} {lines}" for name, lines in files.items())
    assert len(files) <= most_files and sum(files.values()) <= most_lines, (
        f"solutions/{loop}.py runs {len(files)} files of this repository, {sum(files.values())} lines ({listing}): a "
        f"reader follows the loop in at most {most_files} files and {most_lines} lines; move what is not on its path "
        "(speed, reporting, what only the tools use) into the module that uses it")
