"""Time the test suite on the reference: each concept under the `dev` profile (target: 3 s or less each, tests marked
slow excluded) and the whole suite under `ci` (target: 60 s or less), as README.md's test command runs it (`-n auto`)
and in one process.

    python benchmarks/test_suite.py [--skip-whole]

Wall time is measured around a fresh `python -m pytest` process, so it includes starting Python and importing torch
(about a second of every figure); pytest's own figure is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from machine import describe_machine

from kata.concepts.manifest import CONCEPTS

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"(\d+) passed.*? in ([\d.]+)s")


def run(arguments: list[str], profile: str) -> tuple[float, str]:
    environment = dict(os.environ, KATA_HYPOTHESIS_PROFILE=profile)
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, "-m", "pytest", "--impl", "solutions", "-q", *arguments],
                               cwd=ROOT, capture_output=True, text=True, env=environment)
    wall = time.perf_counter() - started
    last = completed.stdout.strip().splitlines()[-1] if completed.stdout.strip() else completed.stderr[-300:]
    if completed.returncode != 0:
        last = f"FAILED (exit {completed.returncode}): {last}"
    return wall, last.strip("= ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-whole", action="store_true", help="only the per-concept figures")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"{'concept':<18} {'wall (s)':>9}  pytest (dev profile, not slow)")
    for concept in CONCEPTS:
        test_file = ROOT / "tests" / f"test_{concept.name}.py"
        if not test_file.exists():
            print(f"{concept.name:<18} {'-':>9}  no tests yet")
            continue
        wall, summary = run([str(test_file), "-m", "not slow"], "dev")
        print(f"{concept.name:<18} {wall:9.1f}  {summary}")
    if not args.skip_whole:
        # README.md's test command: the whole suite, spread over the cores by pytest-xdist.
        wall, summary = run(["-n", "auto"], "ci")
        print(f"{'whole suite (ci, -n auto)':<18} {wall:9.1f}  {summary}")
        wall, summary = run([], "ci")
        print(f"{'whole suite (ci, 1 process)':<18} {wall:9.1f}  {summary}")


if __name__ == "__main__":
    main()
