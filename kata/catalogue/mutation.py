"""Mutation testing of the reference, concept by concept: which small changes to ``solutions/<concept>.py`` its
concept's tests fail to notice.

    python -m kata.catalogue.mutation [CONCEPT ...]  run mutmut, write mutation/<concept>.toml and docs/mutation.md
    python -m kata.catalogue.mutation --check        no mutation run: every record is current and every survivor has a
                                                     reason (what CI runs)

A run copies the repository into a scratch folder (the checkout is never changed), mutates every function of
``solutions/<concept>.py`` there (its argument checks too, which its stub carries), and kills each mutant with
``tests/test_<concept>.py`` (the concept's marker, slow tests left out) under the ``ci`` profile's examples without
shrinking (a kill needs a failure, not the smallest one).
The record lists each mutant that survived with its diff and an ``equivalent`` field: a one-line reason why the
change cannot be observed through the contract, written by hand. A re-run keeps the reason of every survivor whose
function and diff are unchanged. The score is (killed + timeouts) / (mutants - equivalent).

mutmut forks each mutant's test run from a process that has run the tests once: a test that caches a result of the
code under test must recompute it when $KATA_MUTATION is set (tests/test_baselines.py's simulation does), or the
mutant is never run.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, concept

TOOL = "mutmut"
RECORDS = "mutation"
REPORT = Path("docs") / "mutation.md"
TABLE_START = "<!-- the table below is written by python -m kata.catalogue.mutation; do not edit it by hand -->"
TABLE_END = "<!-- end of the table -->"
PROFILE = "ci-no-shrink"  # conftest.py: the ci profile's examples, without shrinking
# What the scratch copy holds: what the concept tests import, and the catalogue the impl loader can name.
COPIED = ("kata", "solutions", "exercises", "tests", "mistakes", "variants", "conftest.py", "pyproject.toml")
# mutmut's verdicts that mean the tests noticed the change; every other one is a survivor.
DETECTED = {"killed", "caught by type check", "segfault"}
TIMEOUT = "timeout"
COMMAND = "python -m kata.catalogue.mutation"
MUTATED = "solutions/{}.py"  # what a run mutates: a concept's reference


def fingerprint_files(concept_name: str, root: Path = REPOSITORY_ROOT) -> list[str]:
    """The files a concept's result depends on that belong to that concept alone: its reference, its tests and the
    strategies they draw from (a narrower strategy weakens the tests as surely as a deleted assertion; the module also
    holds the concept's probes, so editing those re-runs a record needlessly, in under a minute). The shared files
    (tests/assertions.py, kata/testing/strategies/__init__.py, conftest.py) are left out, so that an edit to one of
    them does not make every concept's record stale at once."""
    paths = [MUTATED.format(concept_name), f"tests/test_{concept_name}.py",
             f"kata/testing/strategies/{concept_name}.py"]
    return [path for path in paths if (root / path).is_file()]


def fingerprint(concept_name: str, root: Path = REPOSITORY_ROOT) -> str:
    """sha256 over the names and bytes of ``fingerprint_files``."""
    digest = hashlib.sha256()
    for path in fingerprint_files(concept_name, root):
        digest.update(path.encode() + b"\0" + (root / path).read_bytes() + b"\0")
    return digest.hexdigest()


# ---- the record --------------------------------------------------------------------------------------------------


@dataclass
class Survivor:
    name: str  # mutmut's name: solutions.<concept>.x_<function>__mutmut_<n>
    status: str  # mutmut's verdict: survived, no tests, suspicious, skipped
    diff: str  # the removed and added lines
    equivalent: str = ""  # why no test can tell the mutant from the reference; empty: not known to be equivalent

    @property
    def function(self) -> str:
        return self.name.rpartition("__mutmut_")[0]


@dataclass
class Record:
    concept: str
    version: str
    date: str
    seconds: float
    fingerprint: str
    files: list[str]
    mutants: int
    killed: int
    timeouts: int
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def mutated(self) -> str:
        return MUTATED.format(self.concept)

    @property
    def equivalent(self) -> int:
        return sum(1 for s in self.survivors if s.equivalent.strip())

    @property
    def unexplained(self) -> list[Survivor]:
        return [s for s in self.survivors if not s.equivalent.strip()]

    @property
    def score(self) -> float:
        judged = self.mutants - self.equivalent
        return (self.killed + self.timeouts) / judged if judged else 1.0


def record_path(concept_name: str, root: Path = REPOSITORY_ROOT) -> Path:
    return root / RECORDS / f"{concept_name}.toml"


def _string(text: str) -> str:
    """A TOML string: a multi-line literal where it can be one (diffs read as written), else a basic string."""
    if "\n" in text and "'''" not in text and not text.endswith("'"):
        return "'''\n" + text + "'''"
    return json.dumps(text, ensure_ascii=False)  # JSON's escapes are all valid in TOML


def dumps(record: Record) -> str:
    lines = [
        f"# What mutation testing left alive in {record.mutated}. Written by `{COMMAND} {record.concept}`;",
        "# by hand only: `equivalent`, one line saying why no test can tell that mutant from the reference.",
        f"mutated = {_string(record.mutated)}", f"tool = {_string(TOOL)}", f"version = {_string(record.version)}",
        f"date = {_string(record.date)}",
        f"profile = {_string(PROFILE)}", "slow_tests = false", f"seconds = {record.seconds:.0f}",
        f"fingerprint = {_string(record.fingerprint)}",
        "files = [" + ", ".join(_string(f) for f in record.files) + "]",
        f"mutants = {record.mutants}", f"killed = {record.killed}", f"timeouts = {record.timeouts}",
        f"survived = {len(record.survivors)}", f"equivalent = {record.equivalent}",
        f"score = {record.score:.4f}",
    ]
    for s in record.survivors:
        lines += ["", "[[survivor]]", f"name = {_string(s.name)}", f"status = {_string(s.status)}",
                  f"diff = {_string(s.diff)}", f"equivalent = {_string(s.equivalent)}"]
    return "\n".join(lines) + "\n"


def loads(text: str, concept_name: str) -> Record:
    data = tomllib.loads(text)
    survivors = [Survivor(s["name"], s.get("status", "survived"), s["diff"], s.get("equivalent", ""))
                 for s in data.get("survivor", [])]
    return Record(concept_name, data["version"], data["date"], float(data.get("seconds", 0)), data["fingerprint"],
                  list(data.get("files", [])), int(data["mutants"]), int(data["killed"]), int(data["timeouts"]),
                  survivors)


def load(concept_name: str, root: Path = REPOSITORY_ROOT) -> Record | None:
    path = record_path(concept_name, root)
    return loads(path.read_text(encoding="utf-8"), concept_name) if path.is_file() else None


def keep_reasons(new: Record, old: Record | None) -> None:
    """Carry each reason of ``old`` over to the survivor of ``new`` with the same function and diff (a mutant's
    number shifts when other lines of its function change; what it does is its function and its diff)."""
    if old is None:
        return
    reasons = {(s.function, s.diff): s.equivalent for s in old.survivors if s.equivalent.strip()}
    for s in new.survivors:
        s.equivalent = s.equivalent or reasons.get((s.function, s.diff), "")


# ---- the check ---------------------------------------------------------------------------------------------------


def check(concept_names: list[str], root: Path = REPOSITORY_ROOT) -> list[str]:
    """Print each concept's score; return the problems: a record missing or stale, a survivor without a reason, a
    report that is not the records'."""
    problems = []
    for name in concept_names:
        record = load(name, root)
        rerun = f"re-run `{COMMAND} {name}`"
        where = record_path(name, root).relative_to(root)
        if record is None:
            problems.append(f"{name}: no record {where}; {rerun}")
            continue
        print(f"{name} ({record.mutated}): {summary(record)}")
        if record.fingerprint != fingerprint(name, root):
            problems.append(f"{name}: {', '.join(fingerprint_files(name, root))} changed since {where} was "
                            f"written ({record.date}); {rerun}")
        if dumps(record) != record_path(name, root).read_text(encoding="utf-8"):
            problems.append(f"{name}: {where}'s counts are not those of its survivors (a reason written by hand "
                            f"changes `equivalent` and `score`): run `{COMMAND} --report`")
        if record.unexplained:
            names = ", ".join(s.name.rpartition(".")[2] for s in record.unexplained)
            problems.append(f"{name}: {len(record.unexplained)} survivor(s) without an `equivalent` reason in "
                            f"{where} ({names}): kill each with a sharper test and {rerun}, or write why no input "
                            "the contract admits can tell it from the reference")
    if (root / REPORT).is_file() and report(root) != (root / REPORT).read_text(encoding="utf-8"):
        problems.append(f"{REPORT} is not the records' table: run `{COMMAND} --report`")
    return problems


def summary(record: Record) -> str:
    return (f"{record.killed + record.timeouts}/{record.mutants} killed ({record.timeouts} by timeout), "
            f"{record.equivalent} equivalent, {len(record.unexplained)} unexplained: score {record.score:.1%} "
            f"({TOOL} {record.version}, {record.date})")


# ---- the report --------------------------------------------------------------------------------------------------


def table(root: Path = REPOSITORY_ROOT) -> str:
    rows = ["| concept | mutated | tool | date | mutants | killed | timeouts | equivalent | unexplained | score |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for c in CONCEPTS:
        r = load(c.name, root)
        if r is None:
            rows.append(f"| {c.name} | `{MUTATED.format(c.name)}` | not measured | | | | | | | |")
            continue
        rows.append(f"| {c.name} | `{r.mutated}` | {TOOL} {r.version} | {r.date} | {r.mutants} | {r.killed} | "
                    f"{r.timeouts} | {r.equivalent} | {len(r.unexplained)} | {r.score:.1%} |")
    return "\n".join(rows)


def report(root: Path = REPOSITORY_ROOT) -> str:
    """docs/mutation.md with its table made from the records (the text around the markers is kept)."""
    text = (root / REPORT).read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[:start] + "\n" + table(root) + "\n" + text[end:]


# ---- the run -----------------------------------------------------------------------------------------------------


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def mutmut_config(concept_name: str) -> str:
    """The [tool.mutmut] table the scratch copy's pyproject.toml gets."""
    mutated = MUTATED.format(concept_name)
    package = mutated.partition("/")[0]  # mutmut copies the package it mutates; also_copy the rest
    return "\n".join([
        "", "[tool.mutmut]",
        f"source_paths = {_toml_list([package])}",
        f"only_mutate = {_toml_list([mutated])}",
        f"also_copy = {_toml_list([c for c in COPIED if c not in (package, 'tests', 'pyproject.toml')])}",
        f"pytest_add_cli_args = {_toml_list(['--impl=solutions', '-m', f'{concept_name} and not slow'])}",
        f"pytest_add_cli_args_test_selection = {_toml_list([f'tests/test_{concept_name}.py'])}",
        "",
    ])


def _scratch_copy(into: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.bak-*", ".hypothesis", "*.pyc")
    for name in COPIED:
        source = REPOSITORY_ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, into / name)


def _mutmut(arguments: list[str], cwd: Path, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KATA_HYPOTHESIS_PROFILE": PROFILE, "MPLBACKEND": "Agg", "KATA_MUTATION": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("KATA_IMPL", None)
    if log is None:
        return subprocess.run([sys.executable, *arguments], cwd=cwd, env=env, capture_output=True, text=True)
    with log.open("w") as out:
        return subprocess.run([sys.executable, *arguments], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              text=True)


# Prints each named mutant's diff after a NUL and its name, in one interpreter.
SHOW = ("import sys\nfrom mutmut.__main__ import show\n"
        "for n in sys.argv[1:]:\n    print('\\0' + n)\n    show.callback(n)\n")
RESULT_LINE = re.compile(r"^\s+(\S+__mutmut_\d+): (.+)$")


def changed_lines(diff: str) -> str:
    """The removed and added lines of mutmut's unified diff, without the file headers or context."""
    kept = [line.rstrip() for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return "\n".join(kept) + "\n"


def measure(concept_name: str, jobs: int, keep: bool = False) -> Record:
    """Run mutmut over solutions/<concept>.py in a scratch copy; the record of what survived."""
    from importlib.metadata import version

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"kata-mutation-{concept_name}-"))
    try:
        _scratch_copy(scratch)
        with (scratch / "pyproject.toml").open("a") as project:
            project.write(mutmut_config(concept_name))
        log = scratch / "mutmut-run.log"
        ran = _mutmut(["-m", "mutmut", "run", "--max-children", str(jobs)], scratch, log)
        if ran.returncode != 0:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"mutmut run failed (exit {ran.returncode}) for {concept_name}:\n{tail}")
        listed = _mutmut(["-m", "mutmut", "results", "--all", "true"], scratch)
        verdicts = dict(m.groups() for m in map(RESULT_LINE.match, listed.stdout.splitlines()) if m)
        if not verdicts or "not checked" in verdicts.values():
            raise RuntimeError(f"mutmut left mutants of {concept_name} unchecked:\n{listed.stdout[-2000:]}"
                               f"{listed.stderr[-2000:]}")
        alive = sorted((n for n, v in verdicts.items() if v not in DETECTED and v != TIMEOUT), key=_mutant_order)
        shown = _mutmut(["-c", SHOW, *alive], scratch) if alive else None
        diffs = {}
        if shown is not None:
            for chunk in shown.stdout.split("\0")[1:]:
                name, _, text = chunk.partition("\n")
                diffs[name] = changed_lines(text)
        survivors = [Survivor(n, verdicts[n], diffs.get(n, "")) for n in alive]
        return Record(
            concept_name, version(TOOL), datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            time.monotonic() - started, fingerprint(concept_name), fingerprint_files(concept_name),
            len(verdicts), sum(1 for v in verdicts.values() if v in DETECTED),
            sum(1 for v in verdicts.values() if v == TIMEOUT), survivors)
    finally:
        if keep:
            print(f"{concept_name}: the scratch copy is kept in {scratch} (`mutmut browse` there)")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _mutant_order(name: str) -> tuple[str, int]:
    function, _, number = name.rpartition("__mutmut_")
    return function, int(number)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", help="concepts to mutate (default: all of them)")
    parser.add_argument("--check", action="store_true",
                        help="run nothing: fail unless every record is current and every survivor has a reason")
    parser.add_argument("--report", action="store_true",
                        help=f"only rewrite {REPORT}'s table and each record's counts from the records' survivors")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy, for mutmut browse/show")
    args = parser.parse_args(argv)
    names = [concept(n).name for n in args.concepts] or [c.name for c in CONCEPTS]
    if args.check:
        problems = check(names)
        for problem in problems:
            print(problem)
        print("mutation records: " + (f"{len(problems)} problem(s)" if problems else "every record is current"))
        return 1 if problems else 0
    if args.report:  # a reason written by hand changes a record's `equivalent` and `score`: keep them true
        for name in names:
            record = load(name)
            if record is not None:
                record_path(name).write_text(dumps(record), encoding="utf-8")
    else:
        for name in names:
            try:
                record = measure(name, args.jobs, keep=args.keep)
            except RuntimeError as error:  # mutmut's own failure (a failing clean run, say): its log's tail says why
                print(error, file=sys.stderr)
                return 1
            keep_reasons(record, load(name))
            record_path(name).parent.mkdir(exist_ok=True)
            record_path(name).write_text(dumps(record), encoding="utf-8")
            print(f"{name}: {summary(record)} in {record.seconds:.0f} s", flush=True)
            for s in record.unexplained:
                print(f"    {s.name} ({s.status}): {' | '.join(s.diff.splitlines())}")
    (REPOSITORY_ROOT / REPORT).write_text(report(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
