"""The kata command (list, hint, status, check, watch, help texts) and what `kata status` reads: the parsed source
of exercises/ and the results the pytest plugin kata.testing.progress records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kata import cli
from kata.student import commands as student_commands
from kata.testing import progress
from kata.concepts import sources
from kata.student import status
from kata.testing import record as progress_record
from kata.student import watch
from kata.concepts.impl import ImplementationImportError
from kata.concepts.manifest import CONCEPTS, MAX_POINTS, concept
from kata.concepts.stub import not_implemented

pytestmark = pytest.mark.frame

ROOT = status.REPOSITORY_ROOT

# ---- list and hint -----------------------------------------------------------------------------------------------


def test_list_shows_the_eight_concepts_in_order(capsys):
    assert cli.main(["list"]) == 0, "`kata list` exits 0"
    lines = capsys.readouterr().out.splitlines()
    rows = lines[1:1 + len(CONCEPTS)]
    for row, c in zip(rows, CONCEPTS):
        assert row.split()[:3] == [str(c.number), c.name, f"{c.points:g}"], f"a row reads number, name, points: {row!r}"
        assert c.guide_section in row and c.title in row, (
            f"the row of {c.name} names its GUIDE.md section and title: {row!r}")
    assert f"{MAX_POINTS:g} points" in lines[-1], f"the last line gives the total points: {lines[-1]!r}"


def test_hint_goes_one_level_at_a_time(capsys):
    gae = concept("gae")
    assert cli.main(["hint", "gae"]) == 0, "`kata hint gae` exits 0"
    out = capsys.readouterr().out
    assert f"hint 1 of {len(gae.hints)}" in out and gae.hints[0].split()[0] in out, (
        f"the first hint says 'hint 1 of N' and shows hint 1: {out!r}")
    assert "kata hint gae --level 2" in out, "the student is told how to get the next hint"
    assert cli.main(["hint", "gae", "--level", str(len(gae.hints))]) == 0, (
        "`kata hint gae --level N` (the last) exits 0")
    out = capsys.readouterr().out
    assert "last hint" in out and "--level" not in out.split("\n\n")[-1], (
        f"the last hint says so and offers no further --level: {out!r}")


@pytest.mark.parametrize("level", [0, 99])
def test_hint_level_out_of_range_says_how_many_there_are(capsys, level):
    assert cli.main(["hint", "baselines", "--level", str(level)]) == 2, f"--level {level} is out of range: exit 2"
    assert f"has {len(concept('baselines').hints)} hints" in capsys.readouterr().err, (
        "the error says how many hints there are")


@pytest.mark.parametrize(
    "command", [["hint", "gea"], ["check", "gea"], ["watch", "gea"], ["grade", "--concepts", "gea"]])
def test_an_unknown_concept_lists_the_valid_names(capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(command)
    assert exit_info.value.code == 2, f"an unknown concept is a usage error (exit 2): {exit_info.value.code}"
    err = capsys.readouterr().err
    assert "unknown concept 'gea'" in err and all(c.name in err for c in CONCEPTS), (
        f"the error names the unknown concept and lists the valid ones: {err!r}")


@pytest.mark.parametrize("command", ["list", "hint", "status", "check", "watch", "grade", "lab"])
def test_every_subcommand_has_complete_help(capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0, f"`kata {command} --help` exits 0: {exit_info.value.code}"
    assert len(capsys.readouterr().out.split()) > 20, f"`kata {command} --help` says more than a line"


def test_grade_help_documents_points_statuses_and_the_risk(capsys):
    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "partial credit" in text and "points * passed / (passed + failed)" in text, (
        f"the help gives the partial credit formula: {text!r}")
    for word in ("passed", "failed", "error", "timeout", "--json", "--csv", "--gradescope", "--jobs"):
        assert word in text, f"the help documents {word}"
    assert "container" in text, "the help says untrusted code belongs in a container"
    assert "bubblewrap" in text and "--no-sandbox" in text, "the help says what the sandbox is and how to turn it off"


def test_gradescope_takes_one_submission(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["grade", "a", "b", "--gradescope", "results.json"])
    assert exit_info.value.code == 2, (
        f"--gradescope with two submissions is a usage error (exit 2): {exit_info.value.code}")
    assert "exactly one SUBMISSION" in capsys.readouterr().err, (
        "the error says --gradescope takes exactly one SUBMISSION")


def test_grade_skips_what_is_not_a_folder_and_says_what_it_grades_by_default(tmp_path, monkeypatch, capsys):
    from kata.grading import batch as grade_batch

    graded = []
    monkeypatch.setattr(grade_batch, "refuse_unsandboxed", lambda grader: None)  # the same where bwrap is missing
    monkeypatch.setattr(grade_batch, "grade_all", lambda submissions, grader, **_: graded.extend(submissions) or [])
    (tmp_path / "student-1").mkdir()
    (tmp_path / "grades.csv").write_text("submission\n")
    assert cli.main(["grade", str(tmp_path / "student-1"), str(tmp_path / "grades.csv")]) == 0, (
        "`kata grade FOLDER FILE` exits 0")
    assert graded == [str(tmp_path / "student-1")], f"only the folder is graded: {graded}"
    assert f"skipped {tmp_path / 'grades.csv'}: not a folder" in capsys.readouterr().err, (
        "a file given as a submission is skipped, and said so")
    monkeypatch.chdir(ROOT)
    graded.clear()
    assert cli.main(["grade"]) == 0, "`kata grade` without submissions exits 0"
    assert graded == ["./exercises"], f"`kata grade` alone grades ./exercises: {graded}"
    assert "grading your own ./exercises" in capsys.readouterr().err, (
        "`kata grade` alone says it grades your own ./exercises")


def test_grade_takes_a_folder_of_submissions_for_its_submissions(tmp_path, monkeypatch, capsys):
    from kata.grading import batch as grade_batch

    graded = []
    monkeypatch.setattr(grade_batch, "refuse_unsandboxed", lambda grader: None)  # the same where bwrap is missing
    monkeypatch.setattr(grade_batch, "grade_all", lambda submissions, grader, **_: graded.extend(submissions) or [])
    submissions = tmp_path / "submissions"
    for name in ("alice", "bob"):
        (submissions / name).mkdir(parents=True)
        (submissions / name / "gae.py").write_text("")
    (submissions / "carol").mkdir()  # handed in nothing: still a row (an error saying the folder is empty)
    assert cli.main(["grade", str(submissions), str(tmp_path / "missing")]) == 0, "`kata grade FOLDER` exits 0"
    assert graded == [str(submissions / "alice"), str(submissions / "bob"), str(submissions / "carol")], (
        f"a folder of submissions is graded folder by folder, an empty one included: {graded}")
    err = capsys.readouterr().err
    assert "holds no concept module but 3 folder(s)" in err, f"kata grade says what it understood: {err}"
    assert f"skipped {tmp_path / 'missing'}: no such folder" in err, f"a missing path is no such folder: {err}"


def test_the_instructor_commands_cli_names_are_those_their_packages_add():
    import argparse
    import importlib

    for module, named in cli.INSTRUCTOR_TOOLS.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module).add_parsers(parser.add_subparsers())
        added = tuple(parser._subparsers._group_actions[0].choices)
        assert added == named, (
            f"kata.cli names {module}'s commands {named}, so that a student edition can say where each belongs; "
            f"the package adds {added}")


def test_delegated_commands_reach_their_modules(monkeypatch):
    import kata.catalogue.mistakes

    seen = []
    monkeypatch.setattr(kata.catalogue.mistakes, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["mistakes", "gae", "--jobs", "1"]) == 0, "`kata mistakes` returns its module's exit status"
    assert seen == [["gae", "--jobs", "1"]], f"`kata mistakes` hands its arguments on unchanged: {seen}"


def option(command: list[str], flag: str) -> str:
    """The value after the last ``flag`` (``python -m pytest ... -m MARKER``)."""
    return command[max(i for i, part in enumerate(command) if part == flag) + 1]


def test_lab_hands_its_options_to_the_lab(monkeypatch):
    import kata.lab.run

    seen = []
    monkeypatch.setattr(kata.lab.run, "main", lambda **options: seen.append(options) or 0)
    assert cli.main(["lab"]) == 0, "`kata lab` exits 0"
    assert cli.main(["lab", "--profile", "full", "--impl", "exercises", "--out", "x", "--jobs", "1"]) == 0, (
        "`kata lab` with every option exits 0")
    assert seen == [dict(profile="smoke", impl="solutions", out=None, jobs=None),
                    dict(profile="full", impl="exercises", out="x", jobs=1)], (
        f"the lab gets smoke/solutions by default and the options given: {seen}")


def test_check_leaves_slow_tests_out_unless_asked():
    quick = student_commands.pytest_command(concept("gae"), slow=False)
    assert option(quick, "-m") == "gae and not slow", f"kata check leaves slow tests out: -m {option(quick, '-m')!r}"
    assert option(quick, "--impl") == "exercises", "kata check always checks the student's exercises/"
    assert float(option(quick, "--kata-test-timeout")) > 0, "an endless loop under Hypothesis must not hang check"
    assert option(student_commands.pytest_command(concept("gae"), slow=True), "-m") == "gae", (
        "kata check --slow selects every test of the concept")


def test_status_imports_neither_torch_nor_pytest(tmp_path):
    code = ("import sys; from kata.cli import main; main(['status']); "
            "print('HEAVY', sorted(m for m in ('torch', 'numpy', 'pytest') if m in sys.modules))")
    environment = dict(os.environ, KATA_PROGRESS=str(tmp_path / "progress.json"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                         timeout=60, check=True).stdout
    assert "HEAVY []" in out, "kata status must answer at once: it may not import torch, numpy or pytest"
    assert all(c.name in out for c in CONCEPTS), f"kata status lists every concept: {out!r}"
    assert "Next:" in out or "Every concept is done" in out, f"kata status ends with the next step: {out!r}"


# ---- the state of a concept --------------------------------------------------------------------------------------

STUB = '''
from kata.concepts.stub import not_implemented
from .helpers import clip


def gae_advantages(rewards):
    """Docstring."""
    x = list(rewards)
    raise not_implemented("gae_advantages")


def frame_loop(config):
    return config
'''
REFERENCE = '''
def gae_advantages(rewards):
    return rewards


def frame_loop(config):
    return config
'''


@pytest.fixture
def layout(tmp_path):
    """exercises/, solutions/ and tests/ folders with a stubbed gae, and an empty progress file path."""
    folders = {name: tmp_path / name for name in ("exercises", "solutions", "tests")}
    for folder in folders.values():
        folder.mkdir()
    (folders["exercises"] / "gae.py").write_text(STUB)
    (folders["exercises"] / "helpers.py").write_text("def clip(x):\n    return x\n")
    (folders["solutions"] / "gae.py").write_text(REFERENCE)
    (folders["tests"] / "test_gae.py").write_text("def test_gae(): pass\n")
    return folders | {"progress": tmp_path / "progress.json"}


def state_of(layout) -> status.ConceptState:
    return status.concept_state(
        concept("gae"), exercises_dir=layout["exercises"], tests_dir=layout["tests"],
        reference_dir=layout["solutions"], records=progress_record.load_progress(layout["progress"]))


def record(layout, outcomes: dict[str, str | None], slow: frozenset[str] = frozenset()) -> None:
    stamp = progress_record.fingerprint("gae", layout["exercises"], layout["tests"])
    tests = {node: progress_record.TestRecord(outcome, node in slow, f"AssertionError: {node} is wrong")
             for node, outcome in outcomes.items()}
    progress_record.record_results({"gae": progress_record.ConceptRecord(stamp, tests)}, layout["progress"])


def write_solution(layout) -> None:
    (layout["exercises"] / "gae.py").write_text(STUB.replace('raise not_implemented("gae_advantages")', "return x"))


def test_source_analysis_tells_stubs_from_written_and_ready_made_code(layout):
    source = sources.analyse_source(layout["exercises"] / "gae.py", layout["solutions"] / "gae.py")
    assert source.stubs == ("gae_advantages",) and source.written == (), (
        f"the stub is a stub and nothing is written: {source.stubs}, {source.written}")
    assert source.not_started, "a loop identical to the reference's is ready-made, not the student's work"
    write_solution(layout)
    source = sources.analyse_source(layout["exercises"] / "gae.py", layout["solutions"] / "gae.py")
    assert (source.stubs, source.written, source.not_started) == ((), ("gae_advantages",), False), (
        f"written code is told from stubs: {(source.stubs, source.written, source.not_started)}")


def test_states_from_not_started_to_done(layout):
    assert state_of(layout).label == "not started", f"an untouched stub is not started: {state_of(layout).label!r}"
    write_solution(layout)
    assert state_of(layout).label == "not checked yet", (
        f"written code without results is not checked yet: {state_of(layout).label!r}")
    record(layout, {"t1": "passed", "t2": "failed", "t3": "failed"})
    state = state_of(layout)
    assert (state.label, state.done, state.message) == ("failing 2 of 3", False, "AssertionError: t2 is wrong"), (
        f"one test passing of three, with the first failure's message: {(state.label, state.done, state.message)}")
    record(layout, {"t2": "passed", "t3": "passed"})  # the same code: merged test by test
    assert (state_of(layout).label, state_of(layout).done) == ("done", True), (
        f"results of the same code are merged test by test: {state_of(layout).label!r}")
    (layout["exercises"] / "gae.py").write_text(STUB.replace('raise not_implemented("gae_advantages")', "return []"))
    assert state_of(layout).label == "changed since last check", (
        f"an edit after the check makes the results stale: {state_of(layout).label!r}")


def test_a_change_in_an_imported_sibling_or_the_tests_makes_results_stale(layout):
    write_solution(layout)
    record(layout, {"t1": "passed"})
    assert state_of(layout).done, f"every test passing is done: {state_of(layout).label!r}"
    (layout["exercises"] / "helpers.py").write_text("def clip(x):\n    return -x\n")
    assert state_of(layout).label == "changed since last check", "gae imports helpers: its results depend on it"
    record(layout, {"t1": "passed"})
    (layout["tests"] / "test_gae.py").write_text("def test_gae(): assert False\n")
    assert state_of(layout).label == "changed since last check", (
        f"a change in the tests makes the results stale: {state_of(layout).label!r}")


def test_slow_tests_are_not_needed_for_done_but_count_when_they_fail(layout):
    write_solution(layout)
    record(layout, {"quick": "passed", "training": None}, slow=frozenset({"training"}))
    assert state_of(layout).done, "a concept is done once every test not marked slow passed"
    record(layout, {"training": "failed"}, slow=frozenset({"training"}))
    assert state_of(layout).label == "failing 1 of 2", f"a slow test failing counts: {state_of(layout).label!r}"


def test_a_run_of_single_tests_never_starts_a_record(layout):
    write_solution(layout)
    stamp = progress_record.fingerprint("gae", layout["exercises"], layout["tests"])
    one = progress_record.ConceptRecord(stamp, {"t1": progress_record.TestRecord("passed")})
    progress_record.record_results({"gae": one}, layout["progress"], partial=True)
    assert state_of(layout).label == "not checked yet", "one passing test, run alone, is not a done concept"
    record(layout, {"t1": "failed", "t2": "passed"})
    progress_record.record_results({"gae": one}, layout["progress"], partial=True)
    assert state_of(layout).done, "a single test run again adds to the record of the same code"


def test_tests_not_run_yet_keep_a_concept_from_done(layout):
    write_solution(layout)
    record(layout, {"t1": "passed", "t2": None})
    assert (state_of(layout).label, state_of(layout).done) == ("passing 1, 1 not run yet", False), (
        f"a test not run yet keeps the concept from done: {state_of(layout).label!r}")


def test_missing_and_unparsable_modules(layout):
    (layout["exercises"] / "gae.py").write_text("def gae_advantages(:\n")
    assert state_of(layout).label.startswith("syntax error (line 1"), (
        f"a module that does not parse says syntax error and its line: {state_of(layout).label!r}")
    (layout["exercises"] / "gae.py").unlink()
    assert state_of(layout).label.startswith("missing"), f"a missing module says missing: {state_of(layout).label!r}"


def test_an_unreadable_progress_file_is_no_results(layout):
    layout["progress"].write_text("{not json")
    assert progress_record.load_progress(layout["progress"]) == {}, "an unreadable progress file reads as no results"
    assert state_of(layout).label == "not started", (
        f"with no results, an untouched stub is not started: {state_of(layout).label!r}")


def test_next_concept_is_the_first_not_done():
    states = [status.ConceptState(c, "done" if c.number < 3 else "not started", done=c.number < 3)
              for c in CONCEPTS]
    assert status.next_concept(states).name == "gae", (
        f"the next concept is the first not done: {status.next_concept(states).name!r}")
    assert status.next_concept([status.ConceptState(c, "done", True) for c in CONCEPTS]) is None, (
        "when every concept is done there is no next one")


# ---- the plugin: classification and the per-test deadline --------------------------------------------------------


def test_failures_are_classified_for_the_grader():
    assert progress.classify(progress.TestTimeout("timed out: 3 s"))[0] == "timeout", (
        "a TestTimeout is classified as timeout")
    group = ExceptionGroup("two", [ValueError("x"), ImplementationImportError("gae.py could not be imported")])
    assert progress.classify(group) == ("import_error", "gae.py could not be imported"), (
        f"an import error inside an exception group is classified with its message: {progress.classify(group)}")
    assert progress.classify(not_implemented("gae_advantages"))[0] == "not_implemented", (
        "a stub's NotImplementedError is classified as not_implemented")
    kind, message = progress.classify(AssertionError("the recursion leaks across trace_cuts\nassert 1 == 2"))
    assert (kind, message) == ("failed", "AssertionError: the recursion leaks across trace_cuts"), (
        f"an assertion is failed, with the first line of its message: {(kind, message)}")


def test_a_numpy_testing_failure_is_summarised_by_its_message_and_the_values_compared():
    # numpy.testing's text opens with a blank line and a header: the one line would otherwise be "AssertionError:".
    with pytest.raises(AssertionError) as caught:
        np.testing.assert_array_equal([[0, 1], [1, 1]], [[0, 1], [1, 0]], err_msg="padding is never in the mask")
    kind, message = progress.classify(caught.value)
    assert (kind, message) == ("failed", "AssertionError: padding is never in the mask (ACTUAL: [[0, 1], [1, 1]]; "
                                         "DESIRED: [[0, 1], [1, 0]])"), (
        f"the one line must be the test's message, then the arrays compared; got {message!r}")
    with pytest.raises(AssertionError) as caught:
        np.testing.assert_allclose([1.75, 1.5, 1.0], [1.5, 1.0, 1.0])
    message = progress.classify(caught.value)[1]
    assert message == "AssertionError: ACTUAL: [1.75, 1.5, 1.]; DESIRED: [1.5, 1., 1.]", (
        f"without a message, the one line is the values compared; got {message!r}")


@pytest.mark.parametrize("no_sigalrm", ["", "1"], ids=["sigalrm", "timer-thread"])
def test_the_deadline_stops_hanging_code_even_under_hypothesis(monkeypatch, no_sigalrm):
    monkeypatch.setenv("KATA_NO_SIGALRM", no_sigalrm)  # "1": as on Windows, where there is no SIGALRM
    recorder = progress.Recorder.__new__(progress.Recorder)
    recorder.test_timeout = 0.3

    @settings(max_examples=5, database=None, deadline=None)
    @given(st.integers())
    def spins_forever(n):
        while True:
            pass

    with pytest.raises(progress.TestTimeout):
        with recorder._deadline():
            spins_forever()


# ---- watch -------------------------------------------------------------------------------------------------------


def test_watch_reruns_after_a_change_and_stops_on_ctrl_c(tmp_path):
    (tmp_path / "gae.py").write_text("x = 1\n")
    runs, sleeps, said = [], [], []

    def fake_sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            (tmp_path / "gae.py").write_text("x = 22\n")  # an edit, seen at the next poll
        if len(sleeps) > 10:
            raise KeyboardInterrupt

    assert watch.watch(lambda: runs.append(1), tmp_path, interval=0.1, sleep=fake_sleep, say=said.append) == 0, (
        "Ctrl-C stops watch with exit 0")
    assert len(runs) == 2, "one run at the start, one after the edit, none while nothing changes"
    assert said[-1].strip() == "stopped watching", f"watch says it stopped: {said[-1]!r}"


def test_a_concept_is_named_by_the_number_kata_list_shows_as_by_its_name():
    from kata.concepts.arguments import concept_argument
    from kata.concepts.manifest import CONCEPTS

    for c in CONCEPTS:
        assert concept_argument(str(c.number)) == concept_argument(c.name) == c, (
            f"`kata check {c.number}` names {c.name}, as `kata list` numbers it")
