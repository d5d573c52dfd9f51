"""The grader: points and statuses per concept, the reports, and robustness against broken submissions.

Two kinds of test. Most run in this process on made-up results (points, statuses, report shapes). The grading runs
use a miniature repository built in a temporary folder: this repository's conftest.py, three small pure-Python
test modules (reinforce, baselines, gae) and pure-Python submissions, so a whole pytest subprocess starts in about
a second without torch; the broken modules of ``tests/frame/fixtures/submissions/`` are laid over them. One slow test
grades copies of solutions/ and exercises/ with the real tests, through the ``kata`` command.
"""

from __future__ import annotations

import _thread
import csv
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kata.grading import results as reports
from kata.grading import batch as grading_batch
from kata.grading import grader as grade
from kata.grading import sandbox
from kata.concepts.manifest import concept

pytestmark = pytest.mark.frame

ROOT = Path(grade.REPOSITORY_ROOT)
FIXTURES = ROOT / "tests" / "frame" / "fixtures" / "submissions"
MINI_CONCEPTS = [concept("reinforce"), concept("baselines"), concept("gae")]
MINI_MAX = sum(c.points for c in MINI_CONCEPTS)

# ---- the miniature repository ------------------------------------------------------------------------------------

MINI_TESTS = {
    "test_reinforce.py": """
        import pytest

        pytestmark = pytest.mark.reinforce


        def test_reward_to_go_restarts_after_an_episode_end(impl):
            assert impl.discounted_reward_to_go([1.0, 1.0, 1.0], [False, True, True], 0.5) == [1.5, 1.0, 1.0]


        def test_loss(impl):
            assert impl.reinforce_surrogate_loss([1.0, 3.0], [2.0, 0.0]) == -1.0
        """,
    "test_baselines.py": """
        import pytest
        from hypothesis import given, strategies as st

        pytestmark = pytest.mark.baselines


        @pytest.mark.parametrize("rewards, expected", [([[1.0, 2.0, 6.0]], [[-3.0, -1.5, 4.5]]),
                                                       ([[0.0, 2.0]], [[-2.0, 2.0]])])
        def test_rloo(impl, rewards, expected):
            assert impl.rloo_advantages(rewards) == expected, "RLOO leaves the sample out of its own baseline"


        @given(st.integers(-10, 10))
        def test_rloo_of_a_pair(impl, r):  # a Hypothesis test: the per-test deadline must beat its retries
            assert impl.rloo_advantages([[float(r), 0.0]]) == [[float(r), -float(r)]]


        def test_group_mean(impl):
            assert impl.group_mean_advantages([[1.0, 2.0, 6.0]]) == [[-2.0, -1.0, 3.0]]
        """,
    "test_gae.py": """
        import pytest

        pytestmark = pytest.mark.gae


        def test_example(impl):
            got = impl.gae_advantages([1.0, 100.0], [2.0, 0.0], [10.0, 0.0], [False, True], [True, True], 0.5, 1.0)
            assert got == [4.0, 100.0]


        def test_lambda_zero_is_the_td_residual(impl):
            got = impl.gae_advantages([1.0, 1.0], [0.0, 0.0], [2.0, 2.0], [False, False], [False, True], 0.5, 0.0)
            assert got == [2.0, 2.0]
        """,
}

MINI_SOLUTIONS = {
    "reinforce.py": """
        def reinforce_surrogate_loss(log_probs, advantages):
            return -sum(lp * a for lp, a in zip(log_probs, advantages)) / len(log_probs)


        def discounted_reward_to_go(rewards, episode_ends, gamma):
            out, running = [], 0.0
            for reward, end in zip(reversed(rewards), reversed(episode_ends)):
                running = reward + (0.0 if end else gamma * running)
                out.append(running)
            return out[::-1]
        """,
    "baselines.py": """
        def group_mean_advantages(rewards):
            return [[r - sum(row) / len(row) for r in row] for row in rewards]


        def rloo_advantages(rewards):
            return [[r - (sum(row) - r) / (len(row) - 1) for r in row] for row in rewards]
        """,
    # GAE is the reward-to-go of the TD residuals, discounted by gamma * lambda and cut at trace cuts: the miniature
    # gae builds on reinforce, as ppo_cartpole builds on gae, so a submission's own chain can differ from its gae.
    "gae.py": """
        from .reinforce import discounted_reward_to_go


        def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
            deltas = [r + (0.0 if end else gamma * nv) - v
                      for r, v, nv, end in zip(rewards, values, next_values, terminated)]
            return discounted_reward_to_go(deltas, trace_cuts, gamma * gae_lambda)
        """,
}

MINI_STUBS = {
    "reinforce.py": """
        from kata.concepts.stub import not_implemented


        def reinforce_surrogate_loss(log_probs, advantages):
            raise not_implemented("reinforce_surrogate_loss")


        def discounted_reward_to_go(rewards, episode_ends, gamma):
            raise not_implemented("discounted_reward_to_go")
        """,
    "baselines.py": """
        from kata.concepts.stub import not_implemented


        def group_mean_advantages(rewards):
            raise not_implemented("group_mean_advantages")


        def rloo_advantages(rewards):
            raise not_implemented("rloo_advantages")
        """,
    "gae.py": """
        from kata.concepts.stub import not_implemented


        def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
            raise not_implemented("gae_advantages")
        """,
}

# rloo_advantages is the same-group mean: it fails the three RLOO tests and passes the group-mean one.
HALF_RIGHT_BASELINES = """
    def group_mean_advantages(rewards):
        return [[r - sum(row) / len(row) for r in row] for row in rewards]


    rloo_advantages = group_mean_advantages
    """


def write_modules(folder: Path, modules: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in modules.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def mini_conftest() -> str:
    """This repository's conftest.py, without its torch lines when torch is used for nothing else there (its import
    becomes ``pass``, so a block that held only torch's lines stays a block).

    The miniature suite never touches torch, and importing it costs seconds in every grading subprocess.
    """
    text = (ROOT / "conftest.py").read_text()
    lines = [line.replace("import torch", "pass") if line.strip() == "import torch" else line
             for line in text.splitlines(keepends=True)]
    kept = [line for line in lines if not line.lstrip().startswith("torch.")]
    code = "".join(line for line in kept if not line.lstrip().startswith("#"))
    return "".join(kept) if "torch" not in code else text  # any other use of torch: keep the file as it is


def mini_repository(root: Path) -> Path:
    """This repository's conftest.py, an ini file that makes the folder pytest's rootdir, the mini tests and the
    mini reference (solutions/)."""
    root.mkdir(parents=True)
    (root / "conftest.py").write_text(mini_conftest())
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    write_modules(root / "tests", MINI_TESTS)
    write_modules(root / "solutions", MINI_SOLUTIONS)
    return root


def submission(root: Path, name: str, base: dict[str, str], overlay: str | None = None) -> str:
    """A submission folder: ``base`` modules, with the broken modules of fixtures/submissions/<overlay> over them."""
    folder = write_modules(root / name, base)
    if overlay is not None:
        for module in (FIXTURES / overlay).glob("*.py"):  # concept modules, or a package __init__.py
            shutil.copy(module, folder / module.name)
    return str(folder)


# ---- points and statuses -----------------------------------------------------------------------------------------


def summary(**counts):
    base = dict(collected=0, passed=0, failed=0, skipped=0, timeout=0, import_error=0, setup_error=0,
                not_implemented=0, message="", kind="")
    base.update(counts)
    return base


@pytest.mark.parametrize(
    "counts, points, status",
    [
        (dict(collected=4, passed=4), 10.0, "passed"),
        (dict(collected=4, passed=3, failed=1, message="AssertionError: x"), 7.5, "failed"),
        (dict(collected=4, passed=0, failed=4, not_implemented=4), 0.0, "failed"),
        (dict(collected=4, passed=2, failed=2, timeout=1), 0.0, "timeout"),
        (dict(collected=4, passed=0, failed=4, import_error=4), 0.0, "error"),
        (dict(collected=4, passed=0, failed=4, setup_error=4), 0.0, "error"),
        (dict(collected=4, passed=3, failed=1, setup_error=1), 7.5, "failed"),
        (dict(collected=0), 0.0, "error"),
        (dict(collected=2, skipped=2), 0.0, "error"),
    ],
)
def test_points_are_partial_credit_and_zero_for_error_and_timeout(counts, points, status):
    result = reports.concept_result(concept("baselines"), summary(**counts))
    assert result.max_points == 10.0, f"baselines is worth 10 points: {result.max_points}"
    assert result.points == pytest.approx(points), "points are max_points * passed / (passed + failed)"
    assert result.status == status, f"{counts} has status {status!r}: {result.status!r}"


def test_a_concept_without_a_summary_is_an_error():
    result = reports.concept_result(concept("gae"), None)
    assert (result.status, result.points, result.max_points) == ("error", 0.0, 15.0), (
        f"no summary: an error worth 0 of gae's 15: {(result.status, result.points, result.max_points)}")
    assert "tests/test_gae.py" in result.message, (
        f"the message names the test file that gave no summary: {result.message!r}")


def made_up_results() -> list[reports.SubmissionResult]:
    good = reports.SubmissionResult("subs/alice", {
        "reinforce": reports.ConceptResult(10.0, 10.0, 11, 0, "passed", ""),
        "gae": reports.ConceptResult(7.5, 15.0, 6, 6, "failed", "AssertionError: the recursion | leaks",
                                   extra={"diagnoses": ["gae/recursion_leaks_across_cuts"]}),
    })
    bad = reports.SubmissionResult("subs/bob", {
        "reinforce": reports.ConceptResult(0.0, 10.0, 0, 0, "timeout", "timed out"),
        "gae": reports.ConceptResult(0.0, 15.0, 0, 0, "error", "gae.py could not be imported"),
    })
    return [good, bad]


def test_json_report_has_exactly_the_documented_shape():
    data = json.loads(json.dumps(reports.to_json(made_up_results())))
    assert list(data) == ["submissions"], f"the JSON report has one top-level key, submissions: {list(data)}"
    first = data["submissions"][0]
    assert set(first) == {"submission", "graded", "total", "max_total", "notes", "concepts"}, (
        f"a submission's documented fields: {sorted(first)}")
    assert (first["submission"], first["total"], first["max_total"]) == ("subs/alice", 17.5, 25.0), (
        f"the submission, its total and its maximum: {(first['submission'], first['total'], first['max_total'])}")
    assert first["concepts"]["gae"]["diagnoses"] == ["gae/recursion_leaks_across_cuts"], (
        f"a concept's diagnoses are in the JSON: {first['concepts']['gae'].get('diagnoses')}")
    for result in first["concepts"].values():
        assert set(result) - {"diagnoses"} == {"points", "max_points", "passed", "failed", "status", "message",
                                               "chained_status", "chained_message"}, (
            f"a concept's documented fields: {sorted(result)}")
        assert result["chained_status"] == result["status"], "no chain run: the chained status is the status"
        assert isinstance(result["points"], float) and isinstance(result["passed"], int), (
            f"points are a float, passed an int: {result['points']!r}, {result['passed']!r}")
    assert {r["status"] for s in data["submissions"] for r in s["concepts"].values()} <= set(reports.STATUSES), (
        "every status is one of reports.STATUSES")


def test_csv_has_one_row_per_submission_and_a_column_per_concept():
    rows = list(csv.reader(io.StringIO(reports.to_csv(made_up_results(), [concept("reinforce"), concept("gae")]))))
    assert rows[0] == ["submission", "reinforce", "gae", "total", "max_total", "reinforce status", "gae status",
                       "reinforce message", "gae message", "diagnoses", "notes"], (
        f"the header: submission, a column per concept, total, max_total, each concept's status, each concept's "
        f"message, diagnoses, notes: {rows[0]}")
    assert rows[1] == ["subs/alice", "10", "7.5", "17.5", "25", "passed", "failed",
                       "", "AssertionError: the recursion | leaks", "gae/recursion_leaks_across_cuts", ""], (
        f"a graded row, with its statuses, each concept's message (blank where passed) and diagnosis: {rows[1]}")
    assert rows[2] == ["subs/bob", "0", "0", "0", "25", "timeout", "error", "timed out",
                       "gae.py could not be imported", "", ""], (
        f"a row of zeros that tells a timeout and an error from a failure, with the message of each, the later "
        f"concept's error included: {rows[2]}")


def test_a_submission_not_graded_is_blank_never_zero_and_a_chain_that_differs_is_said_everywhere():
    alice, _ = made_up_results()
    alice.concepts["gae"].chained_status = "failed"
    alice.concepts["gae"].chained_message = reports.chained_sentence("gae", "passed", "failed",
                                                                     [("reinforce", "failed")])
    assert alice.concepts["gae"].chained_message == (
        "gae passes on its own code; with your reinforce it fails (reinforce is wrong)"), (
        f"the chain's sentence says which concept is wrong: {alice.concepts['gae'].chained_message!r}")
    results = [alice, reports.not_graded("subs/carol", "not graded (interrupted)")]
    concepts = [concept("reinforce"), concept("gae")]
    rows = list(csv.reader(io.StringIO(reports.to_csv(results, concepts))))
    assert rows[2] == ["subs/carol", *[""] * 9, "not graded (interrupted)"], "blank, never 0"
    assert rows[1][-1] == alice.concepts["gae"].chained_message, (
        f"the notes column carries the chain's sentence: {rows[1][-1]!r}")
    data = reports.to_json(results)["submissions"]
    assert (data[0]["concepts"]["gae"]["chained_status"] == "failed"
            and data[0]["concepts"]["gae"]["status"] == "failed"), (
        f"a failing chain makes the concept fail in the JSON: {data[0]['concepts']['gae']}")
    assert (data[1]["graded"], data[1]["total"], data[1]["concepts"]) == (False, None, {}), (
        f"not graded: graded false, total null, no concepts: {data[1]}")
    assert alice.concepts["gae"].chained_message in reports.markdown(results, concepts), (
        "the markdown report carries the chain's sentence")
    assert alice.concepts["gae"].chained_message in reports.to_gradescope(alice, concepts)["tests"][1]["output"], (
        "the Gradescope output of the concept carries the chain's sentence")
    alice.concepts["gae"].extra["diagnoses"] = ["a later tool's finding"]
    assert reports.to_json(results)["submissions"][0]["concepts"]["gae"]["diagnoses"] == ["a later tool's finding"], (
        "the JSON reports the diagnoses present when it is written")


def test_gradescope_results_have_a_test_per_concept_and_the_score():
    data = reports.to_gradescope(made_up_results()[0], [concept("reinforce"), concept("gae")])
    assert data["score"] == 17.5, f"the Gradescope score is the total: {data['score']}"
    assert [(t["score"], t["max_score"]) for t in data["tests"]] == [(10.0, 10.0), (7.5, 15.0)], (
        f"one Gradescope test per concept with its points: {[(t['score'], t['max_score']) for t in data['tests']]}")
    assert all(t["name"] and t["output"] and t["visibility"] == "visible" for t in data["tests"]), (
        f"every test has a name, an output and is visible: {data['tests']}")
    assert "the recursion | leaks" in data["tests"][1]["output"], "the first failure is shown to the student"
    assert data["tests"][1]["output"].splitlines()[2] == (
        "your code behaves like the catalogued mistake 'the backward recursion continues across a trace cut' "
        "(gae/recursion_leaks_across_cuts): `kata hint gae --level 3`"), "the diagnosis is a line of the output"


def test_markdown_table_and_problems():
    text = reports.markdown(made_up_results(), [concept("reinforce"), concept("gae")])
    lines = text.splitlines()
    assert lines[0] == "| submission | reinforce | gae | total |", f"the markdown header: {lines[0]!r}"
    assert lines[2] == "| subs/alice | 10/10 | 7.5/15 failed | 17.5/25 |", (
        f"a row shows points/max and the status of a concept not passed: {lines[2]!r}")
    assert "- gae (failed, 6 of 12 passed): AssertionError: the recursion \\| leaks" in lines, (
        f"a problem line: concept, status, count passed, first failure (| escaped): {lines}")
    assert ("- gae: your code behaves like the catalogued mistake 'the backward recursion continues across a trace "
            "cut' (gae/recursion_leaks_across_cuts): `kata hint gae --level 3`") in lines, (
        f"a diagnosis line names the catalogued mistake and its hint: {lines}")
    assert "- reinforce (timeout, no test ran): timed out" in lines, f"a timeout with no test run is said so: {lines}"
    assert "- gae (error): gae.py could not be imported" in lines, (
        f"code that did not load is one line, the error and its message, no count of tests: {lines}")


def test_a_module_that_does_not_import_is_an_error_with_no_test_failed():
    summary = dict(collected=11, passed=0, failed=11, import_error=11, setup_error=0, timeout=0,
                   message="gae.py could not be imported (NameError near line 3: name 'x' is not defined)")
    r = reports.concept_result(concept("gae"), summary)
    assert (r.status, r.points, r.passed, r.failed, r.message) == ("error", 0.0, 0, 0, summary["message"]), (
        f"an import error is the concept's error with its message, never 11 failed tests: {r}")
    output = reports.gradescope_output(concept("gae"), r)
    assert output.startswith(f"error: {summary['message']}") and "tests passed" not in output, (
        f"the student reads the import's message, not a count of tests: {output!r}")


def test_a_note_every_submission_carries_is_said_once():
    results = made_up_results()
    note = "no sandbox: bwrap is not installed (sudo apt-get install bubblewrap)"
    for result in results:
        result.notes.append(note)
    text = reports.markdown(results, [concept("reinforce"), concept("gae")])
    assert text.count(note) == 1 and "Every submission:" in text, f"the run's note, once per report: {text}"
    rows = list(csv.reader(io.StringIO(reports.to_csv(results, [concept("reinforce"), concept("gae")]))))
    assert all(note not in row[-1] for row in rows[1:]), f"no row of the CSV repeats the run's note: {rows}"
    assert reports.shared_notes(results[:1]) == [], "one submission's notes are its own"


def test_every_report_is_readable_like_the_class_report(tmp_path):
    old = os.umask(0o022)
    try:
        paths = reports.write_reports(made_up_results(), json_path=tmp_path / "g.json", csv_path=tmp_path / "g.csv",
                                      markdown_path=tmp_path / "g.md")
    finally:
        os.umask(old)
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in paths} == {
        "g.json": "0o644", "g.csv": "0o644", "g.md": "0o644"}, (
        "grades.json/csv/md take the mode any file gets under the umask (0644 under 022), as class/ does")


def test_reports_are_written_where_asked(tmp_path):
    paths = dict(json_path=tmp_path / "r.json", csv_path=tmp_path / "out" / "r.csv",
                 gradescope_path=tmp_path / "results.json")
    written = reports.write_reports(made_up_results(), concepts=[concept("reinforce"), concept("gae")],
                                  **{k: str(v) for k, v in paths.items()})
    assert sorted(written) == sorted(paths.values()), (
        f"every report asked for is written, at its path: {sorted(written)}")
    assert json.loads(paths["gradescope_path"].read_text())["score"] == 17.5, (
        "the Gradescope file holds the submission's score")


def test_a_folder_that_is_not_a_submission_is_an_error_for_every_concept(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".DS_Store").write_text("")  # what a file manager leaves: still nothing handed in
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.txt").write_text("my answers are in the post\n")
    grader = grade.Grader(concepts=MINI_CONCEPTS)
    said = {"missing": "is not a folder", "empty": "is empty: nothing was handed in", "notes": "holds none of"}
    for name, words in said.items():
        result = grader.grade(tmp_path / name)
        assert [r.status for r in result.concepts.values()] == ["error"] * 3, (
            f"{name}: every concept is an error: {[r.status for r in result.concepts.values()]}")
        assert result.total == 0 and result.max_total == MINI_MAX, (
            f"{name}: no points, the maximum still counted: {result.total}, {result.max_total}")
        assert all(words in r.message and ("reinforce.py" in r.message or name == "missing")
                   for r in result.concepts.values()), (
            f"{name}: every concept's message says '{words}' (and names the modules expected): "
            f"{result.concepts['gae'].message!r}")


def test_an_untouched_stub_is_not_attempted_and_code_of_the_student_s_own_that_fails_is_failed(tmp_path):
    reference = write_modules(tmp_path / "reference", MINI_SOLUTIONS)
    half = MINI_STUBS["reinforce.py"].replace('raise not_implemented("reinforce_surrogate_loss")', "return 0.0")
    cases = {  # module, (passed, failed, status) -> the status reported
        "untouched": (MINI_STUBS["reinforce.py"], (0, 2, "failed"), "not attempted"),
        "half written": (half, (0, 2, "failed"), "failed"),
        "one passing": (MINI_STUBS["reinforce.py"], (1, 1, "failed"), "failed"),
        "not loading": (MINI_STUBS["reinforce.py"], (0, 0, "error"), "error"),
    }
    for name, (text, (passed, failed, status), expected) in cases.items():
        module = write_modules(tmp_path / name, {"reinforce.py": text}) / "reinforce.py"
        r = reports.ConceptResult(0.0, 10.0, passed, failed, status, "not implemented yet: reinforce_surrogate_loss")
        reports.mark_not_attempted(r, module, reference / "reinforce.py")
        assert r.status == expected, f"{name}: a {status} reinforce.py reads {expected!r}, not {r.status!r}"
    for c in grade.CONCEPTS:  # the stubs a class is handed: each is told apart
        r = reports.ConceptResult(0.0, float(c.points), 0, 5, "failed", "not implemented yet: ...")
        reports.mark_not_attempted(r, ROOT / "exercises" / f"{c.name}.py", ROOT / "solutions" / f"{c.name}.py")
        assert r.status == "not attempted", f"exercises/{c.name}.py as shipped is not attempted: {r.status!r}"

    stub = reports.ConceptResult(0.0, 15.0, 0, 2, "not attempted", "not implemented yet: gae_advantages")
    result = reports.SubmissionResult("subs/dan", {"gae": stub})
    assert "| subs/dan | 0/15 not attempted | 0/15 |" in reports.markdown([result], [concept("gae")]), (
        "the Markdown row says not attempted")
    rows = list(csv.reader(io.StringIO(reports.to_csv([result], [concept("gae")]))))
    assert rows[1][4:6] == ["not attempted", "not implemented yet: gae_advantages"], (
        f"the CSV's status and message: {rows[1]}")
    output = reports.gradescope_output(concept("gae"), stub)
    assert output.startswith("not attempted: gae.py is still the stub as handed out (0 of 2 tests passed)"), (
        f"the student reads that the stub is untouched: {output!r}")
    assert reports.chained_sentence("gae", "passed", "failed", [("reinforce", "not attempted")]) == (
        "gae passes on its own code; with your reinforce it fails (reinforce is still the stub)"), (
        "the chain's sentence names a stub left untouched as such")


def class_folder(root: Path) -> Path:
    """A class as collected: alice and bob handed in code, carol an empty folder, dan a note; a report of an
    earlier run and a hidden folder lie beside them."""
    subs = root / "submissions"
    write_modules(subs / "alice", {"baselines.py": HALF_RIGHT_BASELINES, "gae.py": "def gae_advantages(:\n"})
    write_modules(subs / "bob", MINI_SOLUTIONS)
    (subs / "carol").mkdir()
    write_modules(subs / "dan", {"README.txt": "I could not do it\n"})
    (subs / ".git").mkdir()
    (subs / "grades.csv").write_text("submission\n")
    return subs


def scripted_concepts(self, folder, concepts, *, chained, notes):
    """Grader._grade_concepts without a subprocess: alice fails baselines and her gae does not load."""
    made = {"baselines": reports.ConceptResult(2.5, 10.0, 1, 3, "failed", "AssertionError: RLOO leaves the sample out"),
            "gae": reports.error_result(concept("gae"), "gae.py could not be imported (SyntaxError near line 1)")}
    return {c.name: made[c.name] if folder.name == "alice" and c.name in made else
            reports.ConceptResult(float(c.points), float(c.points), 2, 0, "passed", "") for c in concepts}


def test_kata_grade_of_a_class_gives_every_folder_a_row_an_empty_one_included(tmp_path, monkeypatch, capsys):
    from kata import cli
    from kata.grading import commands

    subs = class_folder(tmp_path)
    monkeypatch.setattr(sandbox, "unavailable", lambda python=None: None)  # what is said here needs no bwrap
    monkeypatch.setattr(grade.Grader, "_grade_concepts", scripted_concepts)
    monkeypatch.setattr(grade.Grader, "_diagnose", lambda self, folder, result: None)
    out = {name: tmp_path / f"grades.{name}" for name in ("json", "csv", "md")}
    assert cli.main(["grade", str(subs), "--concepts", "reinforce,baselines,gae", "--json", str(out["json"]),
                     "--csv", str(out["csv"]), "--markdown", str(out["md"]), "--class-report",
                     str(tmp_path / "class")]) == 0, "`kata grade submissions/` exits 0"
    printed = capsys.readouterr()
    names = [str(subs / name) for name in ("alice", "bob", "carol", "dan")]
    said = [line for line in printed.err.splitlines() if "holds no concept module" in line]
    assert said == [f"kata grade: {subs} holds no concept module but 4 folder(s): grading each as a submission, as "
                    f"`kata grade {subs}/*` would (4 submission(s))"], f"what it understood, in one line: {said}"
    assert f"kata grade: skipped {subs / 'grades.csv'}: not a folder" in printed.err.splitlines(), (
        f"the file beside the submissions is skipped with one line: {printed.err}")
    shell = sorted(glob.glob(f"{subs}/*"))  # as the shell expands submissions/*: hidden entries aside
    one_by_one = [found for child in shell for found in commands.submission_folders(child)[0]]
    assert commands.submission_folders(str(subs))[0] == one_by_one == names, (
        f"`kata grade submissions` grades what `kata grade submissions/*` grades: {one_by_one}")

    graded = json.loads(out["json"].read_text())["submissions"]
    assert [entry["submission"] for entry in graded] == names, f"a JSON entry per folder: {graded}"
    carol = graded[2]["concepts"]
    assert {c["status"] for c in carol.values()} == {"error"} and all(
        "is empty: nothing was handed in" in c["message"] for c in carol.values()), (
        f"the empty folder's every concept is an error saying it is empty: {carol}")
    rows = list(csv.reader(io.StringIO(out["csv"].read_text())))
    assert [row[0] for row in rows[1:]] == names, f"a CSV row per folder: {[row[0] for row in rows]}"
    header = rows[0]
    alice, carol_row = dict(zip(header, rows[1])), dict(zip(header, rows[3]))
    assert carol_row["gae status"] == "error" and "is empty" in carol_row["gae message"], f"carol's row: {carol_row}"
    assert (alice["baselines message"], alice["gae message"]) == (
        "AssertionError: RLOO leaves the sample out", "gae.py could not be imported (SyntaxError near line 1)"), (
        f"every concept not passed has its message, the later concept's syntax error included: {alice}")
    for table in (printed.out, out["md"].read_text()):
        assert all(f"| {name} |" in table for name in names), f"a Markdown row per folder: {table}"
        assert "- gae (error): gae.py could not be imported (SyntaxError near line 1)" in table, (
            f"the later concept's error has its line: {table}")
    report = (tmp_path / "class" / "misconceptions.md").read_text()
    assert f"| {names[2]} | error | error | error |" in report, f"the class report has carol's row: {report}"
    assert f"- {names[0]} (error): gae.py could not be imported (SyntaxError near line 1)" in report and (
        f"- {names[0]} (failed): AssertionError: RLOO leaves the sample out" in report), (
        f"the class report gives every concept not passed its message: {report}")
    results = json.loads((tmp_path / "class" / "misconceptions.json").read_text())["results"]
    assert [entry["submission"] for entry in results] == names, f"the class report's JSON has every folder: {results}"


def test_gradescope_with_several_submissions_is_refused_before_anything_is_graded(tmp_path, monkeypatch, capsys):
    from kata import cli

    subs = class_folder(tmp_path)
    graded = []
    monkeypatch.setattr(grade.Grader, "grade", lambda self, folder: graded.append(folder))
    results = tmp_path / "results.json"
    assert cli.main(["grade", str(subs), "--gradescope", str(results)]) == 2, "refused: exit 2"
    refusal = [line for line in capsys.readouterr().err.splitlines() if "--gradescope" in line]
    assert len(refusal) == 1 and "4 were found" in refusal[0] and "give exactly one SUBMISSION" in refusal[0], (
        f"one line says why: {refusal}")
    assert graded == [] and not results.exists(), f"nothing was graded or written: {graded}"


def test_kata_grade_outside_the_repository_says_which_folder_it_looked_in(tmp_path, monkeypatch, capsys):
    from kata import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["grade"]) == 2, "no ./exercises to grade: exit 2"
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"looked in {tmp_path.resolve() / 'exercises'}" in error, (
        f"one line naming the folder it looked in: {error!r}")


class ScriptedGrader(grade.Grader):
    """Grades without subprocesses: each submission's name says what happens."""

    def grade(self, submission):
        if submission == "interrupt":  # Ctrl-C while this one is being graded
            _thread.interrupt_main()
            for _ in range(500):
                if self.stopped:
                    raise grade.GradingStopped("killed")
                time.sleep(0.01)
            raise AssertionError("the batch was not stopped")
        if submission == "grader-bug":
            raise RuntimeError("a bug in the grader")
        return reports.SubmissionResult(submission, {c.name: reports.ConceptResult(c.points, c.points, 1, 0, "passed",
                                                                                   "")
                                                   for c in self.concepts})


def test_a_grader_failure_is_an_error_for_that_submission_only():
    results = grading_batch.grade_all(["a", "grader-bug", "b"], ScriptedGrader(concepts=MINI_CONCEPTS, sandbox=False),
                                      jobs=2)
    assert [r.total for r in results] == [MINI_MAX, 0.0, MINI_MAX], (
        f"a grader failure costs only its submission: {[r.total for r in results]}")
    assert all(r.status == "error" and "a bug in the grader" in r.message for r in results[1].concepts.values()), (
        f"the grader's failure is every concept's error message: {results[1].concepts}")


@pytest.fixture
def ctrl_c_delivered():
    """Python's own SIGINT handler for the test: a process started in the background by a shell inherits SIGINT
    ignored, and ``_thread.interrupt_main`` then does nothing (the Ctrl-C this test simulates would never arrive)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_keeps_what_was_graded_and_marks_the_rest(tmp_path, ctrl_c_delivered):
    with pytest.raises(grading_batch.GradingInterrupted) as interrupted:
        grading_batch.grade_all(["a", "interrupt", "b"], ScriptedGrader(concepts=MINI_CONCEPTS, sandbox=False), jobs=1)
    results = interrupted.value.results
    assert [r.submission for r in results] == ["a", "interrupt", "b"], (
        f"every submission is in the results, in order: {[r.submission for r in results]}")
    assert results[0].total == MINI_MAX, f"the submission graded before Ctrl-C keeps its points: {results[0].total}"
    assert [(r.graded, r.notes) for r in results[1:]] == [(False, ["not graded (interrupted)"])] * 2, (
        f"the rest are marked not graded: {[(r.graded, r.notes) for r in results[1:]]}")
    written = reports.write_reports(results, json_path=str(tmp_path / "r.json"))
    assert len(json.loads(written[0].read_text())["submissions"]) == 3, "the report is written all the same"


# ---- grading runs on the miniature repository --------------------------------------------------------------------

REQUIRE_SANDBOX = "KATA_REQUIRE_SANDBOX"  # set by .ci/run: there a sandboxed test fails, never skips, without bwrap


def sandbox_works() -> bool:
    """Whether bwrap confines runs here (tests of the sandbox skip where it does not, except under .ci/run)."""
    problem = sandbox.unavailable()
    if problem is not None and not os.environ.get(REQUIRE_SANDBOX):
        pytest.skip(problem)
    assert problem is None, f"${REQUIRE_SANDBOX} is set, so bwrap must work here: {problem}"
    return True


def sandbox_flags() -> list[str]:
    """What `kata grade` needs here: nothing where bwrap works; --no-sandbox where it does not (it refuses to grade
    unsandboxed otherwise), except under .ci/run, where that fails."""
    problem = sandbox.unavailable()
    assert problem is None or not os.environ.get(REQUIRE_SANDBOX), (
        f"${REQUIRE_SANDBOX} is set, so bwrap must work here: {problem}")
    return [] if problem is None else ["--no-sandbox"]


def process_tagged(tag: str) -> list[int]:
    """Processes (of any PID namespace below this one) whose command line holds ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and tag.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
def test_a_batch_of_broken_submissions_is_graded_concept_by_concept(tmp_path, monkeypatch, sandboxed):
    """The same grades with and without bwrap: unsandboxed, the grader as it runs where bwrap is missing."""
    if sandboxed:
        sandbox_works()
    repository = mini_repository(tmp_path / "repository")
    subs = tmp_path / "submissions"
    pids, tag = tmp_path / "pids.txt", f"kata-background-{os.getpid()}-{tmp_path.name}"
    monkeypatch.setenv("GRADE_FIXTURE_PIDS", str(pids))  # the pids a run outside a sandbox can write
    monkeypatch.setenv("GRADE_FIXTURE_TAG", tag)  # on the background process's command line, in either case
    submissions = [
        submission(subs, "perfect", MINI_SOLUTIONS),
        submission(subs, "stubs", MINI_STUBS),
        submission(subs, "hanging", MINI_SOLUTIONS, "hanging"),
        submission(subs, "unkillable", MINI_SOLUTIONS, "unkillable"),
        submission(subs, "crashing", MINI_SOLUTIONS, "crashing"),
        submission(subs, "interrupting", MINI_SOLUTIONS, "interrupting"),
        submission(subs, "syntax_error", MINI_SOLUTIONS, "syntax_error"),
        submission(subs, "import_error", MINI_SOLUTIONS, "import_error"),
        submission(subs, "broken_package", MINI_SOLUTIONS, "broken_package"),
        submission(subs, "half_right", {**MINI_SOLUTIONS, "baselines.py": HALF_RIGHT_BASELINES}),
        submission(subs, "imports_solutions", MINI_SOLUTIONS, "imports_solutions"),
        submission(subs, "wrong_reinforce", MINI_SOLUTIONS, "wrong_reinforce"),
        submission(subs, "tampering", MINI_SOLUTIONS, "tampering"),
        submission(subs, "background", MINI_SOLUTIONS, "background"),
        os.fsdecode(submission(subs, "caf\udce9", MINI_SOLUTIONS)),  # a name that is not UTF-8 (b"caf\xe9")
        submission(subs, "perfect_again", MINI_SOLUTIONS),
        str(subs / "not_there"),
    ]
    tests_before = {path.name: path.read_text() for path in (repository / "tests").glob("*.py")}
    # Submissions in a folder with its own pytest configuration (a clone of the kata, say): the grader's
    # repository configures pytest, whatever pytest would find above the submissions.
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--no-such-option"\n')
    grader = grade.Grader(concepts=MINI_CONCEPTS, timeout=1.0, kill_grace=3.0, watchdog=60.0, repository=repository,
                          sandbox=sandboxed, passed_variables=("GRADE_FIXTURE_PIDS", "GRADE_FIXTURE_TAG"))
    csv_path = tmp_path / "grades.csv"
    listed, interrupted = grading_batch.run_batch(submissions, grader, jobs=2, reports=dict(
        csv_path=str(csv_path), json_path=str(tmp_path / "grades.json"), markdown_path=str(tmp_path / "grades.md"),
        concepts=MINI_CONCEPTS))
    assert not interrupted, "the batch ran to its end, uninterrupted"
    results = {Path(r.submission).name: r for r in listed}
    statuses = {name: {c: r.status for c, r in result.concepts.items()} for name, result in results.items()}
    chained = {name: {c: r.chained_status for c, r in result.concepts.items()} for name, result in results.items()}

    assert [Path(r.submission).name for r in listed][:3] == ["perfect", "stubs", "hanging"], "in the given order"
    for name in ("perfect", "perfect_again", "caf\\xe9"):
        assert statuses[name] == dict(reinforce="passed", baselines="passed", gae="passed"), results[name]
        assert results[name].total == MINI_MAX and results[name].notes == [], (
            f"{name}: every point, no note: {results[name].total}, {results[name].notes}")
    assert results["perfect"].concepts["baselines"].passed == 4, "every collected test of a concept counts"
    assert statuses["stubs"] == dict(reinforce="not attempted", baselines="not attempted", gae="not attempted"), (
        f"untouched stubs are not attempted, told apart from code that fails: {statuses['stubs']}")
    assert results["stubs"].total == 0, f"stubs score nothing: {results['stubs'].total}"
    assert results["stubs"].concepts["gae"].message.startswith("not implemented yet: gae_advantages"), (
        f"a stub's message says what is not implemented: {results['stubs'].concepts['gae'].message!r}")
    assert statuses["hanging"] == dict(reinforce="passed", baselines="timeout", gae="passed"), (
        "a hanging concept times out (even under Hypothesis) and the others are still graded")
    assert "timed out" in results["hanging"].concepts["baselines"].message, (
        f"the timeout is said: {results['hanging'].concepts['baselines'].message!r}")
    assert statuses["unkillable"] == dict(reinforce="passed", baselines="timeout", gae="passed"), (
        "a hang no alarm reaches is killed shortly after the timeout, and the other concepts are graded again")
    assert "after its test started" in results["unkillable"].concepts["baselines"].message, (
        f"the kill is said with when it came: {results['unkillable'].concepts['baselines'].message!r}")
    assert statuses["crashing"] == dict(reinforce="passed", baselines="error", gae="passed"), (
        "a module that kills the test process is an error for its concept; the others are graded again")
    assert "exit code 3" in results["crashing"].concepts["baselines"].message, (
        f"the crash's exit code is said: {results['crashing'].concepts['baselines'].message!r}")
    assert statuses["interrupting"] == dict(reinforce="passed", baselines="error", gae="passed"), (
        "a KeyboardInterrupt from the submission stops its session, not the grading")
    assert "interrupted" in results["interrupting"].concepts["baselines"].message, (
        f"the interruption is said: {results['interrupting'].concepts['baselines'].message!r}")
    assert statuses["syntax_error"] == dict(reinforce="passed", baselines="passed", gae="error"), (
        f"a gae.py that does not parse is an error for gae only: {statuses['syntax_error']}")
    assert "could not be imported (SyntaxError" in results["syntax_error"].concepts["gae"].message, (
        f"the message names the SyntaxError: {results['syntax_error'].concepts['gae'].message!r}")
    assert str(subs / "syntax_error") in results["syntax_error"].concepts["gae"].message, "names the submission"
    assert statuses["import_error"] == dict(reinforce="error", baselines="passed", gae="passed"), (
        "gae builds on reinforce: graded on the reference's reinforce, it keeps its points")
    assert chained["import_error"]["gae"] == "error", (
        f"on the student's reinforce, which does not load, gae's chain is an error: {chained['import_error']}")
    assert results["import_error"].concepts["gae"].chained_message == (
        "gae passes on its own code; with your reinforce it does not load (reinforce does not load)"), (
        f"the chain's sentence: {results['import_error'].concepts['gae'].chained_message!r}")
    assert "ModuleNotFoundError" in results["import_error"].concepts["reinforce"].message, (
        f"the import error is named: {results['import_error'].concepts['reinforce'].message!r}")
    assert statuses["broken_package"] == dict(reinforce="error", baselines="error", gae="error"), (
        "a package that does not load is an error for every concept, not a failure")
    assert "__init__ fails" in results["broken_package"].concepts["gae"].message, (
        f"the package's failure is named: {results['broken_package'].concepts['gae'].message!r}")
    half = results["half_right"].concepts["baselines"]
    assert (half.passed, half.failed, half.points, half.status) == (1, 3, 2.5, "failed"), "partial credit"
    assert "RLOO leaves the sample out" in half.message, "the first failure's own message is reported"
    assert statuses["imports_solutions"]["reinforce"] == "error", (
        f"importing solutions is an error: {statuses['imports_solutions']}")
    assert "grading forbids importing solutions" in results["imports_solutions"].concepts["reinforce"].message, (
        f"the error says why: {results['imports_solutions'].concepts['reinforce'].message!r}")
    assert statuses["wrong_reinforce"] == dict(reinforce="failed", baselines="passed", gae="passed"), (
        f"a wrong reinforce fails reinforce only, on its own: {statuses['wrong_reinforce']}")
    assert chained["wrong_reinforce"] == dict(reinforce="failed", baselines="passed", gae="failed"), (
        "gae passes on its own code and fails on the student's reinforce: the chain was run again")
    assert results["wrong_reinforce"].concepts["gae"].chained_message == (
        "gae passes on its own code; with your reinforce it fails (reinforce is wrong)"), (
        f"the chain's sentence: {results['wrong_reinforce'].concepts['gae'].chained_message!r}")
    assert set(statuses["tampering"].values()) == {"error"}, "a run that changed the tests grades nothing"
    assert "changed the grader's copy of the tests" in results["tampering"].notes[0], (
        f"the note says the tests were changed: {results['tampering'].notes}")
    assert statuses["background"] == dict(reinforce="passed", baselines="passed", gae="passed"), (
        f"a process left in the background does not spoil the grades: {statuses['background']}")
    assert statuses["not_there"] == dict(reinforce="error", baselines="error", gae="error"), (
        f"a missing folder is an error for every concept: {statuses['not_there']}")
    for name in ("perfect", "hanging", "syntax_error"):
        assert not list(Path(subs, name).rglob("__pycache__")), "grading leaves a submission's folder as it was"
    assert {path.name: path.read_text() for path in (repository / "tests").glob("*.py")} == tests_before, (
        "grading leaves the grader's tests as they were")
    started = [int(line) for line in pids.read_text().split()] if pids.exists() else []
    assert bool(started) != sandboxed, (
        f"the background fixture wrote its process's id outside its run only unsandboxed: {started}")
    assert not [pid for pid in started if Path(f"/proc/{pid}").exists()] and not process_tagged(tag), (
        "a process a submission started in a session of its own does not outlive its run")
    rows = list(csv.reader(io.StringIO(csv_path.read_text())))
    assert len(rows) == len(submissions) + 1 and rows[15][0] == reports.printable(submissions[14]), (
        f"one CSV row per submission, the non-UTF-8 name printable: {len(rows)} rows")
    assert "caf\\xe9" in (tmp_path / "grades.md").read_text(), "the markdown report shows the non-UTF-8 name escaped"


@pytest.mark.e2e
@pytest.mark.slow
def test_limits_are_named_when_they_fire_and_sigterm_leaves_a_report_and_no_process(tmp_path):
    repository = mini_repository(tmp_path / "repository")
    subs = tmp_path / "submissions"
    grader = grade.Grader(concepts=MINI_CONCEPTS, timeout=1.0, kill_grace=60.0, watchdog=120.0, cpu_limit=3,
                          memory_limit=2**30, repository=repository,
                          sandbox=sandbox.unavailable() is None)  # the limits fire inside bwrap too
    results = grading_batch.grade_all([submission(subs, "memory_hog", MINI_SOLUTIONS, "memory_hog"),
                               submission(subs, "spinning", MINI_SOLUTIONS, "spinning")], grader, jobs=2)
    hog, spinning = results
    assert hog.concepts["baselines"].status == "failed" and "MemoryError" in hog.concepts["baselines"].message, (
        f"the memory hog fails with MemoryError: {hog.concepts['baselines']}")
    assert hog.notes == ["baselines: the address space limit was reached (1 GiB)"], (
        f"the note names the address space limit: {hog.notes}")
    assert spinning.concepts["baselines"].status == "timeout", (
        f"the spinning concept times out: {spinning.concepts['baselines'].status!r}")
    assert "CPU time limit" in spinning.concepts["baselines"].message, (
        f"the message names the CPU time limit: {spinning.concepts['baselines'].message!r}")
    assert spinning.notes == ["baselines: the CPU time limit was reached (3 s)"], (
        f"the note names the CPU time limit: {spinning.notes}")
    assert [spinning.concepts[n].status for n in ("reinforce", "gae")] == ["passed", "passed"], (
        "the concepts beside the spinning one are graded")

    # SIGTERM in the middle of a batch: the report holds what was graded, blank for the rest; no process is left.
    script = textwrap.dedent(f"""
        import sys
        from kata.grading import batch as grading_batch
        from kata.grading import grader as grade
        from kata.concepts.manifest import concept
        concepts = [concept("reinforce"), concept("baselines"), concept("gae")]
        grader = grade.Grader(concepts=concepts, timeout=60.0, repository=sys.argv[1],
                              sandbox=grade.bwrap.unavailable() is None)
        grading_batch.run_batch(sys.argv[3:], grader, reports=dict(csv_path=sys.argv[2], concepts=concepts))
        """)
    csv_path = tmp_path / "grades.csv"
    batch = subprocess.Popen([sys.executable, "-c", script, str(repository), str(csv_path),
                              submission(subs, "perfect", MINI_SOLUTIONS),
                              submission(subs, "unkillable", MINI_SOLUTIONS, "unkillable"),
                              submission(subs, "perfect_too", MINI_SOLUTIONS)], cwd=ROOT)
    for _ in range(600):  # the first submission graded, the second one hanging
        if csv_path.exists() and len(csv_path.read_text().splitlines()) == 4:
            break
        time.sleep(0.1)
    time.sleep(2.0)
    descendants = _descendants(batch.pid)
    assert descendants, "the hanging submission's run is going"
    batch.send_signal(signal.SIGTERM)
    assert batch.wait(timeout=30) == 0, "the batch exits 0 on SIGTERM after writing its report"
    rows = list(csv.reader(io.StringIO(csv_path.read_text())))
    assert rows[1][1:5] == ["10", "10", "15", "35"], "the submission graded before SIGTERM keeps its points"
    assert rows[2][1:5] == ["", "", "", ""] and rows[3][1:5] == ["", "", "", ""], "not graded is blank, never 0"
    assert not [pid for pid in descendants if Path(f"/proc/{pid}").exists()], "no process outlives the grader"


def _descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


# ---- the kata command on the real tests --------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_kata_grade_on_copies_of_the_reference_and_the_stubs(tmp_path):
    subs = tmp_path / "submissions"
    shutil.copytree(ROOT / "solutions", subs / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "exercises", subs / "untouched", ignore=shutil.ignore_patterns("__pycache__"))
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [sys.executable, "-m", "kata", "grade", str(subs / "reference"), str(subs / "untouched"), *sandbox_flags(),
         "--concepts", "baselines", "--no-slow", "--json", str(report), "--csv", str(tmp_path / "r.csv")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    data = json.loads(report.read_text())["submissions"]
    reference, untouched = (entry["concepts"]["baselines"] for entry in data)
    assert (reference["status"], reference["points"], reference["failed"]) == ("passed", 10.0, 0), (
        f"the reference passes baselines with every point: {reference}")
    assert reference["passed"] > 5, f"more than a handful of baselines tests ran: {reference['passed']}"
    assert (untouched["status"], untouched["points"], untouched["passed"]) == ("not attempted", 0.0, 0), (
        f"the untouched stubs are not attempted, with no point: {untouched}")
    assert untouched["failed"] == reference["passed"], "the same tests ran on both"
    assert untouched["message"].startswith("not implemented yet:"), (
        f"the stub's message says not implemented yet: {untouched['message']!r}")
    assert "| submission | baselines | total |" in completed.stdout, (
        f"the markdown table is printed: {completed.stdout[-2000:]!r}")


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_kata_grade_elsewhere_than_linux_says_in_one_line_that_grading_runs_on_linux(monkeypatch, capsys, platform):
    import argparse

    from kata.grading import commands

    monkeypatch.setattr(commands.sys, "platform", platform)
    code = commands.cmd_grade(argparse.Namespace(submissions=["anything"]))
    error = capsys.readouterr().err
    assert code == 2, f"kata grade on {platform} exits 2 (a usage error), got {code}"
    assert error.count("\n") == 1 and "runs on Linux only" in error, f"one line saying why: {error!r}"
