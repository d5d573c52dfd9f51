"""``kata lab`` (and ``python -m kata.lab``): its options, handed to :func:`kata.lab.run.main`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kata.concepts.arguments import positive_int
from kata.concepts.impl import reference_or_exercises
from kata.lab.plan import PROFILES

DESCRIPTION = (
    "Run the lab notebook's whole route (baseline simulation, GAE example, PPO on CartPole, token objectives, the "
    "RLOO run) on an implementation, and write its figures, report.md and results.json. A stub not implemented yet "
    "skips its section with one line.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=PROFILES, default="smoke",
                   help="smoke: the quick end-to-end run (default); full: every seed and longer runs")
    p.add_argument("--impl", default=reference_or_exercises(), metavar="exercises|solutions|PATH",
                   help="implementation to run (default: solutions, the reference, where it is installed, else "
                   "exercises, your code)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: a fresh lab-output/<timestamp>)")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="worker processes for the training runs (default: one per idle core; 1: in-process)")


def cmd_lab(args: argparse.Namespace) -> int:
    from kata.lab import run

    outcome = run.main(profile=args.profile, impl=args.impl, out=args.out, jobs=args.jobs)
    return outcome if isinstance(outcome, int) else 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``lab`` to the subcommands of kata.cli's parser."""
    p = sub.add_parser("lab", help="run the lab end to end: figures, report.md and results.json",
                       description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(handler=cmd_lab)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kata.lab [options]``."""
    parser = argparse.ArgumentParser(prog="python -m kata.lab", description=DESCRIPTION)
    add_arguments(parser)
    try:
        return cmd_lab(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130
