"""Run the mistake catalogue: every catalogued wrong implementation must be caught by its concept's tests.

    python -m kata.catalogue.mistakes [CONCEPT ...] [--profile ci|dev|thorough] [--repeat N] [--jobs N]

For each ``mistakes/<concept>/<name>.diff`` this runs the concept's tests (``tests/test_<concept>.py``, not the slow
ones) against a copy of the reference whose module is that patch of it, in a process of its own, and prints one
line: which test caught it, or that it SURVIVED, and under a caught one the first failure's message as ``kata
status`` and the grader show it (examples unshrunk). ``--profile`` is the Hypothesis profile (default ``ci``, what
grading runs; ``dev`` is what a student runs), played without shrinking and without an example database: only
caught or not matters here, and shrinking changes neither. ``--repeat N`` runs the whole catalogue N times, each
repetition with fresh random seeds (``--hypothesis-seed``; a derandomized profile such as ``ci`` meets the same
examples every time): a mistake counts as caught only if every repetition catches it, and a miss prints the seed
that reproduces it. It also checks the catalogue against the manifest (a listed mistake without a patch, a patch
not listed, or one that no longer applies to the reference, is a failure). Exit status 0 only if every mistake is
caught on every repetition.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from kata.catalogue.runs import (
    Outcome,
    Run,
    catalogue_entries,
    catalogue_problems,
    fresh_seed,
    hypothesis_profile,
    run_all,
)
from kata.concepts.manifest import CONCEPTS, concept


def verdict(outcome: Outcome) -> tuple[bool, str]:
    """(caught, what to print) for one run of one mistake."""
    failures = outcome.failed_tests
    if outcome.returncode == 1 and failures:
        return True, f"by {failures[0][0]}"
    seed = f" (reproduce: --hypothesis-seed={outcome.run.seed})" if outcome.run.seed is not None else ""
    if outcome.returncode == 0:
        return False, f"SURVIVED: every test passed{seed}"
    return False, f"could not be judged (pytest exit {outcome.returncode}): {outcome.tail()}{seed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kata mistakes", description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", help="concepts to check (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mistakes run at once")
    parser.add_argument("--impl", default="solutions", help="implementation the mistakes are bound into")
    parser.add_argument("--profile", default="ci", choices=("ci", "dev", "thorough"),
                        help="Hypothesis profile, played without shrinking (default: ci, what grading runs)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the whole catalogue, each with fresh seeds")
    args = parser.parse_args(argv)
    names = args.concepts or [c.name for c in CONCEPTS]
    for name in names:
        concept(name)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    problems = catalogue_problems("mistake", names, lambda c: (m.name for m in c.mistakes))
    mistakes = catalogue_entries("mistake", names)
    profile = hypothesis_profile(args.profile, shrink=False)
    started = time.perf_counter()
    width = max((len(m) for m in mistakes), default=10)
    missed: dict[str, int] = {}
    for repetition in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"-- repetition {repetition} of {args.repeat}, profile {args.profile}", flush=True)
        runs = [Run("mistake", m, profile, seed=fresh_seed() if args.profile != "ci" else None) for m in mistakes]
        for outcome in run_all(runs, args.impl, args.jobs):
            caught, detail = verdict(outcome)
            if not caught:
                missed[outcome.run.entry] = missed.get(outcome.run.entry, 0) + 1
            status = "caught  " if caught else "MISSED  "
            print(f"{status}{outcome.run.entry:<{width}}  {detail}  ({outcome.seconds:.1f} s)", flush=True)
            if caught and outcome.first_message:
                print(f"        first message: {outcome.first_message}", flush=True)
    for problem in problems:
        print(f"CATALOGUE  {problem}")
    caught_always = len(mistakes) - len(missed)
    every = f" on all {args.repeat} repetitions" if args.repeat > 1 else ""
    print(f"{caught_always} of {len(mistakes)} mistakes caught{every} (profile {args.profile}), "
          f"{len(problems)} catalogue problems, in {time.perf_counter() - started:.1f} s")
    for entry, times in sorted(missed.items()):
        print(f"  {entry} missed in {times} of {args.repeat} repetitions")
    print(f"mistakes: {caught_always} caught, {len(missed) + len(problems)} failed")
    return 0 if not missed and not problems and mistakes else 1


if __name__ == "__main__":
    sys.exit(main())
