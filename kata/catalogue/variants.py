"""Run the catalogue of valid variants: every test of a concept, slow ones included, must pass on each variant.

    python -m kata.catalogue.variants [CONCEPT ...] [--profile ci|dev|thorough] [--no-slow] [--jobs N]

For each ``variants/<concept>/<name>.diff`` this runs the concept's tests (``tests/test_<concept>.py``) against a
copy of the reference whose module is that patch of it, in a process of its own, and prints one line: ``accepted``,
or ``REJECTED`` with the first failing test and its message. A valid variant that fails is a test that rejects what
its docstring does not forbid. It also checks the catalogue against the manifest, and that every patch applies. Exit
status 0 only if every variant passes every test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from kata.catalogue.runs import Outcome, Run, catalogue_entries, catalogue_problems, fresh_seed, run_all
from kata.concepts.manifest import CONCEPTS, concept


def verdict(outcome: Outcome) -> tuple[bool, str]:
    """(accepted, what to print) for one run of one variant."""
    if outcome.returncode == 0:
        return True, "every test passed"
    seed = f" (reproduce: --hypothesis-seed={outcome.run.seed})" if outcome.run.seed is not None else ""
    failures = outcome.failed_tests
    if outcome.returncode == 1 and failures:
        test, message = failures[0]
        more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
        return False, f"REJECTED by {test}{more}: {message[:300]}{seed}"
    return False, f"could not be judged (pytest exit {outcome.returncode}): {outcome.tail()}{seed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kata variants", description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", help="concepts to check (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="variants run at once")
    parser.add_argument("--impl", default="solutions", help="implementation the variants are bound into")
    parser.add_argument("--profile", default="ci", choices=("ci", "dev", "thorough"),
                        help="Hypothesis profile (default: ci, what grading runs)")
    parser.add_argument("--no-slow", action="store_true", help="leave out the slow (training) tests")
    args = parser.parse_args(argv)
    names = args.concepts or [c.name for c in CONCEPTS]
    for name in names:
        concept(name)

    problems = catalogue_problems("variant", names, lambda c: (v.name for v in c.variants))
    variants = catalogue_entries("variant", names)
    started = time.perf_counter()
    width = max((len(v) for v in variants), default=10)
    runs = [Run("variant", v, args.profile, slow=not args.no_slow,
                seed=fresh_seed() if args.profile != "ci" else None) for v in variants]
    rejected = 0
    for outcome in run_all(runs, args.impl, args.jobs):
        accepted, detail = verdict(outcome)
        rejected += not accepted
        status = "accepted  " if accepted else "REJECTED  "
        print(f"{status}{outcome.run.entry:<{width}}  {detail}  ({outcome.seconds:.1f} s)", flush=True)
    for problem in problems:
        print(f"CATALOGUE  {problem}")
    print(f"{len(variants) - rejected} of {len(variants)} variants accepted (profile {args.profile}"
          f"{', slow tests left out' if args.no_slow else ', slow tests included'}), {len(problems)} catalogue "
          f"problems, in {time.perf_counter() - started:.1f} s")
    return 0 if not rejected and not problems and variants else 1


if __name__ == "__main__":
    sys.exit(main())
