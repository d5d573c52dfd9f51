"""Prove that every shipped stub still fails: every concept test, run on ``exercises/``, must fail, and must fail
with the one-line "not implemented yet" message a student can read (not a traceback from the frame).

    python -m kata.catalogue.selfcheck [--impl exercises] [CONCEPT ...]

Tests of the frame (marker ``frame``) are not concept tests and are left out. Exit status 0 only if at least one
concept test ran and none of them passed or failed for another reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pytest

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, concept
from kata.concepts.stub import NOT_IMPLEMENTED_PREFIX


class _Outcomes:
    """A pytest plugin that keeps each concept test's outcome and failure text."""

    def __init__(self) -> None:
        self.results: dict[str, tuple[str, str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            previous = self.results.get(report.nodeid)
            if previous is None or previous[0] == "passed":
                self.results[report.nodeid] = (report.outcome, str(report.longrepr or ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kata selfcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", help="concepts to check (default: all)")
    parser.add_argument("--impl", default="exercises", help="the stubs to check (default: exercises)")
    args = parser.parse_args(argv)
    names = args.concepts or [c.name for c in CONCEPTS]
    for name in names:
        concept(name)

    outcomes = _Outcomes()
    started = time.perf_counter()
    os.chdir(REPOSITORY_ROOT)
    exit_code = pytest.main(
        ["tests", "--impl", args.impl, "-m", " or ".join(names), "-q", "--no-header", "-p", "no:cacheprovider",
         "--tb=no", "--no-summary", "-o", "console_output_style=classic"],
        plugins=[outcomes],
    )
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        print(f"selfcheck: pytest could not run the concept tests (exit {int(exit_code)})")
        return 1

    wrong, passing = [], 0
    for nodeid, (outcome, text) in sorted(outcomes.results.items()):
        if outcome == "passed":
            passing += 1
            wrong.append(f"PASSES ON THE STUB  {nodeid}")
        elif NOT_IMPLEMENTED_PREFIX not in text:
            first = text.strip().splitlines()[-1] if text.strip() else "(no message)"
            wrong.append(f"UNREADABLE FAILURE  {nodeid}: {first[:160]}")
    for line in wrong:
        print(line)
    total = len(outcomes.results)
    good = total - len(wrong)
    seconds = time.perf_counter() - started
    if not total:
        print(f"no concept test ran on {args.impl} ({seconds:.1f} s): nothing was checked")
    elif not wrong:
        print(f"{good} of {total} concept tests fail on the stubs, as they must: each with its one-line "
              f"'not implemented yet' ({args.impl}, {seconds:.1f} s)")
    else:
        print(f"{len(wrong)} of {total} concept tests do not fail on the stubs as they must: {passing} pass, "
              f"{len(wrong) - passing} fail without the one-line 'not implemented yet' ({args.impl}, {seconds:.1f} s)")
    return 0 if total and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
