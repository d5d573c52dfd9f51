"""The ``kata`` command: the student's and the instructor's tools, all reading kata/concepts/manifest.py.

    kata list                       the eight concepts in teaching order
    kata hint gae [--level 2]       the manifest's hints, one at a time
    kata status                     each concept's state and the next one to work on (runs no test)
    kata check [gae] [--slow]       run one concept's tests on exercises/ (default: the next unfinished one)
    kata watch [gae]                check again whenever a file in exercises/ changes
    kata grade [SUBMISSION ...]     grade folders laid out like exercises/ with the reference's tests
    kata autograder --out FILE      build a Gradescope autograder zip
    kata lab [--impl exercises]     run the lab end to end (kata.lab), on the reference by default
    kata diagnose [CONCEPT ...]     which catalogued mistake your code behaves like (kata.catalogue.diagnose)
    kata mistakes [CONCEPT ...]     prove every catalogued mistake is caught (kata.catalogue.mistakes)
    kata variants [CONCEPT ...]     prove every catalogued valid variant passes (kata.catalogue.variants)
    kata selfcheck                  prove every stub fails its tests (kata.catalogue.selfcheck)
    kata stubs [--check] [--force]  write exercises/ from the marked solutions/ (kata.catalogue.stubs)

The student's path (list, hint, status) imports nothing heavy: ``kata status`` answers in well under two seconds.
Commands that run tests start pytest in a subprocess, from this repository. The instructor's commands, grade and
autograder, are in kata.grading.commands; the options' types in kata.concepts.arguments.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence

from kata.grading import commands as cli_grade
from kata.student import status
from kata.concepts.arguments import concept_argument, positive_float, positive_int
from kata.grading.grader import DEFAULT_TIMEOUT
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, MAX_POINTS, PROFILES, Concept

WIDTH = 100
DELEGATED = {
    "diagnose": ("kata.catalogue.diagnose", "name the catalogued mistake each of your functions behaves like, by "
                 "running it "
                 "beside the reference and the mistakes on fixed probes (`kata diagnose --help`)"),
    "mistakes": ("kata.catalogue.mistakes", "run each concept's tests against every wrong implementation in mistakes/ "
                 "and fail if one survives (`kata mistakes --help`)"),
    "variants": ("kata.catalogue.variants", "run each concept's tests, slow ones included, against every valid "
                 "variant in "
                 "variants/ and fail if one is rejected (`kata variants --help`)"),
    "selfcheck": ("kata.catalogue.selfcheck", "check that every concept test fails on the untouched stubs of "
                  "exercises/ "
                  "with the one-line message (`kata selfcheck --help`)"),
}


# ---- list and hint -----------------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    width = max(len(c.name) for c in CONCEPTS)
    print(f" #  {'concept':<{width}}  points  guide         title")
    for c in CONCEPTS:
        print(f"{c.number:>2}  {c.name:<{width}}  {c.points:>6g}  {c.guide_section:<12}  {c.title}")
    print(f"\n{len(CONCEPTS)} concepts, {MAX_POINTS:g} points. Start with `kata hint {CONCEPTS[0].name}` and "
          f"`kata check`; `kata status` says where you stand.")
    return 0


def cmd_hint(args: argparse.Namespace) -> int:
    c: Concept = args.concept
    count = len(c.hints)
    if not 1 <= args.level <= count:
        print(f"kata hint: {c.name} has {count} hints: --level must be between 1 and {count}", file=sys.stderr)
        return 2
    print(f"{c.name}, hint {args.level} of {count} ({c.guide_section}):\n")
    print(textwrap.fill(c.hints[args.level - 1], WIDTH, initial_indent="  ", subsequent_indent="  "))
    if args.level < count:
        print(f"\nStill stuck? The next hint is nearer the answer: kata hint {c.name} --level {args.level + 1}")
    else:
        print(f"\nThat was the last hint; {c.guide_section} explains the rest, and the test's message names "
              "the misunderstanding.")
    return 0


# ---- status, check, watch ----------------------------------------------------------------------------------------


def _next_line(next_up: Concept | None) -> str:
    if next_up is None:
        return "Every concept is done. Run `kata lab` to watch your code train the lab's agents."
    return (f"Next: {next_up.number}. {next_up.name} — read {next_up.guide_section}, then `kata check "
            f"{next_up.name}` (stuck? `kata hint {next_up.name}`)")


def cmd_status(args: argparse.Namespace) -> int:
    states = status.all_states()
    width = max(len(c.name) for c in CONCEPTS)
    label_width = max(len(s.label) for s in states)
    print(f" #  {'concept':<{width}}  {'state':<{label_width}}  points")
    for s in states:
        print(f"{s.concept.number:>2}  {s.concept.name:<{width}}  {s.label:<{label_width}}  {s.concept.points:>6g}")
    next_up = status.next_concept(states)
    print()
    print(_next_line(next_up))
    if next_up is not None:
        current = next(s for s in states if s.concept == next_up)
        if current.message:
            print(textwrap.fill(f"last failure: {current.message}", WIDTH, subsequent_indent="  "))
    return 0


CHECK_TEST_TIMEOUT = DEFAULT_TIMEOUT  # the grader's limit per test, so a concept kata check passes is graded alike
CHECK_SLOW_TEST_TIMEOUT = 300.0


def _pytest_command(c: Concept, slow: bool) -> list[str]:
    marker = c.marker if slow else f"{c.marker} and not slow"
    # The plugin's deadline, not pytest-timeout's alone: Hypothesis swallows pytest-timeout's exception and runs
    # an endless loop again with no alarm left (see kata.testing.progress).
    deadline = CHECK_SLOW_TEST_TIMEOUT if slow else CHECK_TEST_TIMEOUT
    return [sys.executable, "-m", "pytest", "--impl", "exercises", "-m", marker, "-q",
            "--kata-test-timeout", f"{deadline:g}"]


def run_check(c: Concept | None, slow: bool = False) -> int:
    """Run one concept's tests on exercises/ and say what to do next; pytest's exit code."""
    states = status.all_states()
    if c is None:
        c = status.next_concept(states)
        if c is None:
            print(_next_line(None))
            return 0
    what = "slow integration tests included" if slow else "slow integration tests left out; --slow runs them"
    print(f"kata check: {c.number}. {c.name} — {c.title} (tests/test_{c.name}.py; {what})", flush=True)
    environment = dict(os.environ)
    environment.pop("KATA_IMPL", None)
    code = subprocess.call(_pytest_command(c, slow), cwd=REPOSITORY_ROOT, env=environment)
    if code == 5:
        print(f"\nno test of {c.name} was collected: is tests/test_{c.name}.py there?")
        return code
    if code not in (0, 1):
        return code
    states = status.all_states()
    state = next(s for s in states if s.concept == c)
    print()
    if code == 0 and state.done:
        print(f"{c.name}: {state.label}." if state.label != "done" else f"{c.name} passes every test. Well done.")
        print(_next_line(status.next_concept(states)))
    else:
        print(f"{c.name}: {state.label}. Read {c.guide_section}; each message above names a misunderstanding; "
              f"`kata hint {c.name}` when stuck.")
        _print_diagnoses(c)
    return code


def _print_diagnoses(c: Concept) -> None:
    """One line per function of ``c`` that behaves like a catalogued mistake; nothing when none does."""
    from kata.catalogue.diagnose import diagnose_in_subprocess

    if not status.started(REPOSITORY_ROOT / "exercises", [c.name], REPOSITORY_ROOT / "solutions"):
        return
    for diagnosis in diagnose_in_subprocess("exercises", [c.name]):
        if diagnosis.mistake is not None:
            print(diagnosis.sentence())


def cmd_check(args: argparse.Namespace) -> int:
    return run_check(args.concept, slow=args.slow)


def cmd_watch(args: argparse.Namespace) -> int:
    from kata.student.watch import watch

    def check() -> None:
        print("\n" + "=" * 40 + f" {_now()} " + "=" * 40)
        run_check(args.concept, slow=args.slow)

    return watch(check, REPOSITORY_ROOT / "exercises", interval=args.interval)


def _now() -> str:
    return time.strftime("%H:%M:%S")




# ---- lab and the delegated commands ------------------------------------------------------------------------------


def cmd_lab(args: argparse.Namespace) -> int:
    from kata.lab import main as lab_main

    outcome = lab_main(profile=args.profile, impl=args.impl, out=args.out, jobs=args.jobs)
    return outcome if isinstance(outcome, int) else 0


def cmd_stubs(args: argparse.Namespace) -> int:
    from kata.catalogue import stubs

    return stubs.main(args.concepts, check_only=args.check, force=args.force)


# ---- the parser --------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    names = ", ".join(c.name for c in CONCEPTS)
    parser = argparse.ArgumentParser(
        prog="kata",
        description="Policy gradients from REINFORCE to PPO, test by test. A student works concept by concept "
        "(status, hint, check, watch); an instructor grades folders laid out like exercises/ (grade).",
        epilog=f"Concepts, in teaching order: {names}.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("list", help="the eight concepts: number, name, title, points, GUIDE section",
                       description="List the concepts in teaching order with their points and GUIDE.md section.")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("hint", help="one of a concept's hints, from a nudge to nearly the answer",
                       description="Print one hint for CONCEPT. Level 1 is a gentle nudge; each level is nearer "
                       "the answer; the last nearly gives it.")
    p.add_argument("concept", type=concept_argument, metavar="CONCEPT", help=f"one of: {names}")
    p.add_argument("--level", type=int, default=1, metavar="N", help="which hint (default 1)")
    p.set_defaults(handler=cmd_hint)

    p = sub.add_parser(
        "status", help="each concept's state and the next one to work on (runs no test)",
        description="Each concept's state: not started (every function still raises not_implemented), "
        "failing k of n, done (every test not marked slow passed), or changed since last check (the code changed "
        "after the last recorded run). Results are recorded in .kata/progress.json whenever the tests run on "
        "exercises/ (kata check, kata watch, or pytest itself). No test runs: the answer is immediate.")
    p.set_defaults(handler=cmd_status)

    for command, verb in (("check", "Run"), ("watch", "Run again, whenever a file in exercises/ changes,")):
        p = sub.add_parser(
            command,
            help="run one concept's tests on exercises/" if command == "check"
            else "check again whenever a file in exercises/ changes, until Ctrl-C",
            description=f"{verb} the tests of CONCEPT against exercises/ (pytest -m CONCEPT --impl exercises). "
            "Default: the next concept that is not done (see kata status). Tests marked slow (integration runs "
            "that train an agent) are left out unless --slow; a concept counts as done without them. A test that "
            f"runs longer than {CHECK_TEST_TIMEOUT:g} s ({CHECK_SLOW_TEST_TIMEOUT:g} s with --slow) fails as timed "
            "out, and the rest of its concept is not run.")
        p.add_argument("concept", nargs="?", type=concept_argument, metavar="CONCEPT",
                       help=f"one of: {names} (default: the next unfinished)")
        p.add_argument("--slow", action="store_true", help="include the slow integration tests")
        if command == "watch":
            p.add_argument("--interval", type=positive_float, default=0.5, metavar="SECONDS",
                           help="how often to look for changes (default 0.5)")
        p.set_defaults(handler=cmd_check if command == "check" else cmd_watch)

    cli_grade.add_parsers(sub)

    p = sub.add_parser("lab", help="run the lab end to end: figures, report.md and results.json",
                       description="Run the lab notebook's whole route (baseline simulation, GAE example, PPO on "
                       "CartPole, token objectives, the RLOO run) on an implementation, and write its figures, "
                       "report.md and results.json. A stub not implemented yet skips its section with one line.")
    p.add_argument("--profile", choices=PROFILES, default="smoke",
                   help="smoke: the quick end-to-end run (default); full: every seed and longer runs")
    p.add_argument("--impl", default="solutions", metavar="exercises|solutions|PATH",
                   help="implementation to run (default solutions, the reference; exercises runs your code)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: a fresh lab-output/<timestamp>)")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="worker processes for the training runs (default: one per idle core; 1: in-process)")
    p.set_defaults(handler=cmd_lab)

    p = sub.add_parser(
        "stubs", help="write exercises/ from solutions/ (--check: only compare)",
        description="Write each stub exercises/CONCEPT.py from solutions/CONCEPT.py, whose # BEGIN SOLUTION / "
        "# END SOLUTION blocks are left out and whose # BEGIN STUB / # END STUB blocks are uncommented "
        "(CONTRIBUTING.md, 'A stub'). A stub that differs from what would be written is left alone unless --force.")
    p.add_argument("concepts", nargs="*", type=concept_argument, metavar="CONCEPT",
                   help=f"one of: {names} (default: all)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 and show the difference if a stub is not what solutions/ gives")
    mode.add_argument("--force", action="store_true",
                      help="overwrite a stub that differs, keeping a copy beside it (<file>.bak-<UTC time>)")
    p.set_defaults(handler=cmd_stubs)

    for command, (_, text) in DELEGATED.items():
        sub.add_parser(command, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in DELEGATED:  # they parse their own options
        import importlib

        module = importlib.import_module(DELEGATED[arguments[0]][0])
        return int(module.main(arguments[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(arguments)
    if args.command == "grade" and args.gradescope and len(args.submissions) > 1:
        parser.error("--gradescope writes one submission's results.json: give exactly one SUBMISSION")
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
