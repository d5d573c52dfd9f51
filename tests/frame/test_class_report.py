"""The class report: fixture submissions with known misconceptions, diagnosed and counted per concept."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kata.grading import results as reports
from kata.grading import class_report
from kata.catalogue.diagnose import Catalogue, diagnose
from kata.concepts.impl import REPOSITORY_ROOT, load
from kata.concepts.manifest import CONCEPTS, concept

pytestmark = pytest.mark.frame

FIXTURES = REPOSITORY_ROOT / "tests" / "frame" / "fixtures" / "submissions"
OVERLAYS = {"alice": ["truncation_as_termination"], "bob": ["lambda_ignored"], "carol": ["truncation_as_termination"],
            "dan": []}


def build(root, name, overlays):
    folder = root / name
    shutil.copytree(REPOSITORY_ROOT / "solutions", folder)
    for overlay in overlays:
        for module in (FIXTURES / overlay).glob("*.py"):
            shutil.copy(module, folder / module.name)
    return folder


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    catalogue, concepts = Catalogue(), [concept("baselines"), concept("gae")]
    result = {}
    for name, overlays in OVERLAYS.items():
        found: dict[str, list[str]] = {}
        for d in diagnose(load(build(root, name, overlays)), concepts, catalogue):
            if d.mistake and d.mistake not in found.setdefault(d.concept, []):
                found[d.concept].append(d.mistake)
        result[name] = found
    return result


def test_fixture_submissions_are_diagnosed_with_their_misconceptions(diagnosed):
    assert diagnosed == {"alice": {"gae": ["gae/truncation_as_termination"]},
                         "bob": {"gae": ["gae/lambda_not_applied"]},
                         "carol": {"gae": ["gae/truncation_as_termination"]},
                         "dan": {}}, (
        f"each fixture submission is diagnosed with exactly its overlaid misconceptions: {diagnosed}")


def test_counts_per_concept_largest_first(diagnosed):
    with_more = {**diagnosed, "erin": {"gae": ["gae/bootstraps_from_terminal", "gae/bootstraps_from_terminal"],
                                       "baselines": ["baselines/rloo_includes_self"]}}
    table = class_report.tally(with_more)
    assert [(m.mistake, m.count) for m in table["gae"]] == [("gae/truncation_as_termination", 2),
                                                             ("gae/bootstraps_from_terminal", 1),
                                                             ("gae/lambda_not_applied", 1)], (
        f"counts per mistake, largest first, ties by name: {[(m.mistake, m.count) for m in table['gae']]}")
    assert table["gae"][0].submissions == ["alice", "carol"], "a submission counts once per mistake"
    assert table["reinforce"] == [] and list(table) == [c.name for c in CONCEPTS], (
        f"every concept has a row, in the manifest's order, empty when nothing was found: {list(table)}")


def test_the_three_files(diagnosed, tmp_path):
    with_baselines = {**diagnosed, "erin": {"baselines": ["baselines/rloo_includes_self"]}}
    written = class_report.write(with_baselines, tmp_path / "report")
    assert [p.name for p in written] == ["misconceptions.md", "misconceptions.json", "misconceptions.png"], (
        f"the report is misconceptions.md, .json and .png: {[p.name for p in written]}")
    report = json.loads(written[1].read_text())
    assert report["submissions"] == 5, f"the JSON counts every submission: {report['submissions']}"
    assert report["concepts"]["baselines"] == [{
        "mistake": "baselines/rloo_includes_self", "count": 1, "submissions": ["erin"],
        "misunderstanding": class_report.misunderstanding("baselines/rloo_includes_self")}], (
        f"each mistake's entry has its count, submissions and misunderstanding: {report['concepts']['baselines']}")
    markdown = written[0].read_text()
    assert "| 2 of 5 | `gae/truncation_as_termination` |" in markdown, (
        f"the markdown shows 'k of n' per mistake: {markdown!r}")
    assert markdown.count("No catalogued mistake found") == 1 and "1. reinforce" in markdown.split(
        "No catalogued mistake found")[1], f"the concepts with no mistake found share one line: {markdown!r}"
    assert "## 1. reinforce" not in markdown, f"a concept with no mistake found gets no section: {markdown!r}"
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "misconceptions.png must be a PNG"
    empty = class_report.write({"dan": {}}, tmp_path / "empty")
    assert empty[2].stat().st_size > 0, "a class with no mistakes still gets a (non-empty) figure"


def test_given_the_grades_every_submission_has_a_row_and_every_concept_not_passed_its_message(diagnosed, tmp_path):
    ConceptResult = reports.ConceptResult
    graded = [
        reports.SubmissionResult("subs/alice", {
            "baselines": ConceptResult(10.0, 10.0, 8, 0, "passed", ""),
            "gae": ConceptResult(9.0, 15.0, 6, 4, "failed", "AssertionError: the cut | leaks",
                                 extra={"diagnoses": ["gae/truncation_as_termination"]})}),
        reports.SubmissionResult("subs/bob", {
            "baselines": ConceptResult(0.0, 10.0, 0, 8, "not attempted", "not implemented yet: rloo_advantages"),
            "gae": ConceptResult(0.0, 15.0, 0, 0, "error", "gae.py could not be imported (SyntaxError near line 4)")}),
        reports.SubmissionResult("subs/carol", {name: reports.error_result(concept(name), "subs/carol is empty")
                                                for name in ("baselines", "gae")}),
        reports.not_graded("subs/dan", "not graded (interrupted)"),
    ]
    concepts = [concept("baselines"), concept("gae")]
    written = class_report.write(class_report.from_results(graded), tmp_path / "report", concepts, results=graded)
    markdown = written[0].read_text()
    for row in ("| subs/alice | passed | failed |", "| subs/bob | not attempted | error |",
                "| subs/carol | error | error |", "| subs/dan | not graded | not graded |"):
        assert row in markdown, f"every submission has its row of statuses, {row!r} among them: {markdown}"
    for line in ("- subs/alice (failed): AssertionError: the cut \\| leaks",
                 "- subs/bob (not attempted): not implemented yet: rloo_advantages",
                 "- subs/bob (error): gae.py could not be imported (SyntaxError near line 4)",
                 "- subs/carol (error): subs/carol is empty"):
        assert line in markdown.splitlines(), f"each concept not passed has its line and message, {line!r}: {markdown}"
    assert "### 3. gae: 3 of 4 did not pass" in markdown, f"counted per concept: {markdown}"
    report = json.loads(written[1].read_text())
    assert [entry["submission"] for entry in report["results"]] == [r.submission for r in graded], (
        f"the JSON's results have every submission, in order: {report['results']}")
    assert report["results"][1]["concepts"]["gae"] == {
        "status": "error", "message": "gae.py could not be imported (SyntaxError near line 4)"}, (
        f"the JSON has every concept's status and message: {report['results'][1]}")
    assert report["results"][0]["concepts"]["baselines"] == {"status": "passed", "message": ""}, "passed: no message"
    assert "| 1 of 3 | `gae/truncation_as_termination` |" in markdown, f"the counts are as before: {markdown}"
    perfect = reports.SubmissionResult("subs/erin", {c.name: ConceptResult(c.points, c.points, 8, 0, "passed", "")
                                                     for c in concepts})
    assert "Every submission passed every concept." in class_report.to_markdown({}, concepts, [perfect]), (
        "a class with nothing failed says so")


@pytest.mark.e2e
def test_the_grader_diagnoses_failed_concepts_and_the_report_counts_them(tmp_path):
    from kata.grading import grader as grade

    folder = build(tmp_path, "alice", OVERLAYS["alice"])
    result = reports.SubmissionResult(str(folder), {
        "gae": reports.ConceptResult(9.0, 15.0, 6, 4, "failed", "AssertionError: ..."),
        "baselines": reports.ConceptResult(10.0, 10.0, 8, 0, "passed", ""),
    })
    grade.Grader(concepts=[concept("baselines"), concept("gae")], diagnose=True,
                 sandbox=grade.bwrap.unavailable() is None)._diagnose(folder, result)
    assert result.concepts["gae"].extra["diagnoses"] == ["gae/truncation_as_termination"], (
        "a failed concept gets the mistakes it behaves like, found in a child process under the grader's limits")
    assert result.concepts["baselines"].extra["diagnoses"] == [], "a passed concept is not diagnosed"
    assert class_report.from_results([result]) == {str(folder): {"gae": ["gae/truncation_as_termination"]}}, (
        f"the report reads the grader's diagnoses: {class_report.from_results([result])}")


WRITES_WHERE_IT_CAN = '''
from pathlib import Path as _Path

import kata as _kata

for _place in (_Path(_kata.__file__).resolve().parent.parent / "tests", _Path(__file__).resolve().parent):
    (_place / "{marker}").write_text("written by a submission under diagnosis")
'''


@pytest.mark.e2e
def test_a_diagnosed_submission_changes_neither_this_repository_nor_its_own_folder(tmp_path):
    """Diagnosis runs the submission's code: in throwaway copies, so what it writes beside ``kata`` or itself is lost
    with them. (It writes a marker, not over the tests, so that a regression cannot damage this checkout.)"""
    from kata.grading import grader as grade

    marker = f"diagnosis-marker-{os.getpid()}-{tmp_path.name}"
    folder = build(tmp_path, "mallory", OVERLAYS["alice"])
    gae = folder / "gae.py"
    gae.write_text(WRITES_WHERE_IT_CAN.format(marker=marker) + gae.read_text())
    handed_in = sorted(p.name for p in folder.iterdir())
    result = reports.SubmissionResult(str(folder), {"gae": reports.ConceptResult(9.0, 15.0, 6, 4, "failed", "...")})
    try:
        grade.Grader(concepts=[concept("gae")], diagnose=True,
                     sandbox=grade.bwrap.unavailable() is None)._diagnose(folder, result)
        assert result.concepts["gae"].extra["diagnoses"] == ["gae/truncation_as_termination"], (
            "the copies hold what a diagnosis needs: the submission still gets its diagnosis")
        assert not (REPOSITORY_ROOT / "tests" / marker).exists(), (
            "the submission's code wrote into this repository's tests/: the diagnosis must run in a copy")
        assert sorted(p.name for p in folder.iterdir()) == handed_in, (
            "the submission's code wrote into the folder handed in: the diagnosis must run on a copy of it")
    finally:
        (REPOSITORY_ROOT / "tests" / marker).unlink(missing_ok=True)
