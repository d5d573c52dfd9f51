"""Grade a batch of submissions with one :class:`kata.grading.grader.Grader`: several at a time, reports rewritten after
each.

``grade_all`` grades every submission, ``jobs`` at a time (threads, each waiting on its own pytest subprocess), and
keeps their order; one submission's failure, even the grader's own, becomes ``error`` for its concepts and the batch
goes on. Ctrl-C stops every run still going and is raised again as :class:`GradingInterrupted`, which carries every
submission (those not graded marked so). ``run_batch`` is ``grade_all`` as `kata grade` runs it: the reports
(kata.grading.results.write_reports) rewritten after every submission and at the end, and SIGTERM handled as Ctrl-C,
so a batch stopped midway leaves complete reports of what was graded.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from kata.grading.grader import Grader, GradingStopped, SandboxUnavailable
from kata.grading.results import SubmissionResult, error_result, not_graded, printable, write_reports


def grade_all(
    submissions: Sequence[str],
    grader: Grader,
    *,
    jobs: int = 1,
    on_result: Callable[[SubmissionResult, list[SubmissionResult]], None] | None = None,
) -> list[SubmissionResult]:
    """Grade every submission, ``jobs`` at a time, in the given order; a failure never stops the batch.

    ``on_result(result, so_far)`` is called after each one, ``so_far`` holding every submission in order (those
    not graded yet as such), so the caller can rewrite its reports. On KeyboardInterrupt the running subprocesses
    are stopped and the interrupt is raised again as GradingInterrupted, with the same list. A grader asked to
    sandbox its runs where bwrap cannot raises SandboxUnavailable before anything is graded.
    """
    refuse_unsandboxed(grader)
    results: list[SubmissionResult | None] = [None] * len(submissions)
    lock = threading.Lock()

    def so_far(why: str = "not graded yet") -> list[SubmissionResult]:
        return [r if r is not None else not_graded(s, why) for s, r in zip(submissions, results)]

    def one(index: int) -> None:
        try:
            result = grader.grade(submissions[index])
        except GradingStopped:
            return
        except Exception as error:  # the grader's own failure, for this submission only
            result = SubmissionResult(
                printable(submissions[index]),
                {c.name: error_result(c, f"grader error: {type(error).__name__}: {error}") for c in grader.concepts})
        if grader.stopped:  # its subprocess was stopped by the interrupt, not by its own fault
            return
        with lock:
            results[index] = result
            if on_result is not None:
                try:
                    on_result(result, so_far())
                except Exception:  # a progress line or a report that cannot be written must not lose a result
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
    if interrupted is not None:
        raise GradingInterrupted(so_far("not graded (interrupted)")) from interrupted
    return so_far()


def run_batch(
    submissions: Sequence[str],
    grader: Grader,
    *,
    jobs: int = 1,
    reports: dict[str, Any] | None = None,
    on_result: Callable[[SubmissionResult], None] | None = None,
) -> tuple[list[SubmissionResult], bool]:
    """``grade_all`` as `kata grade` runs it: ``write_reports(**reports)`` after every submission and at the end,
    SIGTERM handled as Ctrl-C. Returns the results and whether the batch was interrupted. Where the grader cannot
    sandbox its runs as asked, SandboxUnavailable is raised before anything is graded or written."""
    refuse_unsandboxed(grader)
    reports = reports or {}

    def after_each(result: SubmissionResult, so_far: list[SubmissionResult]) -> None:
        if on_result is not None:
            on_result(result)
        write_reports(so_far, **reports)  # a batch stopped midway keeps a complete report of what was graded

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    results = [not_graded(s, "not graded yet") for s in submissions]
    interrupted = False
    previous = signal.signal(signal.SIGTERM, interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        results = grade_all(submissions, grader, jobs=jobs, on_result=after_each)
    except GradingInterrupted as stopped:
        results, interrupted = stopped.results, True
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        write_reports(results, **reports)
    return results, interrupted


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a batch; ``results`` holds every submission, those not graded marked so."""

    def __init__(self, results: list[SubmissionResult]) -> None:
        super().__init__("grading interrupted")
        self.results = results


def refuse_unsandboxed(grader: Grader) -> None:
    """SandboxUnavailable (one line: why, the command that installs bwrap, the flag that grades unsandboxed) where
    ``grader`` is asked to sandbox its runs and bwrap cannot."""
    problem = grader.sandbox_problem()
    if problem:
        raise SandboxUnavailable(problem)
