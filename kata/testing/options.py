"""pytest plugin: the ``--impl``, ``--mistake``, ``--variant`` and ``--e2e`` options, known before pytest reads its
arguments.

Installed as a ``pytest11`` entry point (``pip install -e .``, which requirements.txt does), and listed in the
repository's ``conftest.py`` for a checkout that is not installed (there ``-p kata.testing.options`` loads it
early).

``pytest --impl ~/submissions/student-7``, with the folder outside the repository: pytest decides its rootdir and
configuration file before any plugin is loaded, from the arguments it does not know, and there it reads the folder as
a test path: the rootdir becomes the submission, and this repository's ``conftest.py`` and ``pyproject.toml`` are
never read. ``--impl=PATH`` in one word has no such effect, so a command line that gives a folder as a separate
argument is run again at once with the two joined (a ``pytest.main`` call, which cannot be restarted, is told to
join them).

Started outside the repository (``cd ~/submissions && pytest --impl student-7``), pytest would look for tests where
it was started and find none of the kata's. With ``--impl`` given and no test path, the run starts again from the
repository, the folder made absolute, and says so in one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

OPTIONS = ("--impl", "--mistake", "--variant")
NAMED_PACKAGES = ("exercises", "solutions")  # resolved as packages, never read as paths


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kata")
    group.addoption(
        "--impl",
        default=None,
        help="implementation under test: exercises (default, or $KATA_IMPL), solutions, or a folder laid out "
        "like exercises/",
    )
    group.addoption(
        "--mistake",
        default=None,
        help="with --impl solutions: run the reference patched by a wrong implementation, mistakes/CONCEPT/NAME.diff",
    )
    group.addoption(
        "--variant",
        default=None,
        help="with --impl solutions: run the reference patched by a valid variant, variants/CONCEPT/NAME.diff",
    )
    group.addoption(
        "--e2e",
        action="store_true",
        help="also run the end-to-end tests of the kata's tooling (marked e2e: grading runs, the sandbox, the "
        "autograder, watch, pytest in fresh interpreters), which a run leaves out otherwise; CI runs them",
    )


def joined_impl_arguments(args: list[str]) -> list[str] | None:
    """``args`` with ``--impl FOLDER`` joined into ``--impl=FOLDER``; None when there is nothing to join."""
    for index, argument in enumerate(args[:-1]):
        if argument == "--":
            return None
        value = args[index + 1]
        if argument == "--impl" and value not in NAMED_PACKAGES and Path(value).expanduser().is_dir():
            return [*args[:index], f"--impl={value}", *args[index + 2:]]
    return None


def from_the_repository(arguments: list[str], started_in: Path, repository: Path) -> list[str] | None:
    """``arguments`` for a run started again in ``repository`` (``--impl`` values made absolute), when pytest was
    started outside it with ``--impl`` and no test path; None otherwise."""
    if started_in.resolve().is_relative_to(repository.resolve()) or not (repository / "conftest.py").is_file():
        return None
    moved, given, after_impl = [], False, False
    for argument in arguments:
        if argument == "--":
            return None
        if after_impl or argument.startswith("--impl="):
            value = argument.partition("=")[2] if argument.startswith("--impl=") else argument
            if value not in NAMED_PACKAGES:
                value = str((started_in / Path(value).expanduser()).resolve())
            moved.append(f"--impl={value}" if argument.startswith("--impl=") else value)
            given, after_impl = True, False
            continue
        after_impl = argument == "--impl"
        if not argument.startswith("-") and (started_in / argument).exists():
            return None  # a test path of the caller's own: leave the run where it is
        moved.append(argument)
    return moved if given else None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    from kata.concepts.impl import REPOSITORY_ROOT

    arguments = list(early_config.invocation_params.args)
    started_in = Path(early_config.invocation_params.dir)
    moved = from_the_repository(arguments, started_in, REPOSITORY_ROOT)
    joined = joined_impl_arguments(moved or arguments)
    if joined is None and moved is None:
        return
    if sys.argv[1:] != arguments:  # pytest.main(...) inside a program: it cannot be started again
        raise pytest.UsageError("give the folder as --impl=PATH (one word), and run pytest from the kata's "
                                f"repository ({REPOSITORY_ROOT})")
    capture = early_config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # give the new process the real stdout and stderr, not pytest's capture files
        capture.stop_global_capturing()
    if moved is not None:
        print(f"kata: pytest started outside the kata's repository; running its tests from {REPOSITORY_ROOT}",
              file=sys.stderr)
        os.chdir(REPOSITORY_ROOT)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *(joined or moved)])
