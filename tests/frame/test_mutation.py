"""The mutation records (kata.catalogue.mutation): their format reads back as written, a re-run keeps the reasons
written by hand, and --check fails on a missing or stale record and on a survivor without a reason. mutmut is not
run here."""

from __future__ import annotations

import shutil
import tomllib

import pytest

from kata.catalogue import mutation
from kata.concepts.impl import REPOSITORY_ROOT as ROOT

pytestmark = pytest.mark.frame
CONCEPT = "gae"


def survivor(number: int, diff: str = "-    a = b + c\n+    a = b - c\n", reason: str = "") -> mutation.Survivor:
    return mutation.Survivor(f"solutions.gae.x_gae_advantages__mutmut_{number}", "survived", diff, reason)


def record(root, survivors) -> mutation.Record:
    return mutation.Record(CONCEPT, "3.8.1", "2026-01-01", 20.0, mutation.fingerprint(CONCEPT, root),
                           mutation.fingerprint_files(CONCEPT, root), mutants=10, killed=7, timeouts=1,
                           survivors=list(survivors))


@pytest.fixture
def repository(tmp_path):
    """The files a check reads: the concept's own, and docs/mutation.md."""
    for path in [*mutation.fingerprint_files(CONCEPT), str(mutation.REPORT)]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tmp_path / path)
    return tmp_path


def write(root, rec: mutation.Record) -> None:
    mutation.record_path(CONCEPT, root).parent.mkdir(exist_ok=True)
    mutation.record_path(CONCEPT, root).write_text(mutation.dumps(rec), encoding="utf-8")
    (root / mutation.REPORT).write_text(mutation.report(root), encoding="utf-8")


def test_a_record_reads_back_as_written_and_counts_unexplained_survivors_against_the_score(repository):
    quoted = "-    s = \"'''\"\n+    s = \"''\"\n"  # a diff a literal string cannot hold
    rec = record(repository, [survivor(1, reason="the cast is the identity here"), survivor(2), survivor(3, quoted)])
    text = mutation.dumps(rec)
    again = mutation.loads(text, CONCEPT)
    assert again == rec, f"a record must read back as it was written:\n{text}"
    data = tomllib.loads(text)
    assert (data["tool"], data["mutants"], data["killed"], data["timeouts"], data["survived"], data["equivalent"]) == (
        "mutmut", 10, 7, 1, 3, 1), f"the record states the tool and the counts: {data}"
    assert again.score == pytest.approx(8 / 9), (
        f"score = (killed + timeouts) / (mutants - equivalent) = 8 / 9; found {again.score}")


def test_a_rerun_keeps_the_reasons_of_survivors_whose_function_and_diff_are_unchanged(repository):
    old = record(repository, [survivor(1, reason="equivalent: why"), survivor(2, "-    x\n+    y\n", reason="too")])
    new = record(repository, [survivor(4), survivor(5, "-    x\n+    z\n")])  # renumbered; the second one changed
    mutation.keep_reasons(new, old)
    assert [s.equivalent for s in new.survivors] == ["equivalent: why", ""], (
        "a reason follows its mutant's function and diff, whatever its number, and is dropped when the diff changed")


def test_check_passes_a_current_record_whose_survivors_are_explained(repository):
    write(repository, record(repository, [survivor(1, reason="why")]))
    assert mutation.check([CONCEPT], repository) == [], "a current, explained record and its report pass --check"


def test_check_names_the_concept_and_the_command_for_each_problem(repository):
    assert "no record" in " ".join(mutation.check([CONCEPT], repository)), "a missing record fails --check"
    write(repository, record(repository, [survivor(1)]))
    problems = mutation.check([CONCEPT], repository)
    assert len(problems) == 1 and "without an `equivalent` reason" in problems[0], (
        f"a survivor without a reason fails --check: {problems}")
    rerun = f"python -m kata.catalogue.mutation {CONCEPT}`"
    assert f"mutation/{CONCEPT}.toml" in problems[0] and rerun in problems[0], (
        f"the problem names the record and the command that re-runs it: {problems}")
    write(repository, record(repository, [survivor(1, reason="why")]))
    with (repository / f"tests/test_{CONCEPT}.py").open("a") as tests:
        tests.write("\n# a change to the concept's tests\n")
    problems = mutation.check([CONCEPT], repository)
    assert len(problems) == 1 and "changed since" in problems[0], f"a stale record fails --check: {problems}"
    assert f"python -m kata.catalogue.mutation {CONCEPT}" in problems[0], "the problem says which command re-runs it"
    write(repository, record(repository, [survivor(1, reason="why")]))
    with (repository / f"kata/testing/strategies/{CONCEPT}.py").open("a") as strategies:
        strategies.write("\n# a narrower strategy\n")
    problems = mutation.check([CONCEPT], repository)
    assert len(problems) == 1 and "changed since" in problems[0], (
        f"a change to the strategies the concept's tests draw from stales its record too: {problems}")
    (repository / mutation.REPORT).write_text(mutation.report(repository).replace("| gae |", "| gea |"))
    assert any("docs/mutation.md" in p for p in mutation.check([CONCEPT], repository)), (
        "a report whose table is not the records' fails --check")


def test_only_the_changed_lines_of_mutmuts_diff_are_kept():
    diff = "# name: survived\n--- solutions/gae.py\n+++ solutions/gae.py\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n"
    assert mutation.changed_lines(diff) == "-b\n+c\n", "the record keeps the removed and added lines only"


def test_every_concept_has_a_record_and_ci_checks_them_after_the_variants():
    missing = [c for c in mutation.CONCEPTS if mutation.load(c.name) is None]
    assert not missing, f"every concept has its mutation/<concept>.toml: missing {[c.name for c in missing]}"
    run = (ROOT / ".ci" / "run").read_text()
    assert "python -m kata.catalogue.mutation --check" in run, ".ci/run checks the mutation records"
    assert run.index("kata.catalogue.variants") < run.index("kata.catalogue.mutation --check"), (
        "the mutation records are checked after the variant catalogue")


def test_a_reason_written_by_hand_leaves_the_record_stale_until_report_rewrites_its_counts(repository):
    write(repository, record(repository, [survivor(1)]))
    path = mutation.record_path(CONCEPT, repository)
    path.write_text(path.read_text().replace('equivalent = ""', 'equivalent = "the cast is the identity"'))
    problems = mutation.check([CONCEPT], repository)
    assert any("counts are not those of its survivors" in p and "--report" in p for p in problems), (
        f"a record whose `equivalent` and `score` lag its reasons is a problem naming --report: {problems}")
    rewritten = mutation.dumps(mutation.load(CONCEPT, repository))
    assert "equivalent = 1" in rewritten and "score = 0.8889" in rewritten, (
        f"rewritten, the record counts the reason (8 of 10 - 1): {rewritten}")
