"""pytest plugin: remember each concept's results for ``kata status``, and report them to the grader.

Registered by the repository's ``conftest.py``. It does three things:

- **Progress** (on by default, only for the student's own ``exercises`` with no ``--mistake``): at the end of a
  session it merges each concept's test outcomes into ``.kata/progress.json`` (or ``$KATA_PROGRESS``), stamped with
  the fingerprint of the files they depend on (:func:`kata.testing.record.fingerprint`). ``--kata-no-progress`` turns it
  off.
- **Report** (``--kata-report FILE``, used by ``kata grade``): per concept, tests collected, passed, failed,
  skipped, timed out, unable to import the module or to be set up at all, and the first failure's message;
  rewritten after every test with the test in progress, so a grader that has to kill a hung run still knows what
  finished and what hung.
- **Per-test deadline** (``--kata-test-timeout SECONDS``, used by ``kata grade`` and ``kata check``): a test that
  runs longer fails with :class:`TestTimeout`, and the remaining tests of its concept fail at once without running.
  The deadline raises a ``BaseException`` on purpose: Hypothesis catches ``Exception`` and pytest's ``Failed``
  (what pytest-timeout raises) to shrink a failure, and would then run the hanging code again with no alarm left.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kata.testing import record
from kata.concepts.manifest import CONCEPTS
from kata.concepts.platforms import has_sigalrm, interrupt_after
from kata.concepts.stub import is_stub_error, leaf_exceptions

if TYPE_CHECKING:
    from _pytest.reports import TestReport

CONCEPT_NAMES = tuple(c.name for c in CONCEPTS)
MESSAGE_LIMIT = 300

# What went wrong in a failed test, for the grader's statuses.
KIND_FAILED = "failed"
KIND_NOT_IMPLEMENTED = "not_implemented"
KIND_IMPORT_ERROR = "import_error"
KIND_SETUP_ERROR = "setup_error"  # the test could not be set up (the submission's package itself does not load)
KIND_TIMEOUT = "timeout"


class TestTimeout(BaseException):
    """A test outlived ``--kata-test-timeout``; not an ``Exception``, so Hypothesis cannot swallow it."""

    __test__ = False  # not a test class, whatever its name says


class NotRunAfterTimeout(TestTimeout):
    """A test not run because an earlier test of the same concept timed out."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kata")
    group.addoption("--kata-report", default=None, metavar="FILE",
                    help="write per-concept results as JSON to FILE, after every test (used by `kata grade`)")
    group.addoption("--kata-test-timeout", type=float, default=0.0, metavar="SECONDS",
                    help="fail a test that runs longer than SECONDS, and skip the rest of its concept "
                    "(0: no limit; used by `kata grade`)")
    group.addoption("--kata-no-progress", action="store_true", default=False,
                    help="do not record results in .kata/progress.json for `kata status`")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Recorder(config), "kata-progress-recorder")


def concept_of(item: pytest.Item) -> str | None:
    for marker in item.iter_markers():
        if marker.name in CONCEPT_NAMES:
            return marker.name
    return None


def classify(error: BaseException) -> tuple[str, str]:
    """(kind, one-line message) of the exception that failed a test."""
    from kata.concepts.impl import ImplementationImportError  # light; imported late so the plugin loads fast

    leaves = leaf_exceptions(error)
    for wanted in (TestTimeout, ImplementationImportError):
        for leaf in leaves:
            if isinstance(leaf, wanted):
                kind = KIND_TIMEOUT if wanted is TestTimeout else KIND_IMPORT_ERROR
                return kind, _one_line(str(leaf))
    # A genuine failure comes first, before any stub's line among the same test's errors.
    leaf = next((leaf for leaf in leaves if not is_stub_error(leaf)), leaves[0])
    text = str(leaf)
    if is_stub_error(leaf):
        return KIND_NOT_IMPLEMENTED, _one_line(text)
    if type(leaf).__name__ == "Failed" and text.startswith("Timeout"):  # pytest-timeout, when it is in charge
        return KIND_TIMEOUT, _one_line(text)
    return KIND_FAILED, _one_line(f"{type(leaf).__name__}: {_numpy_summary(text)}" if text else type(leaf).__name__)


# The first line of numpy.testing's assertion text: the message the test gave follows it.
_NUMPY_HEADERS = ("Arrays are not equal", "Arrays are not almost equal", "Not equal to tolerance",
                  "Items are not equal", "Arrays are not less-ordered")
_NUMPY_DETAILS = ("Mismatched elements", "Mismatch at ind", "Max absolute difference", "Max relative difference",
                  "ACTUAL:", "DESIRED:", "x and y nan location mismatch", "x and y +inf location mismatch",
                  "x and y -inf location mismatch", "inf location mismatch", "nan location mismatch", "(shapes ",
                  "x: ", "y: ")


def _numpy_summary(text: str) -> str:
    """numpy.testing's failure text (a blank line, its header, the test's message, the details) as one line: the
    test's message first, then what was compared; any other text unchanged."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith(_NUMPY_HEADERS):
        return text
    message = lines[1] if len(lines) > 1 and not lines[1].startswith(_NUMPY_DETAILS) else ""
    compared: list[str] = []
    for line in lines:  # an array's repr may run over several lines: each block ends where the next begins
        if line.startswith(("ACTUAL:", "DESIRED:")):
            compared.append(line)
        elif compared and not line.startswith(_NUMPY_DETAILS):
            compared[-1] += " " + line
    # "ACTUAL: array([1.5, 1. ])" reads as "ACTUAL: [1.5, 1.]": the values, without NumPy's wrapper and padding.
    compared = [_plain_array(block) for block in compared]
    details = "; ".join(compared) if compared else lines[0]
    return f"{message} ({details})" if message else details


def _plain_array(block: str) -> str:
    """``"ACTUAL: array([ 1.5 ,  1. ])"`` -> ``"ACTUAL: [1.5, 1.]"``."""
    block = re.sub(r"\s+", " ", block)
    if re.match(r"^(ACTUAL|DESIRED): array\(", block):  # a long array ends in "..." instead of ")"
        block = block.replace("array(", "", 1).removesuffix(")")
    return re.sub(r"\s+,", ",", re.sub(r"\s+\]", "]", re.sub(r"\[\s+", "[", block)))


def _one_line(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


class Recorder:
    """Collects outcomes per test and per concept; writes the progress file and the grader's report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        report = config.getoption("--kata-report")
        self.report_path = Path(report).resolve() if report else None
        self.test_timeout = float(config.getoption("--kata-test-timeout") or 0.0)
        self.records_progress = self._is_students_own_run(config)
        self.known: dict[str, tuple[str, bool]] = {}  # node id -> (concept, slow), selected or deselected
        self.selected: dict[str, str] = {}  # node id -> concept, the tests this session runs
        self.outcomes: dict[str, record.TestRecord] = {}
        self.kinds: dict[str, str] = {}
        self.timed_out: set[str] = set()
        self.current: str | None = None
        self.finished = False

    @staticmethod
    def _is_students_own_run(config: pytest.Config) -> bool:
        from kata.concepts.impl import default_spec

        if config.getoption("--kata-no-progress") or config.getoption("--kata-report"):
            return False
        spec = config.getoption("--impl", default=None) or default_spec()
        return spec == "exercises" and not config.getoption("--mistake", default=None)

    # ---- collection ----

    def _know(self, items: list[pytest.Item]) -> None:
        for item in items:
            concept = concept_of(item)
            if concept is not None:
                self.known[item.nodeid] = (concept, item.get_closest_marker("slow") is not None)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self._know(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._know(session.items)
        self.selected = {item.nodeid: self.known[item.nodeid][0] for item in session.items
                         if item.nodeid in self.known}
        self._write_report()

    # ---- running ----

    @contextmanager
    def _deadline(self) -> Iterator[None]:
        usable = self.test_timeout > 0 and threading.current_thread() is threading.main_thread()
        if not usable:
            yield
            return
        seconds = self.test_timeout
        if not has_sigalrm():  # Windows: a timer thread interrupts the main thread instead
            with interrupt_after(seconds, lambda: TestTimeout(
                    f"timed out: the test ran longer than {seconds:g} s (an endless loop?)")):
                yield
            return

        def expire(signum: int, frame: Any) -> None:
            raise TestTimeout(f"timed out: the test ran longer than {seconds:g} s (an endless loop?)")

        previous = signal.signal(signal.SIGALRM, expire)
        outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, if it set one
        started = time.monotonic()
        # Re-armed every second after the first expiry: code that swallows one exception gets another.
        signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer_delay > 0:
                left = max(outer_delay - (time.monotonic() - started), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, outer_interval)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = nodeid
        self._write_report()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        concept = concept_of(item)
        if self.test_timeout > 0 and concept in self.timed_out:
            raise NotRunAfterTimeout(f"not run: an earlier {concept} test timed out")
        with self._deadline():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._deadline():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._deadline():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
        report = yield
        if call.excinfo is not None and report.failed:
            kind, message = classify(call.excinfo.value)
            if kind == KIND_FAILED and call.when == "setup":
                kind = KIND_SETUP_ERROR
            if call.excinfo.errisinstance(NotRunAfterTimeout):
                report.longrepr = message  # one line; the test that timed out shows where the code was stuck
            report.kata_kind, report.kata_message = kind, message  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: TestReport) -> None:
        node = report.nodeid
        if node not in self.known:
            return
        concept, slow = self.known[node]
        previous = self.outcomes.get(node)
        if report.failed:
            if previous is None or previous.outcome != "failed":  # the first failing phase tells why
                kind = getattr(report, "kata_kind", KIND_FAILED)
                message = getattr(report, "kata_message", "") or _one_line(str(report.longrepr))
                self.outcomes[node] = record.TestRecord("failed", slow, message)
                self.kinds[node] = kind
                if kind == KIND_TIMEOUT:
                    self.timed_out.add(concept)
        elif report.skipped and previous is None:
            self.outcomes[node] = record.TestRecord("skipped", slow)
        elif report.when == "call" and report.passed and previous is None:
            self.outcomes[node] = record.TestRecord("passed", slow)
        if report.when == "teardown":
            self.current = None
            self._write_report()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finished = True  # `current` stays: after an interrupt it names the test that was running
        self._write_report(exitstatus)
        if self.records_progress:
            self._record_progress()

    # ---- output ----

    def concept_summary(self) -> dict[str, dict[str, Any]]:
        """Per selected concept: counts of outcomes and kinds, and the first failure's message."""
        summary: dict[str, dict[str, Any]] = {}
        for node, concept in self.selected.items():
            entry = summary.setdefault(concept, dict(collected=0, passed=0, failed=0, skipped=0, timeout=0,
                                                     import_error=0, setup_error=0, not_implemented=0, message="",
                                                     kind=""))
            entry["collected"] += 1
            outcome = self.outcomes.get(node)
            if outcome is None or outcome.outcome is None:
                continue
            entry[outcome.outcome] += 1
            if outcome.outcome == "failed":
                kind = self.kinds.get(node, KIND_FAILED)
                if kind in (KIND_TIMEOUT, KIND_IMPORT_ERROR, KIND_SETUP_ERROR, KIND_NOT_IMPLEMENTED):
                    entry[kind] += 1
                if not entry["message"]:
                    entry["message"], entry["kind"] = outcome.message, kind
        return summary

    def _write_report(self, exitstatus: int | None = None) -> None:
        if self.report_path is None:
            return
        current_concept = self.selected.get(self.current) if self.current else None
        data = {
            "finished": self.finished,
            "exitstatus": int(exitstatus) if exitstatus is not None else None,
            "current": self.current,
            "current_concept": current_concept,
            "concepts": self.concept_summary(),
        }
        record.write_json_atomically(self.report_path, data)

    def _record_progress(self) -> None:
        from kata.concepts.impl import REPOSITORY_ROOT

        exercises_dir, tests_dir = REPOSITORY_ROOT / "exercises", REPOSITORY_ROOT / "tests"
        by_concept: dict[str, record.ConceptRecord] = {}
        for node, (concept, slow) in self.known.items():
            if concept not in by_concept:
                by_concept[concept] = record.ConceptRecord(record.fingerprint(concept, exercises_dir, tests_dir))
            by_concept[concept].tests[node] = self.outcomes.get(node) or record.TestRecord(None, slow)
        ran = {c for node, (c, _) in self.known.items() if node in self.outcomes}
        if not ran:
            return
        # Tests named one by one (path::test): the concept's other tests were never collected, so unknown.
        partial = any("::" in str(argument) for argument in self.config.args)
        try:
            record.record_results({c: r for c, r in by_concept.items() if c in ran}, partial=partial)
        except OSError as error:  # a read-only checkout must not fail the tests
            self.config.get_terminal_writer().line(f"kata: could not record progress ({error})")
