"""The instructor's commands of ``kata``: ``kata grade`` (kata.grading.grader, kata.grading.batch) and ``kata
autograder`` (kata.grading.autograder), their options and help, added to kata.cli's one parser by ``add_parsers``.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from kata.concepts.arguments import concept_argument, positive_float, positive_int
from kata.testing.limits import DEFAULT_TEST_TIMEOUT
from kata.concepts.manifest import CONCEPTS


def cmd_grade(args: argparse.Namespace) -> int:
    if not sys.platform.startswith("linux"):  # what confines a submission's run: /proc, prctl, rlimits, bubblewrap
        print("kata grade: grading runs on Linux only (it confines each run with /proc, prctl, resource limits and "
              "bubblewrap); grade on Linux, or with the Gradescope autograder", file=sys.stderr)
        return 2
    from kata.grading import batch, grader, results

    if not args.submissions:
        own = Path("exercises").resolve()
        if not own.is_dir():
            print(f"kata grade: no SUBMISSION given, and no exercises/ here to grade (looked in {own}): run it in the "
                  "repository, or name the folders to grade", file=sys.stderr)
            return 2
        print(f"kata grade: no SUBMISSION given: grading your own ./exercises ({own})", file=sys.stderr)
    submissions = []
    for given in args.submissions or ["./exercises"]:
        found, notes = submission_folders(given)
        for note in notes:
            print(f"kata grade: {note}", file=sys.stderr)
        submissions += found
    if not submissions:
        print("kata grade: no folder to grade", file=sys.stderr)
        return 2
    if args.gradescope and len(submissions) > 1:  # before grading anything: results.json holds one submission
        print(f"kata grade: --gradescope writes one submission's results.json, and {len(submissions)} were found "
              f"({', '.join(results.printable(s) for s in submissions[:3])}{', ...' if len(submissions) > 3 else ''})"
              ": give exactly one SUBMISSION (several: --json, --csv or --markdown)", file=sys.stderr)
        return 2
    concepts = args.concepts or list(CONCEPTS)
    cores = os.cpu_count() or 1
    jobs = max(1, min(args.jobs or cores, len(submissions)))
    grading = grader.Grader(
        concepts=concepts,
        timeout=args.timeout,
        watchdog=args.watchdog,
        include_slow=not args.no_slow,
        chained=args.chained,
        threads_per_job=max(1, cores // jobs) if jobs > 1 else None,
        diagnose=True,
        sandbox=not args.no_sandbox,
        passed_variables=args.pass_env,
    )
    refused = grading.sandbox_problem()
    if refused:  # before grading anything: never run submitted code unsandboxed unless told to
        print(f"kata grade: {refused}", file=sys.stderr)
        return 2
    print(f"kata grade: {len(submissions)} submission(s), {jobs} at a time, {args.timeout:g} s per test, "
          f"{grading.watchdog:g} s per run" + (", unsandboxed (--no-sandbox)" if args.no_sandbox else ""),
          file=sys.stderr, flush=True)
    done = [0]

    def progress(result: results.SubmissionResult) -> None:
        done[0] += 1
        print(f"[{done[0]}/{len(submissions)}] {result.submission}: {results.format_points(result.total)} of "
              f"{results.format_points(result.max_total)}", file=sys.stderr, flush=True)

    reports = dict(json_path=args.json, csv_path=args.csv, gradescope_path=args.gradescope,
                   markdown_path=args.markdown, concepts=concepts)
    graded, interrupted = batch.run_batch(submissions, grading, jobs=jobs, reports=reports, on_result=progress)
    if interrupted:
        print("kata grade: interrupted; the reports hold what was graded (the rest is blank)", file=sys.stderr)
    print(results.markdown(graded, concepts), end="")
    for name in ("json_path", "csv_path", "gradescope_path", "markdown_path"):
        if reports[name]:
            print(f"wrote {reports[name]}", file=sys.stderr)
    if args.class_report:
        from kata.grading import class_report

        written = class_report.write(class_report.from_results(graded), args.class_report, concepts, results=graded)
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
    return 130 if interrupted else 0


def holds_a_concept_module(folder: Path) -> bool:
    return any((folder / f"{c.name}.py").is_file() for c in CONCEPTS) or (folder / "exercises").is_dir()


def submission_folders(given: str, seen: frozenset[Path] = frozenset()) -> tuple[list[str], list[str]]:
    """The submissions ``given`` names, and the lines to say about it. A folder laid out like exercises/ (a concept
    module, or an exercises/ folder, in it) is one. A folder with none but with folders in it (``kata grade
    submissions``) is a class: every entry in it, hidden ones aside, is taken as if given on its own, exactly as
    ``kata grade submissions/*`` takes them, so each folder gets its row, an empty one included (an ``error``
    saying it is empty), and a file is skipped with one line. Any other folder is one submission (an ``error`` row
    if it holds no concept module); a path that is not a folder is skipped with one line (`kata grade
    submissions/*` run again meets the reports it wrote there)."""
    folder = Path(given)
    if not folder.exists():
        return [], [f"skipped {given}: no such folder"]
    if not folder.is_dir():
        return [], [f"skipped {given}: not a folder"]
    real = folder.resolve()
    if holds_a_concept_module(folder) or real in seen:
        return [given], []
    entries = sorted(str(child) for child in folder.iterdir() if not child.name.startswith("."))
    if not any(Path(entry).is_dir() for entry in entries):
        return [given], []
    found, notes = [], []
    for entry in entries:
        inside, said = submission_folders(entry, seen | {real})
        found += inside
        notes += said
    head = (f"{given} holds no concept module but {sum(Path(e).is_dir() for e in entries)} folder(s): grading "
            f"each as a submission, as `kata grade {given.rstrip('/')}/*` would ({len(found)} submission(s))")
    return found, [head, *notes]


def cmd_release(args: argparse.Namespace) -> int:
    from kata.grading import release

    try:
        out, zipped = release.release(Path(args.out), autograder_zip=args.autograder, force=args.force)
    except FileExistsError as error:
        print(f"kata release: {error}", file=sys.stderr)
        return 2
    files = sum(1 for path in out.rglob("*") if path.is_file())
    print(f"wrote the student edition {out} ({files} files): give it to the class as a repository (GitHub "
          "Classroom: make it the assignment's template; its .github/workflows/classroom.yml grades every push)")
    print(f"wrote the Gradescope autograder {zipped} ({zipped.stat().st_size / 1024:.0f} KiB)")
    return 0


def cmd_autograder(args: argparse.Namespace) -> int:
    from kata.grading import autograder

    out = autograder.build(Path(args.out), timeout=args.timeout, include_slow=not args.no_slow)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB): upload it as a Gradescope programming assignment's "
          "autograder (Ubuntu image); students upload their concept files (flat, or an exercises/ folder)")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``grade`` and ``autograder`` to the subcommands of kata.cli's parser."""
    p = sub.add_parser(
        "grade", help="grade submissions with the reference's tests (Markdown, JSON, CSV, Gradescope)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Grade each SUBMISSION, a folder laid out like exercises/ (default: ./exercises), with this
            repository's tests. A folder that holds no concept module but folders (submissions/) is a class: each
            entry in it is taken as `kata grade submissions/*` takes it, so every folder gets its row (an empty one
            an error saying so); a path that is not a folder is skipped with one line. Each submission is graded
            in one pytest subprocess in a fresh copy of the tests (the ci Hypothesis profile, so every submission
            meets the same examples; slow integration tests included unless --no-slow: they prove the code
            trains; the frame tests are not run).

            Each concept is graded on the submission's own module for it and the reference's modules for the
            concepts it builds on, so a broken early concept costs only its own points (--chained: everything
            on the submission's own modules). chained_status says how the concept fares on the student's own
            chain; where the two differ, every report says so ("ppo_cartpole passes on its own code; with your
            gae it fails (gae is wrong)").

            Points are partial credit: a concept earns points * passed / (passed + failed). Status per concept:
              passed         every test passed
              failed         some test failed (the first failure's message is reported)
              not attempted  the module is the untouched stub: every function still raises the stub's
                             not_implemented, none is the student's own, and no test passed: zero points
              error          the module (or the whole package) does not import, imports solutions, or no
                             test ran, or the run changed the grader's copy of the tests: zero points
              timeout        a test ran longer than --timeout (killed shortly after if it ignores the
                             alarm), the run had to be killed, or it used up its CPU time: zero points
            A hanging concept costs one --timeout; the other concepts are still graded. Each run has limits on
            address space, CPU time and processes (named in the notes when they fire), and no process it
            started outlives it. One submission's failure never stops the batch; the reports are rewritten
            (atomically) after every submission, and Ctrl-C or SIGTERM leaves them complete.

            Output: a Markdown table on stdout (and in --markdown FILE); --json {"submissions": [{"submission",
            "graded", "total", "max_total", "notes", "concepts": {NAME: {"points", "max_points", "passed", "failed",
            "status", "message", "chained_status", "chained_message", "diagnoses"}}}]}; --csv one row per submission:
            a column per concept, the total, the maximum, each concept's status, each concept's message (the first
            failure of every concept not passed), the diagnoses and the notes (blank if not graded, never 0; a
            note every row shares is said once, in --markdown); --gradescope the results.json of Gradescope (one
            test per concept; one submission only, refused at the start when several are found; `kata autograder`
            builds the whole autograder); --class-report DIR misconceptions.md, .json and .png, with every
            submission's statuses and messages. A failed concept's diagnoses name the catalogued mistakes its
            functions behave like (kata diagnose, on the submission's own modules beside the reference, under the
            same limits and sandbox).

            Where bubblewrap (bwrap) works, on Linux, each run of a submission's code (its tests, its diagnosis)
            sees only its own copy read-write and the interpreter read-only: no home, no other submission, not
            this repository, no network, and its processes end with it. Where bwrap is missing or cannot start,
            kata grade grades nothing: it says why in one line, with the command that installs it (sudo apt-get
            install bubblewrap), and exits 2. --no-sandbox grades unsandboxed, with your rights (your files, the
            network): then grade untrusted code inside a container or a throwaway virtual machine. Either way the
            submitted code runs in the process that records its results, so code written to cheat can still forge
            its own (docs/grading.md)."""))
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION", help="folders to grade (default ./exercises)")
    p.add_argument("--json", metavar="FILE", help="write the JSON report to FILE")
    p.add_argument("--csv", metavar="FILE", help="write one CSV row per submission to FILE")
    p.add_argument("--gradescope", metavar="FILE", help="write an autograder results.json to FILE")
    p.add_argument("--markdown", metavar="FILE", help="write the Markdown report to FILE too")
    p.add_argument("--class-report", metavar="DIR",
                   help="write misconceptions.md, .json and .png to DIR: per concept, how many submissions behave "
                   "like each catalogued mistake")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TEST_TIMEOUT, metavar="SECONDS",
                   help=f"limit per test (default {DEFAULT_TEST_TIMEOUT:g})")
    p.add_argument("--watchdog", type=positive_float, default=None, metavar="SECONDS",
                   help="limit per test process, for hangs no signal interrupts (default 10 x --timeout)")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="submissions graded at once (default: the number of cores)")
    p.add_argument("--no-slow", action="store_true", help="leave out the slow integration tests")
    p.add_argument("--chained", action="store_true",
                   help="grade every concept on the submission's own earlier concepts too (default: each concept "
                   "on its own module and the reference's for the concepts it builds on)")
    p.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                   help="pass the environment variable NAME on to the runs (repeatable; by default a run gets only "
                   "PATH, HOME, the locale, the terminal and the time zone of the grader's environment)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run submitted code without bubblewrap, with your rights (default: sandboxed; where bwrap "
                   "is missing or cannot start, kata grade refuses to grade)")
    p.add_argument("--concepts", type=lambda text: [concept_argument(n) for n in text.split(",") if n],
                   default=None, metavar="NAME,NAME", help="grade these concepts only (default: all)")
    p.set_defaults(handler=cmd_grade)

    p = sub.add_parser(
        "autograder", help="build a Gradescope autograder zip (setup.sh, run_autograder, the tests and reference)",
        description="Build the zip a Gradescope programming assignment takes as its autograder: setup.sh installs "
        "Python 3.11, the requirements and torch's CPU build; run_autograder grades the student's upload (the "
        "concept files flat, or an exercises/ folder) as `kata grade` does and writes results/results.json, a "
        "test per concept. See kata/grading/autograder.py.")
    p.add_argument("--out", default="autograder.zip", metavar="FILE", help="where to write it (autograder.zip)")
    p.add_argument("--timeout", type=positive_float, default=DEFAULT_TEST_TIMEOUT, metavar="SECONDS",
                   help=f"limit per test (default {DEFAULT_TEST_TIMEOUT:g})")
    p.add_argument("--no-slow", action="store_true", help="leave out the slow integration tests")
    p.set_defaults(handler=cmd_autograder)

    p = sub.add_parser(
        "release", help="write the student edition (no answers, a GitHub Classroom workflow) and the autograder",
        description="Write to OUT a student edition of this repository: the stubs, the concept tests, the frame a "
        "student needs, GUIDE.md, a README for students and .github/workflows/classroom.yml (GitHub Classroom's "
        "autograding: one graded step per concept worth its points), and no solutions/, mistakes/, variants/ or "
        "grading code. The Gradescope autograder zip is written beside it. See kata/grading/release.py.")
    p.add_argument("out", metavar="OUT", help="the folder to write the edition to (new, or empty)")
    p.add_argument("--autograder", default=None, metavar="FILE",
                   help="where to write the Gradescope autograder (default: OUT-autograder.zip beside OUT)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists and is not empty")
    p.set_defaults(handler=cmd_release)
