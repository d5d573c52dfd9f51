"""Fixtures the tooling's tests share."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT


@pytest.fixture(scope="session")
def given_stubs(tmp_path_factory) -> Path:
    """A folder laid out like exercises/ holding the stubs exactly as solutions/ gives them: the checkout's own
    exercises/ may hold a student's work, which a test of the stubs must neither read nor need."""
    from kata.catalogue import stubs  # the instructor's package: imported only by the tests that ask for stubs

    folder = tmp_path_factory.mktemp("given") / "stubs"
    folder.mkdir()
    shutil.copy2(REPOSITORY_ROOT / "exercises" / "__init__.py", folder / "__init__.py")
    for stub in stubs.plan(exercises=folder):
        stub.path.write_text(stub.text, encoding="utf-8")
    return folder


# Grading confines a submission with /proc, prctl, resource limits and bubblewrap (kata grade says so in one line
# elsewhere): its tests run where grading runs.
GRADING_TESTS = ("test_grade.py", "test_sandbox.py", "test_autograder.py", "test_class_report.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if sys.platform.startswith("linux"):
        return
    skip = pytest.mark.skip(reason="grading runs on Linux only (/proc, prctl, resource limits, bubblewrap)")
    for item in items:
        if item.path.name in GRADING_TESTS:
            item.add_marker(skip)
