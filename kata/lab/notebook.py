"""Keep the lab notebook's two forms in step: notebooks/lab.py (Jupytext percent format, the one to edit) and
notebooks/lab.ipynb (generated from it, for Jupyter and VS Code).

    python -m kata.lab.notebook --check   exit 0 if lab.ipynb holds exactly lab.py's cells and no outputs (CI)
    python -m kata.lab.notebook --write   regenerate lab.ipynb from lab.py

Both need jupytext, an optional dependency: ``pip install -e ".[notebook]"``. Without it the command says so and
exits 1 (a check that cannot run must not pass).

The check compares cells (type and source) rather than bytes, so that jupytext's and nbformat's versions (cell ids,
format minor version) do not matter, and it fails on saved outputs, which belong in nobody's commit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kata.concepts.impl import REPOSITORY_ROOT

SCRIPT = REPOSITORY_ROOT / "notebooks" / "lab.py"
NOTEBOOK = REPOSITORY_ROOT / "notebooks" / "lab.ipynb"
INSTALL_HINT = 'pip install -e ".[notebook]"  (or: pip install "jupytext>=1.16")'


class JupytextMissing(RuntimeError):
    """jupytext is not installed."""


def _jupytext() -> Any:
    try:
        import jupytext
    except ImportError as error:
        raise JupytextMissing(f"jupytext is not installed, so the notebook cannot be checked or written; "
                              f"install the notebook extra: {INSTALL_HINT}") from error
    return jupytext


def cells(notebook: Any) -> list[tuple[str, str]]:
    """``(cell_type, source)`` of every cell, sources without trailing whitespace."""
    return [(cell.cell_type, cell.source.rstrip()) for cell in notebook.cells]


def expected_notebook(script: Path = SCRIPT) -> Any:
    """The notebook jupytext makes from ``script``."""
    return _jupytext().read(script, fmt="py:percent")


def check(script: Path = SCRIPT, notebook_path: Path = NOTEBOOK) -> list[str]:
    """What differs between ``notebook_path`` and the notebook made from ``script`` (empty: in step)."""
    jupytext = _jupytext()
    if not notebook_path.exists():
        return [f"{notebook_path} does not exist"]
    expected = cells(expected_notebook(script))
    notebook = jupytext.read(notebook_path, fmt="ipynb")
    actual = cells(notebook)
    problems = []
    if len(actual) != len(expected):
        problems.append(f"{notebook_path.name} has {len(actual)} cells, {script.name} makes {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            first = next((line for line in want[1].splitlines() if line.strip()), "")
            problems.append(f"cell {index} ({want[0]}, starting {first[:60]!r}) differs")
            break
    saved = [i for i, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)]
    if saved:
        problems.append(f"{notebook_path.name} holds saved outputs in cells {saved}")
    return problems


def write(script: Path = SCRIPT, notebook_path: Path = NOTEBOOK) -> Path:
    """Regenerate ``notebook_path`` from ``script``; returns its path."""
    notebook = expected_notebook(script)
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"lab-{index:02d}"  # stable ids: regenerating an unchanged script changes no byte
    _jupytext().write(notebook, notebook_path, fmt="ipynb")
    return notebook_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kata.lab.notebook", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="fail if lab.ipynb is not lab.py's notebook")
    action.add_argument("--write", action="store_true", help="regenerate lab.ipynb from lab.py")
    args = parser.parse_args(argv)
    try:
        if args.write:
            print(f"wrote {write().relative_to(REPOSITORY_ROOT)} from {SCRIPT.relative_to(REPOSITORY_ROOT)}")
            return 0
        problems = check()
    except JupytextMissing as error:
        print(f"kata.lab.notebook: {error}", file=sys.stderr)
        return 1
    if problems:
        for problem in problems:
            print(f"kata.lab.notebook: {problem}", file=sys.stderr)
        print("kata.lab.notebook: notebooks/lab.ipynb is out of step with notebooks/lab.py; edit lab.py, then run "
              "python -m kata.lab.notebook --write", file=sys.stderr)
        return 1
    print("notebook: notebooks/lab.ipynb matches notebooks/lab.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
