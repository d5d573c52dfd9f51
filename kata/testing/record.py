"""The record of a student's last test results, per concept: what ``kata status`` reads and the pytest plugin writes.

Each concept's results are stamped with a fingerprint of the files they depend on (the concept's module, the sibling
modules it imports, its test module). A result whose fingerprint no longer matches is stale: the code changed since.
The record lives in ``.kata/progress.json`` (or ``$KATA_PROGRESS``) and is written atomically.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.sources import parse_source

PROGRESS_ENVIRONMENT_VARIABLE = "KATA_PROGRESS"
PROGRESS_VERSION = 1


def progress_path() -> Path:
    """Where the plugin records results: ``$KATA_PROGRESS`` or ``<repository>/.kata/progress.json``."""
    configured = os.environ.get(PROGRESS_ENVIRONMENT_VARIABLE)
    return Path(configured).expanduser() if configured else REPOSITORY_ROOT / ".kata" / "progress.json"


# ---- the fingerprint: which files a concept's results depend on ------------------------------------------------


def _relative_imports(path: Path) -> set[str]:
    """Sibling module names imported relatively (``from .gae import ...``, ``from . import gae``)."""
    tree = parse_source(path)
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
