"""What the source of a concept module says, read without importing it: which functions are still stubs.

A stub raises ``not_implemented(...)`` (kata.concepts.stub); a function that does not, and that differs from the
reference's function of the same name, is the student's own work. ``kata status`` labels concepts with it, and
``kata check`` and the grader skip the diagnosis of a module that is still an untouched stub. Nothing here imports
torch or the module it reads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

STUB_FACTORIES = ("not_implemented",)  # calls whose ``raise`` marks an untouched stub


@dataclass(frozen=True)
class SourceState:
    """What the parsed source of one exercise module says, without importing it."""

    path: Path
    exists: bool
    syntax_error: str | None = None  # "line 12: invalid syntax" when the file does not parse
    stubs: tuple[str, ...] = ()  # functions whose body still raises not_implemented(...)
    written: tuple[str, ...] = ()  # functions that neither raise it nor equal the reference's function

    @property
    def not_started(self) -> bool:
        """Every function the student must write still raises ``not_implemented``, and none was written."""
        return self.exists and self.syntax_error is None and bool(self.stubs) and not self.written


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions and methods of top-level classes, by (qualified) name."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}.{inner.name}"] = inner
    return found


def _raises_stub_error(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            callee = node.exc.func
            name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
            if name in STUB_FACTORIES:
                return True
    return False


def stub_functions(source: str) -> tuple[set[str], set[str]] | None:
    """(every function, those that raise ``not_implemented``) of the module text ``source``; None when it does not
    parse."""
    try:
        functions = _functions(ast.parse(source))
    except (SyntaxError, ValueError, SystemError):  # SystemError: CPython 3.11's "AST constructor recursion depth
        return None                                  # mismatch", raised by some parses of invalid code
    return set(functions), {name for name, function in functions.items() if _raises_stub_error(function)}


def parse_source(path: Path) -> ast.Module | None:
    """The module's syntax tree; None when it cannot be read or parsed."""
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, SystemError):
        return None


def analyse_source(path: Path, reference: Path | None = None) -> SourceState:
    """Stubs left and functions written in ``path``.

    A function that does not raise ``not_implemented`` counts as written unless it is identical (same syntax tree)
    to the function of the same name in ``reference`` (the solutions' module): code the kata gives ready-made,
    such as a loop that hands the package's functions to a frame, is not the student's work.
    """
    if not path.exists():
        return SourceState(path, exists=False)
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        return SourceState(path, exists=True, syntax_error=f"line {error.lineno}: {error.msg}")
    except (OSError, ValueError, SystemError) as error:  # SystemError: as in stub_functions
        return SourceState(path, exists=True, syntax_error=str(error))
    given = _functions(tree)
    reference_tree = parse_source(reference) if reference is not None and reference.exists() else None
    ready_made = _functions(reference_tree) if reference_tree is not None else {}
    stubs, written = [], []
    for name, function in given.items():
        if _raises_stub_error(function):
            stubs.append(name)
        elif name not in ready_made or ast.dump(ready_made[name]) != ast.dump(function):
            written.append(name)
    return SourceState(path, exists=True, stubs=tuple(stubs), written=tuple(written))


def started(folder: Path, names: Iterable[str], reference: Path | None) -> list[str]:
    """The concepts among ``names`` whose module in ``folder`` is not an untouched stub. An untouched stub behaves
    like no catalogued mistake (every call raises), so a diagnosis of it would only cost a process."""
    return [name for name in names
            if not analyse_source(folder / f"{name}.py", reference / f"{name}.py" if reference else None).not_started]
