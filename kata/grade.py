"""Grade submissions with the reference's tests: per concept, tests passed and failed, points and a status.

Each submission (a folder laid out like ``exercises/``) is graded in its own pytest subprocess, run from this
repository (its ``tests/`` and ``conftest.py``) with ``--impl SUBMISSION`` and the ``ci`` Hypothesis profile
(derandomized: every submission meets the same examples). Slow integration tests are included by default: they are
the proof that the student's functions train the lab's agents (``include_slow=False`` leaves them out). The
``frame`` tests (the kata's own tooling) are never run.

Points are partial credit: a concept earns ``points * passed / (passed + failed)``; a concept whose module does not
import (``error``) or whose tests hang (``timeout``) earns zero. Statuses: ``passed`` (every test passed), ``failed``,
``error`` (the module does not import, or no test ran), ``timeout``.

Robustness, in layers:

1. The plugin :mod:`kata.progress` fails a test that outlives ``timeout`` seconds (an exception Hypothesis cannot
   swallow) and fails the rest of that concept at once, so one hanging concept costs one timeout.
2. A test that cannot even be set up (the submission's own ``__init__.py`` fails) is an ``error`` once every test
   of the concept failed that way.
3. A watchdog kills the whole subprocess (its process group) after ``watchdog`` seconds, for code that hangs where
   no signal reaches (inside a C extension); code that kills its own interpreter or raises KeyboardInterrupt ends
   the run early. The plugin's report, rewritten after every test, names the test that was running: its concept
   gets ``timeout`` (or ``error`` if the process died or was interrupted), and the concepts not finished yet are
   graded again in a fresh subprocess, until every concept has a result.
4. Anything else that goes wrong with one submission becomes ``error`` for its concepts; the batch goes on, and
   the reports are always written.

Grading does not sandbox anything: submitted code runs with the grader's rights (files, network, processes).
Grade untrusted code inside a container or a throwaway virtual machine.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.impl import REPOSITORY_ROOT
from kata.manifest import CONCEPTS, Concept

DEFAULT_TIMEOUT = 60.0  # seconds per test; the slowest integration test takes ~10 s on a loaded 2-core machine
HYPOTHESIS_PROFILE = "ci"
STATUSES = ("passed", "failed", "error", "timeout")
PYTEST_INTERRUPTED = 2  # pytest's exit status for a session stopped by KeyboardInterrupt
OUTPUT_TAIL = 2000  # characters of a crashed run's output kept for its error message


@dataclass
class ConceptResult:
    points: float
    max_points: float
    passed: int
    failed: int
    status: str  # passed | failed | error | timeout
    message: str


@dataclass
class SubmissionResult:
    submission: str
    concepts: dict[str, ConceptResult] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return round(sum(result.points for result in self.concepts.values()), 6)

    @property
    def max_total(self) -> float:
        return float(sum(result.max_points for result in self.concepts.values()))

    def as_json(self) -> dict[str, Any]:
        return {
            "submission": self.submission,
            "total": self.total,
            "max_total": self.max_total,
            "concepts": {name: vars(result).copy() for name, result in self.concepts.items()},
        }


def default_watchdog(timeout: float) -> float:
    """Seconds before the whole subprocess of one submission is killed: ten per-test timeouts."""
    return 10.0 * timeout


def error_result(concept: Concept, message: str, status: str = "error") -> ConceptResult:
    return ConceptResult(0.0, float(concept.points), 0, 0, status, message)


def concept_result(concept: Concept, summary: dict[str, Any] | None) -> ConceptResult:
    """Points and status of one concept from the plugin's per-concept summary (see kata.progress)."""
    max_points = float(concept.points)
    if not summary or not summary.get("collected"):
        return error_result(concept, f"no test of {concept.name} ran (are tests/test_{concept.name}.py there?)")
    passed, failed = int(summary["passed"]), int(summary["failed"])
    message = summary.get("message", "")
    if summary.get("timeout"):
        return ConceptResult(0.0, max_points, passed, failed, "timeout", message)
    if summary.get("import_error") or summary.get("setup_error", 0) >= summary["collected"]:
        return ConceptResult(0.0, max_points, passed, failed, "error", message)
    if passed + failed == 0:
        return ConceptResult(0.0, max_points, 0, 0, "error", f"every {concept.name} test was skipped")
    points = round(max_points * passed / (passed + failed), 6)
    return ConceptResult(points, max_points, passed, failed, "passed" if failed == 0 else "failed", message)


# ---- one submission ----------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One pytest subprocess: its plugin report (possibly partial), exit code, and how it ended."""

    report: dict[str, Any]
    returncode: int | None
    killed: bool  # by the watchdog
    output_tail: str


class Grader:
    """Grades one submission at a time; thread-safe, so several can run side by side (``--jobs``)."""

    def __init__(
        self,
        *,
        concepts: Sequence[Concept] = CONCEPTS,
        timeout: float = DEFAULT_TIMEOUT,
        watchdog: float | None = None,
        include_slow: bool = True,
        threads_per_job: int | None = None,
        repository: Path = REPOSITORY_ROOT,
        python: str = sys.executable,
    ) -> None:
        self.concepts = list(concepts)
        self.timeout = float(timeout)
        self.watchdog = float(watchdog) if watchdog is not None else default_watchdog(self.timeout)
        self.include_slow = include_slow
        self.threads_per_job = threads_per_job
        self.repository = repository
        self.python = python
        self._active: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self.stopped = False

    # ---- the subprocess ----

    def _command(self, submission: Path, concepts: Iterable[Concept], report: Path) -> list[str]:
        selection = " or ".join(c.marker for c in concepts)
        marker = f"({selection})" + ("" if self.include_slow else " and not slow")
        # The repository's ini file and rootdir, named outright: a submission that lives in a clone of the kata
        # (with its own pyproject.toml) must not become pytest's rootdir. `--impl=PATH` in one word, so pytest
        # does not take the path for a test argument either.
        ini = next((self.repository / name for name in ("pytest.ini", "pyproject.toml")
                    if (self.repository / name).exists()), None)
        return [
            self.python, "-m", "pytest", str(self.repository / "tests"), f"--rootdir={self.repository}",
            *([f"--config-file={ini}"] if ini else []),
            f"--impl={submission}", "-m", marker,
            "-p", "kata.progress", "--kata-report", str(report), "--kata-test-timeout", f"{self.timeout:g}",
            "--timeout", "0",  # pytest-timeout off: its exception is swallowed by Hypothesis (see kata.progress)
            "-q", "--no-header", "-p", "no:cacheprovider",
        ]

    def _environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        environment.update(
            KATA_HYPOTHESIS_PROFILE=HYPOTHESIS_PROFILE,
            PYTHONDONTWRITEBYTECODE="1",  # leave the submission's folder as it was handed in
            PYTHONHASHSEED="0",
        )
        environment.pop("KATA_IMPL", None)
        if self.threads_per_job:  # several jobs side by side: do not let each torch take every core
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                environment[name] = str(self.threads_per_job)
        return environment

    def _run(self, submission: Path, concepts: list[Concept]) -> Run:
        if self.stopped:
            raise GradingStopped("grading was interrupted")
        with tempfile.TemporaryDirectory(prefix="kata-grade-") as scratch:
            report_path = Path(scratch) / "report.json"
            output_path = Path(scratch) / "output.txt"
            with open(output_path, "wb") as output:
                process = subprocess.Popen(
                    self._command(submission, concepts, report_path),
                    cwd=self.repository, env=self._environment(), stdout=output, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,  # its own group: killed as one
                )
                with self._lock:
                    self._active.add(process)
                killed = False
                try:
                    process.wait(timeout=self.watchdog)
                except subprocess.TimeoutExpired:
                    killed = True
                    _kill_group(process)
                finally:
                    with self._lock:
                        self._active.discard(process)
            try:
                report = json.loads(report_path.read_text())
            except (OSError, ValueError):
                report = {}
            tail = output_path.read_bytes()[-OUTPUT_TAIL:].decode(errors="replace")
        return Run(report, None if killed else process.returncode, killed, tail)

    def stop(self) -> None:
        """Kill every subprocess still running and start no other (Ctrl-C in the middle of a batch)."""
        with self._lock:
            self.stopped = True
            active = list(self._active)
        for process in active:
            _kill_group(process)

    # ---- one submission ----

    def grade(self, submission: str | os.PathLike[str]) -> SubmissionResult:
        """Grade one submission; never raises for anything the submission does."""
        label = str(submission)
        result = SubmissionResult(label)
        folder = Path(submission).expanduser().resolve()
        problem = _layout_problem(folder)
        if problem:
            result.concepts = {c.name: error_result(c, problem) for c in self.concepts}
            return result
        remaining = list(self.concepts)
        while remaining:
            run = self._run(folder, remaining)
            summaries = run.report.get("concepts", {})
            # Exit status 2 is an interrupted session: a KeyboardInterrupt raised by the submission stops pytest.
            if run.report.get("finished") and run.report.get("exitstatus") != PYTEST_INTERRUPTED:
                for concept in remaining:
                    result.concepts[concept.name] = concept_result(concept, summaries.get(concept.name))
                break
            # The run did not finish: a watchdog kill, an interrupt, or the interpreter died. Keep what completed.
            running = run.report.get("current_concept")
            for concept in remaining:
                summary = summaries.get(concept.name)
                if concept.name == running:
                    result.concepts[concept.name] = self._stopped_while_running(concept, run)
                elif summary and summary["collected"] and _complete(summary):
                    result.concepts[concept.name] = concept_result(concept, summary)
            still = [c for c in remaining if c.name not in result.concepts]
            if len(still) == len(remaining):  # nothing was learnt: the run failed before any test
                why = _describe_failed_run(run, self.watchdog)
                for concept in still:
                    result.concepts[concept.name] = error_result(
                        concept, why, status="timeout" if run.killed else "error")
                break
            remaining = still
        result.concepts = {c.name: result.concepts[c.name] for c in self.concepts}
        return result


    def _stopped_while_running(self, concept: Concept, run: Run) -> ConceptResult:
        """The result of the concept whose test was running when its process was killed, interrupted or died."""
        where = f"while running {run.report.get('current')}"
        if run.killed:
            return error_result(concept, f"timed out: the test process was killed after {self.watchdog:g} s "
                                f"{where}", status="timeout")
        if run.returncode == PYTEST_INTERRUPTED:
            return error_result(concept, f"the test run was interrupted (a KeyboardInterrupt from the submission?) "
                                f"{where}")
        return error_result(concept, f"the test process died (exit code {run.returncode}) {where}")


def _complete(summary: dict[str, Any]) -> bool:
    return summary["passed"] + summary["failed"] + summary["skipped"] >= summary["collected"]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _layout_problem(folder: Path) -> str | None:
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not any((folder / f"{c.name}.py").exists() for c in CONCEPTS):
        return f"{folder} holds none of the concept modules ({', '.join(c.name + '.py' for c in CONCEPTS)})"
    return None


def _describe_failed_run(run: Run, watchdog: float) -> str:
    if run.killed:
        return f"timed out: the test process was killed after {watchdog:g} s before any test finished"
    lines = [line for line in run.output_tail.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "no output"
    return f"the test process ended (exit code {run.returncode}) before any test finished: {last}"[:400]


# ---- a batch -----------------------------------------------------------------------------------------------------


def grade_all(
    submissions: Sequence[str],
    grader: Grader,
    *,
    jobs: int = 1,
    on_result: Callable[[SubmissionResult], None] | None = None,
) -> list[SubmissionResult]:
    """Grade every submission, ``jobs`` at a time, in the given order; a failure never stops the batch.

    On KeyboardInterrupt the running subprocesses are killed and the submissions not graded yet get ``error``
    ("not graded"), so the caller can still write its reports; the interrupt is then raised again.
    """
    results: list[SubmissionResult | None] = [None] * len(submissions)

    def one(index: int) -> None:
        try:
            result = grader.grade(submissions[index])
        except GradingStopped:
            return
        except Exception as error:  # the grader's own failure, for this submission only
            result = SubmissionResult(
                submissions[index], {c.name: error_result(c, f"grader error: {type(error).__name__}: {error}")
                                     for c in grader.concepts})
        if grader.stopped:  # its subprocess was killed by the interrupt, not by its own fault
            return
        results[index] = result
        if on_result is not None:
            try:
                on_result(result)
            except Exception:  # a progress line that cannot be printed must not lose a result
                pass

    interrupted: BaseException | None = None
    futures = []
    executor = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures += [executor.submit(one, index) for index in range(len(submissions))]
        for future in futures:
            while not future.done():  # short waits: Ctrl-C reaches the main thread at once
                wait([future], timeout=0.2)
            future.result()
    except KeyboardInterrupt as error:
        interrupted = error
        for future in futures:
            future.cancel()
        grader.stop()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    final = [
        result if result is not None else SubmissionResult(
            submissions[index], {c.name: error_result(c, "not graded (interrupted)") for c in grader.concepts})
        for index, result in enumerate(results)
    ]
    if interrupted is not None:
        raise GradingInterrupted(final) from interrupted
    return final


class GradingStopped(Exception):
    """Raised inside a grading thread once the batch was interrupted."""


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C during a batch; ``results`` holds every submission, the unfinished ones as errors."""

    def __init__(self, results: list[SubmissionResult]) -> None:
        super().__init__("grading interrupted")
        self.results = results


# ---- reports -----------------------------------------------------------------------------------------------------


def to_json(results: Sequence[SubmissionResult]) -> dict[str, Any]:
    return {"submissions": [result.as_json() for result in results]}


def to_csv(results: Sequence[SubmissionResult], concepts: Sequence[Concept] = CONCEPTS) -> str:
    """One row per submission: its points in each concept, the total and the maximum."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["submission", *(c.name for c in concepts), "total", "max_total"])
    for result in results:
        cells = [format_points(result.concepts[c.name].points) if c.name in result.concepts else ""
                 for c in concepts]
        writer.writerow([result.submission, *cells, format_points(result.total),
                         format_points(result.max_total)])
    return stream.getvalue()


def to_gradescope(result: SubmissionResult, concepts: Sequence[Concept] = CONCEPTS) -> dict[str, Any]:
    """The ``results.json`` an autograder platform reads: one test per concept, and the score."""
    tests = []
    for concept in concepts:
        if concept.name not in result.concepts:
            continue
        r = result.concepts[concept.name]
        output = f"{r.status}: {r.passed} of {r.passed + r.failed} tests passed"
        if r.message:
            output += f"\nfirst failure: {r.message}"
        output += f"\nread {concept.guide_section}; run `kata check {concept.name}` to see every failure"
        tests.append({"name": f"{concept.number}. {concept.name}: {concept.title}", "score": r.points,
                      "max_score": r.max_points, "output": output})
    return {"score": result.total, "tests": tests}


def markdown(results: Sequence[SubmissionResult], concepts: Sequence[Concept] = CONCEPTS) -> str:
    """A summary table (a row per submission), then what went wrong in each, concept by concept."""
    names = [c.name for c in concepts]
    lines = ["| submission | " + " | ".join(names) + " | total |",
             "|---|" + "---:|" * len(names) + "---:|"]
    for result in results:
        cells = []
        for name in names:
            r = result.concepts.get(name)
            cells.append("" if r is None else f"{format_points(r.points)}/{format_points(r.max_points)}"
                         + ("" if r.status == "passed" else f" {r.status}"))
        lines.append(f"| {_cell(result.submission)} | " + " | ".join(cells)
                     + f" | {format_points(result.total)}/{format_points(result.max_total)} |")
    for result in results:
        problems = [(name, r) for name, r in result.concepts.items() if r.status != "passed"]
        if not problems:
            continue
        lines += ["", f"{result.submission}:"]
        for name, r in problems:
            counts = f"{r.passed} of {r.passed + r.failed} passed" if r.passed + r.failed else "no test ran"
            lines.append(f"- {name} ({r.status}, {counts}): {_cell(r.message)}")
    return "\n".join(lines) + "\n"


def format_points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_reports(
    results: Sequence[SubmissionResult],
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    gradescope_path: str | None = None,
    concepts: Sequence[Concept] = CONCEPTS,
) -> list[Path]:
    """Write every requested report; returns the paths written."""
    written = []
    if json_path:
        written.append(_write(json_path, json.dumps(to_json(results), indent=2) + "\n"))
    if csv_path:
        written.append(_write(csv_path, to_csv(results, concepts)))
    if gradescope_path and results:
        written.append(_write(gradescope_path, json.dumps(to_gradescope(results[0], concepts), indent=2) + "\n"))
    return written


def _write(path: str, text: str) -> Path:
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target
