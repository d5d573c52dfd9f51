"""Run a concept's tests against catalogue entries (mistakes/ or variants/), each in a process of its own.

Shared by ``kata mistakes`` and ``kata variants``. Each run is a fresh process forked after the heavy imports (torch,
Hypothesis, pytest, NumPy) are done once: a run keeps the isolation of a subprocess (its own copy of the
implementation, its own Hypothesis state) without paying an interpreter's start-up and torch's import for each of
the catalogue's entries. The runs are forked from a forkserver that imported the same modules (or from this
process while it holds one thread, which NumPy's OpenBLAS pool rarely allows: kata.concepts.platforms). Where
``fork`` does not exist, each run is a new interpreter.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from kata.concepts.impl import CATALOGUES, ENTRY_SUFFIX, REPOSITORY_ROOT, patched_source
from kata.concepts.manifest import concept
from kata.concepts.platforms import can_fork, start_method, worker_context

FAILED_LINE = re.compile(r"^FAILED (\S+?)(?: - (.*))?$")
# conftest.py registers every Hypothesis profile's twin under this suffix (no shrinking, no example database): a
# catalogue run only needs to know whether a test fails, not the smallest counterexample.
NO_SHRINK_SUFFIX = "-no-shrink"
PRELOAD = ("hypothesis", "numpy", "pytest", "torch", "kata.testing.options", "kata.testing.strategies")


@dataclass(frozen=True)
class Run:
    """One pytest run: the ``kind`` (mistake or variant) ``entry`` ("concept/name") under a Hypothesis profile."""

    kind: str
    entry: str
    profile: str
    slow: bool = False
    seed: int | None = None  # --hypothesis-seed; None: the profile decides (ci is derandomized)

    @property
    def concept_name(self) -> str:
        return self.entry.partition("/")[0]

    def arguments(self, impl: str, report: str | None = None) -> list[str]:
        """pytest's arguments; ``report``: the file kata.testing.progress writes the concept's first failure message
        to."""
        marker = self.concept_name if self.slow else f"{self.concept_name} and not slow"
        arguments = [
            # Only the concept's own test module is collected: importing the whole suite would cost more than the run.
            f"tests/test_{self.concept_name}.py", f"--impl={impl}", f"--{self.kind}={self.entry}", "-m", marker,
            "-q", "-rf", "--no-header", "-p", "no:cacheprovider",
        ]
        if report is not None:
            arguments.append(f"--kata-report={report}")
        if self.kind == "mistake":
            arguments.append("-x")  # one failure is enough to call a mistake caught
        if self.seed is not None:
            arguments.append(f"--hypothesis-seed={self.seed}")
        return arguments


@dataclass(frozen=True)
class Outcome:
    run: Run
    returncode: int
    output: str
    seconds: float
    first_message: str = ""  # the first failure's one-line message, as `kata status` and the grader show it

    @property
    def failed_tests(self) -> list[tuple[str, str]]:
        """(test name, message) of each FAILED line pytest printed."""
        matches = [FAILED_LINE.match(line) for line in self.output.splitlines()]
        return [(m.group(1).rpartition("::")[2], m.group(2) or "") for m in matches if m]

    def tail(self, lines: int = 3) -> str:
        return " | ".join(self.output.strip().splitlines()[-lines:])


def catalogue_entries(kind: str, concept_names: list[str]) -> list[str]:
    """Every ``concept/name`` with a patch in the ``kind`` catalogue, in the concepts' order."""
    root = CATALOGUES[kind]
    return [f"{name}/{path.stem}" for name in concept_names
            for path in sorted((root / name).glob(f"*{ENTRY_SUFFIX}"))]


def catalogue_problems(kind: str, concept_names: list[str], listed_names) -> list[str]:
    """Mismatches between the manifest's entries (``listed_names(concept)``) and the patches of the catalogue, and
    every patch that does not apply to the reference (its message shows the hunk)."""
    root = CATALOGUES[kind]
    folder_name = root.name
    problems = []
    for name in concept_names:
        listed = set(listed_names(concept(name)))
        present = {entry.partition("/")[2] for entry in catalogue_entries(kind, [name])}
        problems += [f"{name}/{m}: listed in kata/concepts/course.toml but {folder_name}/{name}/{m}{ENTRY_SUFFIX} is "
                     "missing" for m in sorted(listed - present)]
        problems += [f"{name}/{m}: {folder_name}/{name}/{m}{ENTRY_SUFFIX} is not listed in kata/concepts/course.toml"
                     for m in sorted(present - listed)]
        for m in sorted(present):
            try:
                patched_source(REPOSITORY_ROOT / "solutions", f"{name}/{m}", kind)
            except ValueError as error:
                problems.append(str(error))
    return problems


def hypothesis_profile(name: str, shrink: bool) -> str:
    """The profile to load: ``name`` itself, or its no-shrink twin that conftest.py registers."""
    return name if shrink else f"{name}{NO_SHRINK_SUFFIX}"


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "big")


def run_all(runs: list[Run], impl: str = "solutions", jobs: int = 2) -> Iterator[Outcome]:
    """Run every ``run``, up to ``jobs`` at once; yield each outcome as it ends (not in order)."""
    if can_fork():
        yield from _forked(runs, impl, max(1, jobs))
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            yield from pool.map(lambda run: _subprocess(run, impl), runs)


def _environment(run: Run) -> dict[str, str]:
    return dict(os.environ, KATA_HYPOTHESIS_PROFILE=run.profile)


def _first_message(run: Run, report_path: str) -> str:
    """The concept's first failure message in the run's kata.testing.progress report ("" if there is none)."""
    import json

    try:
        concepts = json.loads(Path(report_path).read_text()).get("concepts", {})
        return str(concepts.get(run.concept_name, {}).get("message", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _subprocess(run: Run, impl: str) -> Outcome:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kata-catalogue-") as folder:
        report = str(Path(folder) / "report.json")
        completed = subprocess.run([sys.executable, "-m", "pytest", *run.arguments(impl, report)],
                                   cwd=REPOSITORY_ROOT, capture_output=True, text=True, env=_environment(run))
        return Outcome(run, completed.returncode, completed.stdout + completed.stderr, time.perf_counter() - started,
                       _first_message(run, report))


def _child(run: Run, impl: str, output_path: str, environment: dict[str, str]) -> None:
    """In the forked process: pytest's output to ``output_path``, its exit status as the process's."""
    code = 3
    try:
        descriptor = os.open(output_path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(descriptor, 1)
        os.dup2(descriptor, 2)
        os.environ.clear()
        os.environ.update(environment)
        os.chdir(REPOSITORY_ROOT)
        import pytest

        code = int(pytest.main(run.arguments(impl, output_path + ".json")))
    except BaseException as error:  # noqa: BLE001 - whatever happens, the parent gets a status and a line
        print(f"catalogue run crashed: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _forked(runs: list[Run], impl: str, jobs: int) -> Iterator[Outcome]:
    # The imports every run needs, once, before the first fork; no torch work starts a thread pool here.
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)
    # Chosen once, before the first run: fork while this process holds one thread (it starts none between runs),
    # else a forkserver (an interpreter per run would import torch again for each of hundreds of runs).
    concepts = dict.fromkeys(run.entry.partition("/")[0] for run in runs)  # and each one's strategy module
    context = worker_context(PRELOAD + tuple(f"kata.testing.strategies.{name}" for name in concepts),
                             start_method(elsewhere="forkserver"))
    pending = list(runs)
    running: dict[int, tuple[multiprocessing.Process, Run, str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kata-catalogue-") as folder:
        counter = 0
        while pending or running:
            while pending and len(running) < jobs:
                run = pending.pop(0)
                counter += 1
                output_path = str(Path(folder) / f"{counter}.out")
                Path(output_path).touch()
                sys.stdout.flush()
                sys.stderr.flush()
                process = context.Process(target=_child, args=(run, impl, output_path, _environment(run)),
                                          daemon=True)
                process.start()
                running[process.sentinel] = (process, run, output_path, time.perf_counter())
            ready = multiprocessing.connection.wait(list(running))
            for sentinel in ready:
                process, run, output_path, started = running.pop(sentinel)
                process.join()
                output = Path(output_path).read_text(errors="replace")
                yield Outcome(run, process.exitcode if process.exitcode is not None else -1, output,
                              time.perf_counter() - started, _first_message(run, output_path + ".json"))
