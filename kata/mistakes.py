"""Run the mistake catalogue: every catalogued wrong implementation must be caught by its concept's tests.

    python -m kata.mistakes [CONCEPT ...] [--jobs N]

For each ``mistakes/<concept>/<name>.py`` this runs the concept's tests (``tests/test_<concept>.py``, not the slow
ones, the ``catalogue`` Hypothesis profile: ``ci``'s examples without shrinking) against the reference with the wrong function bound in its place, in a subprocess of its own,
and prints one line: which test caught it, or that it SURVIVED. It also checks the catalogue against the manifest
(a listed mistake without a file, or a file not listed, is a failure). Exit status 0 only if every mistake is caught.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kata.impl import MISTAKES_ROOT, REPOSITORY_ROOT
from kata.manifest import CONCEPTS, concept

FAILED_LINE = re.compile(r"^FAILED (\S+?)(?: - (.*))?$")


@dataclass
class Verdict:
    mistake: str
    caught: bool
    detail: str
    seconds: float


def catalogue_problems(concept_names: list[str]) -> list[str]:
    """Mismatches between the manifest's mistakes and the files in mistakes/."""
    problems = []
    for name in concept_names:
        listed = {m.name for m in concept(name).mistakes}
        folder = MISTAKES_ROOT / name
        present = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")} if folder.is_dir() else set()
        problems += [f"{name}/{m}: listed in kata/manifest.py but mistakes/{name}/{m}.py is missing"
                     for m in sorted(listed - present)]
        problems += [f"{name}/{m}: mistakes/{name}/{m}.py is not listed in kata/manifest.py"
                     for m in sorted(present - listed)]
    return problems


def run_one(mistake: str, impl: str = "solutions") -> Verdict:
    concept_name = mistake.partition("/")[0]
    command = [
        # Only the concept's own test module is collected: importing the whole suite would cost more than the run.
        sys.executable, "-m", "pytest", f"tests/test_{concept_name}.py", "--impl", impl, "--mistake", mistake,
        "-m", f"{concept_name} and not slow", "-x", "-q", "-rf", "--no-header", "-p", "no:cacheprovider",
    ]
    environment = dict(os.environ, KATA_HYPOTHESIS_PROFILE="catalogue")
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=REPOSITORY_ROOT, capture_output=True, text=True, env=environment)
    seconds = time.perf_counter() - started
    output = completed.stdout + completed.stderr
    failures = [FAILED_LINE.match(line) for line in output.splitlines()]
    failures = [match for match in failures if match]
    if completed.returncode == 1 and failures:
        test = failures[0].group(1).rpartition("::")[2]
        return Verdict(mistake, True, f"by {test}", seconds)
    if completed.returncode == 0:
        return Verdict(mistake, False, "SURVIVED: every test passed", seconds)
    tail = " | ".join(output.strip().splitlines()[-3:])
    return Verdict(mistake, False, f"could not be judged (pytest exit {completed.returncode}): {tail}", seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kata mistakes", description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", help="concepts to check (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mistakes run at once")
    parser.add_argument("--impl", default="solutions", help="implementation the mistakes are bound into")
    args = parser.parse_args(argv)
    names = args.concepts or [c.name for c in CONCEPTS]
    for name in names:
        concept(name)

    problems = catalogue_problems(names)
    mistakes = [f"{name}/{p.stem}" for name in names
                for p in sorted((MISTAKES_ROOT / name).glob("*.py")) if not p.stem.startswith("_")]
    started = time.perf_counter()
    width = max((len(m) for m in mistakes), default=10)
    caught = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for verdict in pool.map(lambda m: run_one(m, args.impl), mistakes):
            caught += verdict.caught
            status = "caught  " if verdict.caught else "MISSED  "
            print(f"{status}{verdict.mistake:<{width}}  {verdict.detail}  ({verdict.seconds:.1f} s)", flush=True)
    for problem in problems:
        print(f"CATALOGUE  {problem}")
    missed = len(mistakes) - caught
    print(f"{caught} of {len(mistakes)} mistakes caught, {len(problems)} catalogue problems, "
          f"in {time.perf_counter() - started:.1f} s")
    print(f"mistakes: {caught} passed, {missed + len(problems)} failed")
    return 0 if missed == 0 and not problems and mistakes else 1


if __name__ == "__main__":
    sys.exit(main())
