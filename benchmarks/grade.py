"""Time `kata status` (target: 2 s or less) and grading one submission against the reference suite it runs
(target: within 1.5 times that suite's time).

    python benchmarks/grade.py [--repeats 5] [--rounds 1] [--no-slow] [--skip-grade]

`kata status` is timed as a fresh process (`python -m kata status`), as a student meets it. The grading figure
compares `kata grade` on a copy of solutions/ with `pytest --impl solutions` on the same selection (every concept's
tests, frame tests left out, the `ci` profile, slow integration tests included unless --no-slow), both fresh
processes; the difference is the grader's own overhead (the run's fresh copy and per-concept views, the limits
process, the bubblewrap sandbox where it works, the plugin's report, the reports written). ``kata grade --no-sandbox``
is timed in the same rounds: the difference is what the sandbox costs (kata.grading.sandbox; the same figure where
bwrap is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], environment: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=environment)
    return time.perf_counter() - started, completed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of `kata status`")
    parser.add_argument("--no-slow", action="store_true", help="leave the slow integration tests out of both")
    parser.add_argument("--skip-grade", action="store_true", help="only time `kata status`")
    parser.add_argument("--rounds", type=int, default=1, help="alternated runs of the suite and of the grader")
    args = parser.parse_args()
    print(f"machine: {describe_machine()} (load average {os.getloadavg()[0]:.1f})")

    with tempfile.TemporaryDirectory(prefix="kata-bench-") as scratch:
        environment = dict(os.environ, KATA_PROGRESS=str(Path(scratch) / "progress.json"))
        times = []
        for _ in range(args.repeats):
            wall, completed = timed([sys.executable, "-m", "kata", "status"], environment)
            if completed.returncode != 0:
                raise SystemExit(f"kata status failed: {completed.stderr}")
            times.append(wall)
        print(f"kata status: best {min(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s, worst "
              f"{max(times):.2f} s over {args.repeats} fresh processes (target <= 2 s)")
        if args.skip_grade:
            return

        submission = Path(scratch) / "submission"
        shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
        marker = "not frame" + (" and not slow" if args.no_slow else "")
        suite_command = [sys.executable, "-m", "pytest", "--impl=solutions", "-m", marker, "-q",
                         "-p", "no:cacheprovider"]
        report = Path(scratch) / "grade.json"
        grade_command = [sys.executable, "-m", "kata", "grade", str(submission), "--json", str(report)]
        if args.no_slow:
            grade_command.append("--no-slow")
        suite_times, grade_times, unsandboxed_times = [], [], []
        for _ in range(args.rounds):  # alternated, so a change in the machine's load hits all three alike
            wall, suite = timed(suite_command, dict(environment, KATA_HYPOTHESIS_PROFILE="ci"))
            suite_times.append(wall)
            wall, unsandboxed = timed([*grade_command, "--no-sandbox"], environment)
            unsandboxed_times.append(wall)
            wall, graded = timed(grade_command, environment)
            grade_times.append(wall)
            if graded.returncode != 0 or unsandboxed.returncode != 0 or not report.exists():
                raise SystemExit(f"kata grade failed: {graded.stderr[-2000:]}{unsandboxed.stderr[-2000:]}")
        suite_line = suite.stdout.strip().splitlines()[-1].strip("= ") if suite.stdout.strip() else "no output"
        entry = json.loads(report.read_text())["submissions"][0]
        tests = sum(c["passed"] + c["failed"] for c in entry["concepts"].values())
        statuses = sorted({c["status"] for c in entry["concepts"].values()})
        what = "slow tests excluded" if args.no_slow else "slow tests included"
        suite_wall, grade_wall = median(suite_times), median(grade_times)
        print(f"reference suite (pytest --impl solutions -m '{marker}', ci): median {suite_wall:.1f} s over "
              f"{args.rounds} run(s)  [{suite_line}]")
        print(f"kata grade, a copy of solutions/ ({what}): median {grade_wall:.1f} s, {entry['total']:g} of "
              f"{entry['max_total']:g} points, {tests} tests, statuses {statuses}")
        print(f"grading overhead: {grade_wall - suite_wall:+.1f} s, {grade_wall / suite_wall:.2f} x the suite "
              "(target: <= 1.5 x)")
        sandbox = "not sandboxed: " + graded.stderr.split("no sandbox: ", 1)[1].splitlines()[0] \
            if "no sandbox: " in graded.stderr else "sandboxed with bwrap"
        print(f"kata grade --no-sandbox: median {median(unsandboxed_times):.1f} s; the default ({sandbox}) costs "
              f"{grade_wall - median(unsandboxed_times):+.2f} s per submission")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


if __name__ == "__main__":
    main()
