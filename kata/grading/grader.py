"""Grade submissions with the reference's tests: per concept, tests passed and failed, points and a status.

Each submission (a folder laid out like ``exercises/``) is graded in one pytest subprocess, run in a fresh copy of
this repository's tests and grader (kata.grading.workspace) under the ``ci`` Hypothesis profile (derandomized: every
submission meets the same examples). Slow integration tests are included by default: they are the proof that the
student's functions train the lab's agents (``include_slow=False`` leaves them out). The ``frame`` tests are never
run.

Credit per concept (the default): each concept is graded on the submission's own module for it, with the
reference's modules for the concepts it builds on (per-concept views, one subprocess for all of them), so a broken
early concept never costs a later one its points. Where a concept passes on its own code and one it builds on
failed, its tests run again on the submission's own chain: ``chained_status`` (and a sentence in every report)
says whether it still passes. If a concept it builds on does not load or hangs, the chain is not run again (that
would cost another timeout): it inherits that status. ``chained=True`` grades everything on the submission's own
modules, as one package.

Points are partial credit: ``points * passed / (passed + failed)``; ``error`` (the module does not import, or no
test ran) and ``timeout`` earn zero.

Robustness, in layers:

1. The plugin :mod:`kata.testing.progress` fails a test that outlives ``timeout`` seconds (an exception Hypothesis
   cannot swallow) and the rest of that concept at once, so one hanging concept costs one timeout.
2. A test still running ``timeout + kill_grace`` seconds after it started (it ignores the alarm, or hangs where no
   signal reaches) is killed with its whole run; so is a run past ``watchdog`` seconds. The plugin's report,
   rewritten after every test, names the test that was running: its concept gets ``timeout`` (or ``error`` if the
   process died or was interrupted), and the concepts not finished yet are graded again in a fresh subprocess.
3. Every run goes through kata.grading.limits: limits on address space, CPU time and processes (named in the report
   when they fire), and no process left behind, whether started in the background or in a new session.
   kata.grading.sandbox (bwrap) also confines each run and diagnosis: its copy read-write, the interpreter
   read-only, nothing else, no network, a PID namespace of its own. ``sandbox=False`` turns it off; with it on and
   bwrap missing or unable to start, nothing runs: :class:`SandboxUnavailable` (``sandbox_problem()`` says why).
4. A submission cannot import ``solutions`` or the catalogues (kata.grading.guard), and a run that changes the copy
   of the tests it ran with is reported and its concepts become ``error``.
5. Anything else that goes wrong with one submission becomes ``error`` for its concepts; the batch goes on
   (:mod:`kata.grading.batch`: ``grade_all`` and ``run_batch``).

What one interpreter cannot stop: the submission runs in the same process as the tests and the plugin that records their
results (unsandboxed, with the grader's rights too). docs/grading.md, "What grading does not protect against".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, Concept
from kata.concepts.sources import started
from kata.grading import sandbox as bwrap
from kata.grading import workspace
from kata.grading.results import (
    ConceptResult,
    SubmissionResult,
    chained_sentence,
    concept_result,
    error_result,
    mark_not_attempted,
    printable,
)
from kata.testing.limits import DEFAULT_TEST_TIMEOUT

HYPOTHESIS_PROFILE = "ci"
PYTEST_INTERRUPTED = 2  # pytest's exit status for a session stopped by KeyboardInterrupt
OUTPUT_TAIL = 2000  # characters of a crashed run's output kept for its error message
MEMORY_LIMIT = 4 * 2**30  # bytes of address space per run; the whole suite on the reference needs under 1 GiB
PROCESS_LIMIT = 256  # processes (threads included) a run may add to what its user runs already
STOP_GRACE = 5.0  # seconds between asking a run to stop and killing it
SIGXCPU_EXIT = 128 + getattr(signal, "SIGXCPU", 24)  # Windows has no SIGXCPU (nor the limits that send it)
LIMIT_SIGNS = {  # what a failure message shows when a limit fired
    "address space": ("MemoryError", "can't allocate memory", "std::bad_alloc", "Cannot allocate memory"),
    "processes": ("BlockingIOError", "Resource temporarily unavailable"),
}


def default_watchdog(timeout: float) -> float:
    """Seconds before a whole run of one submission is killed: ten per-test timeouts."""
    return 10.0 * timeout


def default_kill_grace(timeout: float) -> float:
    """Seconds past ``timeout`` after which a test that ignores its alarm is killed."""
    return max(5.0, timeout / 4)


class GradingStopped(Exception):
    """Raised inside a grading thread once the batch was interrupted (:meth:`Grader.stop`)."""


class SandboxUnavailable(RuntimeError):
    """The grader was asked to sandbox its runs and bwrap cannot: no submitted code is run (the message says why,
    and how to install bwrap or to grade unsandboxed)."""


@dataclass
class Run:
    """One pytest subprocess: its plugin report (possibly partial), exit code, and how it ended."""

    report: dict[str, Any]
    returncode: int | None
    killed: str  # "" or why the grader killed it
    output_tail: str
    changed: list[str]  # files of the run's copy that the run changed


class Grader:
    """Grades one submission at a time; thread-safe, so several can run side by side (``--jobs``)."""

    def __init__(
        self,
        *,
        concepts: Sequence[Concept] = CONCEPTS,
        timeout: float = DEFAULT_TEST_TIMEOUT,
        watchdog: float | None = None,
        kill_grace: float | None = None,
        include_slow: bool = True,
        chained: bool = False,
        threads_per_job: int | None = None,
        memory_limit: int = MEMORY_LIMIT,
        cpu_limit: float | None = None,
        process_limit: int = PROCESS_LIMIT,
        repository: Path = REPOSITORY_ROOT,
        reference: Path | None = None,
        python: str = sys.executable,
        diagnose: bool = False,
        sandbox: bool = True,
        passed_variables: Sequence[str] = (),
    ) -> None:
        self.concepts = list(concepts)
        self.timeout = float(timeout)
        self.watchdog = float(watchdog) if watchdog is not None else default_watchdog(self.timeout)
        self.kill_grace = float(kill_grace) if kill_grace is not None else default_kill_grace(self.timeout)
        self.include_slow = include_slow
        self.chained = chained
        self.threads_per_job = threads_per_job
        self.memory_limit = memory_limit
        self.cpu_limit = int(cpu_limit if cpu_limit is not None else self.watchdog)
        self.process_limit = process_limit
        self.repository = Path(repository)
        self.reference = Path(reference) if reference is not None else self.repository / workspace.REFERENCE
        self.python = python
        self.diagnose = diagnose  # name the catalogued mistakes each failed concept behaves like (kata diagnose)
        self.sandbox = sandbox  # confine every run with bwrap, or run nothing (kata.grading.sandbox)
        self.passed_variables = tuple(passed_variables)  # the grader's variables a run may see beyond the basics
        self._sandbox_problem: str | None = None  # why bwrap cannot confine the runs, once known ("" when it can)
        self._active: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self.stopped = False

    # ---- the subprocess ----

    def _command(self, impl: Path, concepts: Iterable[Concept], report: Path) -> list[str]:
        concepts = list(concepts)  # read twice below
        selection = " or ".join(c.name for c in concepts)
        marker = f"({selection})" + ("" if self.include_slow else " and not slow")
        # The copy's ini file and rootdir, named outright: a submission that lives in a clone of the kata (with its
        # own pyproject.toml) must not become pytest's rootdir. `--impl=PATH` in one word, so pytest does not take
        # the path for a test argument either.
        root = impl.parent
        ini = [f"--config-file={root / 'repository' / name}" for name in ("pytest.ini", "pyproject.toml")
               if (root / "repository" / name).exists()][:1]
        # Only the graded concepts' test modules are collected: importing the rest (the frame's tests above all) in
        # a copy without bytecode would cost about a second of every run. The marker still selects within them.
        modules = [f"tests/test_{c.name}.py" for c in concepts]
        if not all((root / "repository" / module).is_file() for module in modules):
            modules = ["tests"]
        return [
            *self._confined(root), *self._limits(),
            self.python, "-m", "pytest", *modules, f"--rootdir={root / 'repository'}", *ini,
            f"--impl={impl}", "-m", marker, "-p", "kata.grading.guard",
            "-p", "kata.testing.progress", "--kata-report", str(report), "--kata-test-timeout", f"{self.timeout:g}",
            "--timeout", "0",  # pytest-timeout off: Hypothesis swallows its exception (see kata.testing.progress)
            "-q", "--no-header", "-p", "no:cacheprovider", "-p", "no:randomly",
        ]

    def _limits(self) -> list[str]:
        """The command prefix that runs a command under this grader's limits (kata.grading.limits)."""
        limits = [f"--memory={self.memory_limit}", f"--cpu={self.cpu_limit}",
                  f"--processes={self.process_limit if os.getuid() else 0}"]  # root ignores RLIMIT_NPROC
        return [self.python, "-m", "kata.grading.limits", *limits, "--"]

    def _confined(self, scratch: Path) -> list[str]:
        """The bwrap prefix that confines a run to ``scratch`` (before ``_limits()``), or [] when ``sandbox`` is off;
        SandboxUnavailable where bwrap cannot confine it: submitted code never runs unsandboxed unless asked."""
        if not self.sandbox:
            return []
        problem = self.sandbox_problem()
        if problem:
            raise SandboxUnavailable(problem)
        return bwrap.command(scratch, python=self.python, hidden=(self.repository, self.reference))

    def sandbox_problem(self) -> str | None:
        """Why bwrap cannot confine the runs though ``sandbox`` asks (one line: the command that installs it, the
        flag that grades unsandboxed), or None: asked once, before anything runs (`kata grade` refuses then)."""
        with self._lock:
            if self._sandbox_problem is None:
                self._sandbox_problem = (bwrap.unavailable(self.python) or "") if self.sandbox else ""
        return self._sandbox_problem or None

    def _environment(self) -> dict[str, str]:
        environment = bwrap.run_environment(self.passed_variables)
        environment.update(
            KATA_HYPOTHESIS_PROFILE=HYPOTHESIS_PROFILE,
            PYTHONDONTWRITEBYTECODE="1",  # leave the submission's folder as it was handed in
            PYTHONHASHSEED="0",
        )
        if self.threads_per_job:  # several jobs side by side: do not let each torch take every core
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                environment[name] = str(self.threads_per_job)
        return environment

    def _run(self, submission: Path, concepts: list[Concept], chained: bool) -> Run:
        """One run in a fresh copy: per-concept views of ``submission``, or (``chained``) the folder whole."""
        if self.stopped:
            raise GradingStopped("grading was interrupted")
        with tempfile.TemporaryDirectory(prefix="kata-grade-") as scratch_name:
            scratch = Path(scratch_name)
            repository = workspace.repository_copy(scratch / "repository", self.repository)
            if chained:
                impl = workspace.submission_files(submission, scratch / "submission")
            else:
                impl = workspace.concept_views(submission, scratch / "views", concepts, self.reference)
            before = workspace.fingerprint(repository)
            report_path, output_path = scratch / "report.json", scratch / "output.txt"
            with open(output_path, "wb") as output:
                process = subprocess.Popen(
                    self._command(impl, concepts, report_path), cwd=repository, env=self._environment(),
                    stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: stopped as one
                )
                with self._lock:
                    self._active.add(process)
                try:
                    killed = self._watch(process, report_path)
                finally:
                    with self._lock:
                        self._active.discard(process)
            report = _read_json(report_path)
            for summary in report.get("concepts", {}).values():  # name the submission, not the run's copy
                summary["message"] = re.sub(re.escape(str(impl)) + ("" if chained else r"/\w+"),
                                            printable(submission).replace("\\", "\\\\"), summary.get("message", ""))
            tail = output_path.read_bytes()[-OUTPUT_TAIL:].decode(errors="replace")
            changed = workspace.changed_files(before, workspace.fingerprint(repository))
        return Run(report, None if killed else process.returncode, killed, tail, changed)

    def _watch(self, process: subprocess.Popen[bytes], report_path: Path) -> str:
        """Wait for ``process``; stop it when one test or the whole run overruns. Returns why it was stopped."""
        started = time.monotonic()
        current, current_since = None, started
        while True:
            try:
                process.wait(timeout=0.25)
                return ""
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            test = _read_json(report_path).get("current")
            if test != current:
                current, current_since = test, now
            why = ""
            if current and now - current_since > self.timeout + self.kill_grace:
                why = f"killed {now - current_since:.0f} s after its test started (the limit is {self.timeout:g} s)"
            elif now - started > self.watchdog:
                why = f"killed after {self.watchdog:g} s, the limit for a whole run"
            if why:
                _stop(process)
                return why

    def stop(self) -> None:
        """Stop every run still going and start no other (Ctrl-C or SIGTERM in the middle of a batch)."""
        with self._lock:
            self.stopped = True
            active = list(self._active)
        for process in active:
            _stop(process)

    # ---- one submission ----

    def grade(self, submission: str | os.PathLike[str]) -> SubmissionResult:
        """Grade one submission; never raises for anything the submission does."""
        result = SubmissionResult(printable(submission))
        folder = Path(submission).expanduser().resolve()
        problem = workspace.layout_problem(folder)
        if problem:
            result.concepts = {c.name: error_result(c, problem) for c in self.concepts}
            return result
        result.concepts = self._grade_concepts(folder, self.concepts, chained=self.chained, notes=result.notes)
        for name, r in result.concepts.items():  # an untouched stub: told apart from code that fails
            mark_not_attempted(r, folder / f"{name}.py", self.reference / f"{name}.py")
        if self.chained:
            for r in result.concepts.values():
                r.chained_status = r.status
        else:
            self._grade_chains(folder, result)
        for name, r in result.concepts.items():
            limit = limit_reached(r.message)
            if limit:
                result.notes.append(f"{name}: the {limit} limit was reached ({self.limit_text(limit)})")
        result.concepts = {c.name: result.concepts[c.name] for c in self.concepts}
        if self.diagnose:
            self._diagnose(folder, result)
        return result

    def _diagnose(self, folder: Path, result: SubmissionResult) -> None:
        """``diagnoses`` of every concept: the catalogued mistakes a failed one behaves like (kata diagnose on the
        submission's own modules, beside the reference, under the run's limits and sandbox, in a throwaway copy of
        both); [] for the others."""
        from kata.grading.diagnoses import diagnose_submission  # the catalogue: only when asked

        failed = started(folder, [name for name, r in result.concepts.items() if r.status == "failed"], self.reference)
        found = diagnose_submission(folder, failed, prefix=self._limits(), isolate=self._confined,
                                    environment=self._environment(),
                                    repository=self.repository, reference=self.reference) if failed else []
        for name, r in result.concepts.items():
            r.extra["diagnoses"] = sorted({d.mistake for d in found if d.concept == name and d.mistake})

    def limit_text(self, limit: str) -> str:
        return {"address space": f"{self.memory_limit / 2**30:g} GiB", "processes": f"{self.process_limit} more",
                "CPU time": f"{self.cpu_limit} s"}[limit]

    def _grade_concepts(self, folder: Path, concepts: list[Concept], *, chained: bool,
                        notes: list[str]) -> dict[str, ConceptResult]:
        """Run until every concept in ``concepts`` has a result (a fresh run after a crash or a kill)."""
        results: dict[str, ConceptResult] = {}
        remaining = list(concepts)
        while remaining:
            run = self._run(folder, remaining, chained)
            if run.changed:
                shown = ", ".join(run.changed[:5]) + (" …" if len(run.changed) > 5 else "")
                notes.append(f"a run changed the grader's copy of the tests ({shown}): its concepts are not graded")
                for c in remaining:
                    results[c.name] = error_result(c, f"the run changed the grader's files ({shown})")
                break
            summaries = run.report.get("concepts", {})
            # Exit status 2 is an interrupted session: a KeyboardInterrupt raised by the submission stops pytest.
            if run.report.get("finished") and run.report.get("exitstatus") != PYTEST_INTERRUPTED:
                for c in remaining:
                    results[c.name] = concept_result(c, summaries.get(c.name))
                break
            # The run did not finish: a kill, an interrupt, a limit, or the interpreter died. Keep what completed.
            running = run.report.get("current_concept")
            for c in remaining:
                summary = summaries.get(c.name)
                if c.name == running:
                    results[c.name] = self._stopped_while_running(c, run)
                elif summary and summary["collected"] and _complete(summary):
                    results[c.name] = concept_result(c, summary)
            still = [c for c in remaining if c.name not in results]
            if len(still) == len(remaining):  # nothing was learnt: the run failed before any test
                why = self._describe_failed_run(run)
                for c in still:
                    results[c.name] = error_result(c, why, status="timeout" if run.killed else "error")
                break
            remaining = still
        return results

    def _grade_chains(self, folder: Path, result: SubmissionResult) -> None:
        """``chained_status`` of every concept: run again on the student's chain where it can differ."""
        rerun: list[Concept] = []
        for c in self.concepts:
            own = result.concepts[c.name]
            own.chained_status = own.status
            below = [(name, result.concepts[name].status) for name in workspace.builds_on(c.name, self.reference)
                     if name in result.concepts and result.concepts[name].status != "passed"]
            if not below or own.status not in ("passed", "failed"):
                continue
            broken = [(name, status) for name, status in below if status in ("error", "timeout")]
            if broken:  # running it would only meet the same error or cost another timeout
                own.chained_status = broken[0][1]
                own.chained_message = chained_sentence(c.name, own.status, own.chained_status, broken)
            else:
                rerun.append(c)
        if not rerun:
            return
        chained = self._grade_concepts(folder, rerun, chained=True, notes=result.notes)
        for c in rerun:
            own, again = result.concepts[c.name], chained[c.name]
            own.chained_status = again.status
            if again.status != own.status:
                culprits = [(name, result.concepts[name].status) for name in workspace.builds_on(c.name, self.reference)
                            if name in result.concepts and result.concepts[name].status != "passed"]
                own.chained_message = chained_sentence(c.name, own.status, again.status, culprits)

    def _stopped_while_running(self, c: Concept, run: Run) -> ConceptResult:
        """The result of the concept whose test was running when its process was killed, interrupted or died."""
        where = f"while running {run.report.get('current')}"
        if run.killed:
            return error_result(c, f"timed out: the test process was {run.killed}, {where}", status="timeout")
        if run.returncode == PYTEST_INTERRUPTED:
            return error_result(c, f"the test run was interrupted (a KeyboardInterrupt from the submission?) {where}")
        if run.returncode == SIGXCPU_EXIT:
            return error_result(c, f"the CPU time limit was reached ({self.cpu_limit} s of CPU) {where}",
                                status="timeout")
        return error_result(c, f"the test process died (exit code {run.returncode}) {where}")

    def _describe_failed_run(self, run: Run) -> str:
        if run.killed:
            return f"timed out: the test process was {run.killed}, before any test finished"
        lines = [line for line in run.output_tail.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else "no output"
        return f"the test process ended (exit code {run.returncode}) before any test finished: {last}"[:400]


def limit_reached(message: str) -> str:
    """Which resource limit a failure message shows fired ("" if none)."""
    if "CPU time limit" in message:
        return "CPU time"
    return next((limit for limit, signs in LIMIT_SIGNS.items() if any(sign in message for sign in signs)), "")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _complete(summary: dict[str, Any]) -> bool:
    return summary["passed"] + summary["failed"] + summary["skipped"] >= summary["collected"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ask the limits wrapper to stop its run (it kills and reaps everything below it), then kill its group if it
    must. A bwrap sandbox's PID namespace is killed first, so that bwrap collects it (kata.grading.sandbox.stop)."""
    if bwrap.stop(process, STOP_GRACE):
        return
    for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue

