"""Where a student stands, without running a single test: the state behind ``kata status`` and ``kata check``.

Two sources, both cheap to read (this module imports neither torch nor pytest, so ``kata status`` answers at once):

- the source of ``exercises/<concept>.py``, parsed (never imported): which functions still raise
  ``not_implemented`` (stubs) and which the student has written;
- the last test results the pytest plugin :mod:`kata.testing.progress` recorded in ``.kata/progress.json`` (or
  ``$KATA_PROGRESS``), each concept's results stamped with a fingerprint of the files they depend on. A result
  whose fingerprint no longer matches is stale: the student changed the code since, and the state says so.

A concept's state is one of: ``not started``, ``failing k of n``, ``passing k, m not run yet``, ``fast tests green;
`kata check NAME --slow` trains the agent, and grading runs it``, ``done``,
``changed since last check``, ``not checked yet``, ``missing``, ``syntax error``. ``done`` means every test of the
concept that is not marked ``slow`` has passed on the current code (slow integration tests count only when run,
with ``kata check --slow``); a concept that failed any test it ran is not done.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, Concept

PROGRESS_ENVIRONMENT_VARIABLE = "KATA_PROGRESS"
PROGRESS_VERSION = 1
STUB_FACTORIES = ("not_implemented",)  # calls whose ``raise`` marks an untouched stub


def progress_path() -> Path:
    """Where the plugin records results: ``$KATA_PROGRESS`` or ``<repository>/.kata/progress.json``."""
    configured = os.environ.get(PROGRESS_ENVIRONMENT_VARIABLE)
    return Path(configured).expanduser() if configured else REPOSITORY_ROOT / ".kata" / "progress.json"


# ---- the source: stubs left, functions written -----------------------------------------------------------------


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


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
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
    except (OSError, ValueError) as error:
        return SourceState(path, exists=True, syntax_error=str(error))
    given = _functions(tree)
    reference_tree = _parse(reference) if reference is not None and reference.exists() else None
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


# ---- the fingerprint: which files a concept's results depend on ------------------------------------------------


def _relative_imports(path: Path) -> set[str]:
    """Sibling module names imported relatively (``from .gae import ...``, ``from . import gae``)."""
    tree = _parse(path)
    if tree is None:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names.update(alias.name for alias in node.names)
    return names


def dependency_files(concept_name: str, exercises_dir: Path, tests_dir: Path) -> list[Path]:
    """The concept's module, the sibling modules it imports (transitively), and its test module."""
    seen: set[str] = set()
    todo = [concept_name]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module = exercises_dir / f"{name}.py"
        if module.exists():
            todo.extend(_relative_imports(module) - seen)
    modules = sorted(exercises_dir / f"{name}.py" for name in seen)
    return [*modules, tests_dir / f"test_{concept_name}.py"]


def fingerprint(concept_name: str, exercises_dir: Path, tests_dir: Path) -> str:
    """A hash of every file the concept's test results depend on (a missing file hashes as missing)."""
    digest = hashlib.sha256()
    for path in dependency_files(concept_name, exercises_dir, tests_dir):
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()[:16]


# ---- the record: last results per concept ----------------------------------------------------------------------


@dataclass
class TestRecord:
    """One test's last outcome: ``passed``, ``failed``, ``skipped`` or None (known but not run)."""

    outcome: str | None
    slow: bool = False
    message: str = ""


@dataclass
class ConceptRecord:
    fingerprint: str
    tests: dict[str, TestRecord] = field(default_factory=dict)

    def merged_with(self, newer: ConceptRecord) -> ConceptRecord:
        """``newer``'s results on top of these when both describe the same code, else ``newer`` alone."""
        if newer.fingerprint != self.fingerprint:
            return newer
        tests = dict(self.tests)
        for node_id, record in newer.tests.items():
            if record.outcome is not None or node_id not in tests:
                tests[node_id] = record
        return ConceptRecord(newer.fingerprint, tests)

    def counts(self) -> tuple[int, int, int]:
        """(passed, failed, not run): not run counts the tests that are not slow only."""
        passed = sum(1 for t in self.tests.values() if t.outcome == "passed")
        failed = sum(1 for t in self.tests.values() if t.outcome == "failed")
        not_run = sum(1 for t in self.tests.values() if t.outcome is None and not t.slow)
        return passed, failed, not_run

    def slow_not_run(self) -> int:
        """How many slow (training) tests are known and have not run on this code."""
        return sum(1 for t in self.tests.values() if t.outcome is None and t.slow)

    def first_failure(self) -> str:
        return next((t.message for t in self.tests.values() if t.outcome == "failed" and t.message), "")


def load_progress(path: Path | None = None) -> dict[str, ConceptRecord]:
    """The recorded results by concept; an absent or unreadable file is no results (never an error)."""
    path = path or progress_path()
    try:
        data = json.loads(path.read_text())
        records = {}
        for name, raw in data.get("concepts", {}).items():
            tests = {node: TestRecord(**test) for node, test in raw.get("tests", {}).items()}
            records[name] = ConceptRecord(raw["fingerprint"], tests)
        return records
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_progress(records: Mapping[str, ConceptRecord], path: Path | None = None) -> None:
    """Write ``records`` atomically (a reader never sees half a file)."""
    path = path or progress_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "version": PROGRESS_VERSION,
        "concepts": {
            name: {
                "fingerprint": record.fingerprint,
                "tests": {node: vars(test) for node, test in record.tests.items()},
            }
            for name, record in records.items()
        },
    }
    write_json_atomically(path, data)


def write_json_atomically(path: Path, data: Any) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(data, stream, indent=1)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def record_results(new: Mapping[str, ConceptRecord], path: Path | None = None, *, partial: bool = False) -> None:
    """Merge ``new`` into the recorded results (same fingerprint: test by test; otherwise replaced).

    ``partial``: the run named single tests (``tests/test_gae.py::test_x``), so it does not know the concept's other
    tests; it may only add to a record of the same code, never start one (one passing test is not "done").
    """
    records = load_progress(path)
    for name, record in new.items():
        if name in records:
            if partial and records[name].fingerprint != record.fingerprint:
                continue
            records[name] = records[name].merged_with(record)
        elif not partial:
            records[name] = record
    save_progress(records, path)


# ---- the state -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConceptState:
    concept: Concept
    label: str  # what `kata status` prints
    done: bool
    passed: int = 0
    failed: int = 0
    not_run: int = 0
    message: str = ""  # the first recorded failure, when the record is current


def concept_state(
    concept: Concept,
    *,
    exercises_dir: Path,
    tests_dir: Path,
    reference_dir: Path | None,
    records: Mapping[str, ConceptRecord],
) -> ConceptState:
    module = exercises_dir / f"{concept.name}.py"
    source = analyse_source(module, reference_dir / f"{concept.name}.py" if reference_dir else None)
    if not source.exists:
        return ConceptState(concept, f"missing ({module.parent.name}/{module.name} does not exist)", done=False)
    if source.syntax_error:
        return ConceptState(concept, f"syntax error ({source.syntax_error})", done=False)
    record = records.get(concept.name)
    current = record is not None and record.fingerprint == fingerprint(concept.name, exercises_dir, tests_dir)
    # An untouched stub can still pass a test (one that checks the arguments before the stub raises): any passing
    # test of the current code makes the concept "failing k of n", never "not started".
    if source.not_started and not (current and record.counts()[0]):
        return ConceptState(concept, "not started", done=False)
    stubs_left = f" ({len(source.stubs)} stub{'s' if len(source.stubs) != 1 else ''} left)" if source.stubs else ""
    if record is None:
        return ConceptState(concept, "not checked yet" + stubs_left, done=False)
    if not current:
        return ConceptState(concept, "changed since last check" + stubs_left, done=False)
    passed, failed, not_run = record.counts()
    counts = dict(passed=passed, failed=failed, not_run=not_run)
    if failed:
        label = f"failing {failed} of {passed + failed}" + (f", {not_run} not run yet" if not_run else "")
        return ConceptState(concept, label, done=False, message=record.first_failure(), **counts)
    if not_run or not passed:
        return ConceptState(concept, f"passing {passed}, {not_run} not run yet", done=False, **counts)
    if record.slow_not_run():
        return ConceptState(concept, slow_not_run_label(concept), done=True, **counts)
    return ConceptState(concept, "done", done=True, **counts)


def slow_not_run_label(concept: Concept) -> str:
    """What a concept whose fast tests all pass, and whose slow (training) tests have not run, says."""
    return f"fast tests green; `kata check {concept.name} --slow` trains the agent, and grading runs it"


def all_states(
    *,
    exercises_dir: Path | None = None,
    tests_dir: Path | None = None,
    reference_dir: Path | None = None,
    progress: Path | None = None,
    concepts: Iterable[Concept] = CONCEPTS,
) -> list[ConceptState]:
    """Every concept's state, in teaching order (defaults: this repository's folders and progress file)."""
    exercises_dir = exercises_dir or REPOSITORY_ROOT / "exercises"
    tests_dir = tests_dir or REPOSITORY_ROOT / "tests"
    reference_dir = reference_dir if reference_dir is not None else REPOSITORY_ROOT / "solutions"
    records = load_progress(progress)
    return [
        concept_state(c, exercises_dir=exercises_dir, tests_dir=tests_dir, reference_dir=reference_dir,
                      records=records)
        for c in concepts
    ]


def next_concept(states: Iterable[ConceptState]) -> Concept | None:
    """The first concept in teaching order that is not done; None when all are."""
    return next((state.concept for state in states if not state.done), None)
