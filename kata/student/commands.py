"""The student's commands: ``kata list``, ``hint``, ``status``, ``check`` and ``watch``.

``list``, ``hint`` and ``status`` read only the course data and the parsed sources, so they answer at once (neither
torch nor pytest is imported). ``check`` runs pytest on one concept's test module on ``exercises/``, in its own
process, and says what to do next; ``watch`` runs the same check again after every change, in a warm process
(kata.student.watch). Nothing here imports the grader or the catalogue: where the instructor's catalogue is
installed beside it, ``check`` asks pytest for its diagnosis plugin by name, which diagnoses a failed concept in the
same process.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from kata.concepts.arguments import concept_argument, positive_float
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, MAX_POINTS, Concept
from kata.concepts.sources import parse_source, started
from kata.concepts.stub import NOT_IMPLEMENTED_PREFIX
from kata.student import status
from kata.testing.limits import DEFAULT_TEST_TIMEOUT, SLOW_TEST_TIMEOUT
from kata.testing.record import load_progress

WIDTH = 100
DIAGNOSIS_PLUGIN = "kata.catalogue.pytest_plugin"  # the instructor's catalogue: a student edition has none
PytestRunner = Callable[[list[str]], int]  # pytest's arguments -> its exit code


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


def next_line(next_up: Concept | None) -> str:
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
    print(next_line(next_up))
    if next_up is not None:
        current = next(s for s in states if s.concept == next_up)
        if current.message:
            print(textwrap.fill(f"last failure: {current.message}", WIDTH, subsequent_indent="  "))
    return 0


def diagnosis_available() -> bool:
    """Whether the catalogue, and with it the diagnosis, is installed beside the student's tools."""
    return importlib.util.find_spec(DIAGNOSIS_PLUGIN.rpartition(".")[0]) is not None


def pytest_arguments(c: Concept, slow: bool, diagnosis_file: Path | None = None) -> list[str]:
    """pytest's arguments for one concept's check: its test module only, on exercises/, under the grader's deadline;
    with ``diagnosis_file``, the catalogue's plugin diagnoses a failed concept into it."""
    marker = c.name if slow else f"{c.name} and not slow"
    # The plugin's deadline, not pytest-timeout's alone: Hypothesis swallows pytest-timeout's exception and runs
    # an endless loop again with no alarm left (see kata.testing.progress).
    deadline = SLOW_TEST_TIMEOUT if slow else DEFAULT_TEST_TIMEOUT
    arguments = [f"tests/test_{c.name}.py", "--impl", "exercises", "-m", marker, "-q",
                 "--kata-test-timeout", f"{deadline:g}"]
    if diagnosis_file is not None:
        arguments += ["-p", DIAGNOSIS_PLUGIN, f"--kata-diagnose={diagnosis_file}"]
    return arguments


def pytest_command(c: Concept, slow: bool, diagnosis_file: Path | None = None) -> list[str]:
    return [sys.executable, "-m", "pytest", *pytest_arguments(c, slow, diagnosis_file)]


def pytest_in_a_subprocess(arguments: list[str]) -> int:
    environment = dict(os.environ)
    environment.pop("KATA_IMPL", None)  # the student's own exercises/, whatever the shell says
    return subprocess.call([sys.executable, "-m", "pytest", *arguments], cwd=REPOSITORY_ROOT, env=environment)


def pytest_in_this_process(arguments: list[str]) -> int:
    """pytest in ``kata check``'s own process, which runs one check and ends: no second interpreter to start."""
    import pytest

    os.environ.pop("KATA_IMPL", None)  # the student's own exercises/, whatever the shell says
    os.chdir(REPOSITORY_ROOT)
    # kata.testing's modules that this command imported before pytest could mark them for assertion rewriting hold
    # no test's assertion; the warning would be all the difference with pytest's own output.
    return int(pytest.main(["-W", "ignore::pytest.PytestAssertRewriteWarning", *arguments]))


def run_check(c: Concept | None, slow: bool = False, run_pytest: PytestRunner = pytest_in_this_process) -> int:
    """Run one concept's tests on exercises/ and say what to do next; pytest's exit code. ``run_pytest`` runs pytest
    on the arguments (``kata check``: in its own process; ``kata watch``: a child of its warm process)."""
    states = status.all_states()
    if c is None:
        c = status.next_concept(states)
        if c is None:
            print(next_line(None))
            return 0
    what = slow_note(c, slow)
    print(f"kata check: {c.number}. {c.name} — {c.title} (tests/test_{c.name}.py; {what})", flush=True)
    if not (REPOSITORY_ROOT / "tests" / f"test_{c.name}.py").is_file():
        print(f"\nno test of {c.name} was collected: is tests/test_{c.name}.py there?")
        return 5
    with tempfile.TemporaryDirectory(prefix="kata-check-") as scratch:
        wanted = diagnosis_available() and bool(
            started(REPOSITORY_ROOT / "exercises", [c.name], REPOSITORY_ROOT / "solutions"))
        diagnosis_file = Path(scratch) / "diagnosis.json" if wanted else None
        code = run_pytest(pytest_arguments(c, slow, diagnosis_file))
        sentences = diagnosis_sentences(diagnosis_file)
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
        print(next_line(status.next_concept(states)))
    else:
        print(closing_line(c, state.label, failure_messages(c), diagnosed=bool(sentences)))
        for sentence in sentences:
            print(sentence)
    return code


def has_slow_tests(c: Concept) -> bool:
    """Whether the concept's test module marks any test ``slow`` (read from its source, nothing imported)."""
    tree = parse_source(REPOSITORY_ROOT / "tests" / f"test_{c.name}.py")
    return tree is not None and any(
        isinstance(node, ast.Attribute) and node.attr == "slow" and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark" for node in ast.walk(tree))


def slow_note(c: Concept, slow: bool) -> str:
    """What the header of ``kata check`` says of the slow tests: only what is true of this concept."""
    if not has_slow_tests(c):
        return "it has no slow tests" + ("; --slow changes nothing" if slow else "")
    return "slow integration tests included" if slow else "slow integration tests left out; --slow runs them"


def failure_messages(c: Concept) -> list[str]:
    """The one-line messages of the concept's failed tests, as the last run recorded them."""
    found = load_progress().get(c.name)
    return [t.message for t in found.tests.values() if t.outcome == "failed"] if found else []


def closing_line(c: Concept, label: str, failures: list[str], diagnosed: bool) -> str:
    """The line under a failed check: what to do next, claiming only what the failures imply. A stub's "not
    implemented yet" and a module that does not import name no misunderstanding; a test's message states the
    property that failed; the diagnosis lines below it, where there are any, name a catalogued mistake."""
    start = f"{c.name}: {label}."
    if label.startswith(("syntax error", "missing")) or (failures and all(" could not be imported " in m
                                                                           for m in failures)):
        return f"{start} No test of {c.name} can run until exercises/{c.name}.py imports: fix what the message " \
               "above shows, then check again."
    if failures and all(m.startswith(NOT_IMPLEMENTED_PREFIX) for m in failures):
        return f"{start} Read {c.guide_section}, then write each function above that still raises not_implemented " \
               f"(`kata hint {c.name}` when stuck)."
    said = ("each message above states what failed and on which input" +
            ("; the line below names the mistake your code behaves like" if diagnosed else ""))
    return f"{start} Read {c.guide_section}; {said}; `kata hint {c.name}` when stuck."


def diagnosis_sentences(path: Path | None) -> list[str]:
    """One line per function the diagnosis plugin found behaving like a catalogued mistake ([] when it found none,
    did not run, or was not asked)."""
    try:
        report = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return []
    return [entry["sentence"] for entry in report.get("diagnoses", []) if entry.get("mistake")]


def cmd_check(args: argparse.Namespace) -> int:
    return run_check(args.concept, slow=args.slow)


def cmd_watch(args: argparse.Namespace) -> int:
    from kata.student import watch

    def check(run_pytest: PytestRunner) -> None:
        print("\n" + "=" * 40 + f" {time.strftime('%H:%M:%S')} " + "=" * 40, flush=True)
        run_check(args.concept, slow=args.slow, run_pytest=run_pytest)

    return watch.watch_and_check(check, REPOSITORY_ROOT / "exercises", interval=args.interval,
                                 diagnosis=diagnosis_available(), one_shot=pytest_in_a_subprocess)


# ---- the parsers -------------------------------------------------------------------------------------------------


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``list``, ``hint``, ``status``, ``check`` and ``watch`` to the subcommands of kata.cli's parser."""
    names = ", ".join(c.name for c in CONCEPTS)
    p = sub.add_parser("list", help="the concepts: number, name, title, points, GUIDE section",
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
            f"runs longer than {DEFAULT_TEST_TIMEOUT:g} s ({SLOW_TEST_TIMEOUT:g} s with --slow) fails as timed "
            "out, and the rest of its concept is not run.")
        p.add_argument("concept", nargs="?", type=concept_argument, metavar="CONCEPT",
                       help=f"one of: {names} (default: the next unfinished)")
        p.add_argument("--slow", action="store_true", help="include the slow integration tests")
        if command == "watch":
            p.add_argument("--interval", type=positive_float, default=0.5, metavar="SECONDS",
                           help="how often to look for changes where watchfiles is not installed (default 0.5)")
        p.set_defaults(handler=cmd_check if command == "check" else cmd_watch)
