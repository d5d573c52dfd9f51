"""The frame: the --impl switch, the mistake overlay, the manifest and the mirror between exercises/ and solutions/."""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kata import export_map
from kata.concepts import impl as implementations
from kata.concepts.manifest import CONCEPTS, FRAME_EXPORTS, MAX_POINTS, concept
from kata.lab.plan import GAE_EXPECTED, gae_example_arrays

pytestmark = pytest.mark.frame

ROOT = implementations.REPOSITORY_ROOT
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
GAE_EXAMPLE = gae_example_arrays()


def copy_of_solutions(destination: Path) -> Path:
    shutil.copytree(SOLUTIONS, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def test_named_packages_load(impl, given_stubs):
    solutions = implementations.load("solutions")
    assert solutions.package_name == "solutions", (
        f"--impl solutions loads the package named solutions: {solutions.package_name!r}")
    np.testing.assert_allclose(solutions.gae_advantages(**GAE_EXAMPLE), GAE_EXPECTED,
                               err_msg="--impl solutions runs the reference's gae_advantages")
    exercises = implementations.load("exercises")
    assert exercises.package_name == "exercises", (
        f"--impl exercises loads the package named exercises: {exercises.package_name!r}")
    expected = f"not implemented yet: gae_advantages — {concept('gae').guide_section}"
    with pytest.raises(NotImplementedError, match=expected):  # the stub as given: exercises/ may hold work
        implementations.load(str(given_stubs)).gae_advantages(**GAE_EXAMPLE)


def test_a_folder_under_any_name_loads_privately(tmp_path):
    before = {name: sys.modules.get(name) for name in ("solutions", "exercises")}
    submission = copy_of_solutions(tmp_path / "submissions" / "student-7")
    loaded = implementations.load(str(submission))
    assert loaded.package_name.startswith("kata_submission_"), "a submission gets a private package name"
    np.testing.assert_allclose(loaded.gae_advantages(**GAE_EXAMPLE), GAE_EXPECTED,
                               err_msg="a submission folder's gae_advantages runs as written")
    assert loaded.module("gae").__file__.startswith(str(submission)), "the code must come from the folder"
    assert {name: sys.modules.get(name) for name in before} == before, "installed packages must not be disturbed"
    other = implementations.load(str(copy_of_solutions(tmp_path / "another")))
    assert other.package_name != loaded.package_name, "two submissions load side by side"


def test_a_folder_without_init_loads(tmp_path):
    submission = copy_of_solutions(tmp_path / "bare")
    (submission / "__init__.py").unlink()
    loaded = implementations.load(str(submission))
    np.testing.assert_allclose(loaded.rloo_advantages(np.array([[1.0, 2.0, 6.0]])), [[-3.0, -1.5, 4.5]],
                               err_msg="a folder without __init__.py still loads as a package")


def test_a_module_that_does_not_import_leaves_the_others_alone(tmp_path):
    submission = copy_of_solutions(tmp_path / "broken")
    (submission / "gae.py").write_text("def gae_advantages(:\n")
    loaded = implementations.load(str(submission))
    with pytest.raises(implementations.ImplementationImportError, match=r"gae\.py could not be imported"):
        loaded.gae_advantages(**GAE_EXAMPLE)
    np.testing.assert_allclose(loaded.rloo_advantages(np.array([[1.0, 2.0, 6.0]])), [[-3.0, -1.5, 4.5]],
                               err_msg="a module that does not import leaves the others usable")


def test_bad_implementation_specs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        implementations.load(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="none of the concept modules"):
        implementations.load(str(tmp_path))
    with pytest.raises(ValueError, match="unknown concept"):
        implementations.load("solutions").module("gea")


def test_the_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setenv(implementations.ENVIRONMENT_VARIABLE, "solutions")
    assert implementations.default_spec() == "solutions", (
        f"the environment variable set to solutions makes it the default: {implementations.default_spec()!r}")
    assert implementations.load().package_name == "solutions", (
        "load() without a spec loads the environment variable's package")
    monkeypatch.delenv(implementations.ENVIRONMENT_VARIABLE)
    assert implementations.default_spec() == "exercises", (
        f"without the environment variable the default is exercises: {implementations.default_spec()!r}")


def test_a_mistake_is_bound_everywhere_in_a_private_copy():
    wrong = implementations.load("solutions", mistake="gae/recursion_leaks_across_cuts")
    assert wrong.package_name != "solutions", (
        f"a mistake is loaded under a private package name: {wrong.package_name!r}")
    assert not np.allclose(wrong.gae_advantages(**GAE_EXAMPLE), GAE_EXPECTED), (
        "the bound mistake changes gae_advantages' result on the worked example")
    right = implementations.load("solutions")
    np.testing.assert_allclose(right.gae_advantages(**GAE_EXAMPLE), GAE_EXPECTED,
                               err_msg="binding a mistake into one load leaves the next load of solutions as it was")
    with pytest.raises(ValueError, match="mistake must be"):
        implementations.load("solutions", mistake="gae/no_such_mistake")


@pytest.mark.e2e
def test_pytest_impl_path_runs_the_tests_on_a_folder(tmp_path):
    submission = copy_of_solutions(tmp_path / "student-7")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_baselines.py", "--impl", str(submission), "-q",
         "-k", "worked_example or sum_to_zero", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert f"implementation {submission}" in completed.stdout or "passed" in completed.stdout, (
        "the run names the implementation folder, or passes:\n" + completed.stdout[-2000:])


@pytest.mark.parametrize("form", ["two words", "one word", "environment"])
def test_pytest_with_an_implementation_that_cannot_exist_stops_at_start_up_in_one_line(tmp_path, form):
    missing = tmp_path / "no-such-submission"
    arguments = {"two words": ["--impl", str(missing)], "one word": [f"--impl={missing}"], "environment": []}[form]
    environment = {k: v for k, v in os.environ.items() if k != implementations.ENVIRONMENT_VARIABLE}
    if form == "environment":
        environment[implementations.ENVIRONMENT_VARIABLE] = str(missing)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *arguments, "-m", "gae", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment,
    )
    lines = [line for line in (completed.stdout + completed.stderr).splitlines() if line.strip()]
    given_as = "$KATA_IMPL" if form == "environment" else "--impl"
    assert completed.returncode == pytest.ExitCode.USAGE_ERROR and len(lines) == 1, lines[:20]
    assert lines[0].startswith(f"ERROR: {given_as} {missing}: no such folder"), lines[0]


def test_an_implementation_spec_is_checked_without_importing_it(tmp_path):
    problem = implementations.spec_problem
    assert problem("solutions") is None and problem("exercises") is None, "the named packages always exist"
    assert problem(str(copy_of_solutions(tmp_path / "student-7"))) is None, "a folder of concept modules is fine"
    assert "no such folder" in problem(str(tmp_path / "missing")), problem(str(tmp_path / "missing"))
    (tmp_path / "file.py").write_text("")
    assert "not a folder" in problem(str(tmp_path / "file.py")), problem(str(tmp_path / "file.py"))
    assert "none of the concept modules" in problem(str(tmp_path)), problem(str(tmp_path))
    wrong = problem("solutions", mistake="gae/no_such_mistake")
    assert wrong.startswith("--mistake gae/no_such_mistake:"), f"an unknown mistake is named: {wrong}"
    assert problem("solutions", mistake="gae/lambda_not_applied") is None, "a catalogued mistake is fine"


@pytest.mark.e2e
def test_readme_form_pytest_impl_folder_outside_the_repository(tmp_path):
    """README's `pytest --impl ~/submissions/student-7`: no test path, the folder outside the repository."""
    from importlib.metadata import entry_points

    submission = copy_of_solutions(tmp_path / "submissions" / "student-7")
    installed = any(e.value == "kata.testing.options" for e in entry_points(group="pytest11"))
    # Installed (pip install -e .), pytest loads the options' plugin itself; a checkout that is not installed
    # names it with -p, which pytest loads at the same moment.
    early = [] if installed else ["-p", "kata.testing.options"]
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", *early, "--impl", str(submission), "-m", "baselines and not slow",
         "-k", "worked_example", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    output = completed.stdout[-2000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, output
    assert f"kata: implementation {submission}" in completed.stdout, "the folder is the implementation " + output
    assert f"rootdir: {ROOT}" in completed.stdout, "the repository stays pytest's rootdir " + output


def test_only_a_folder_given_apart_from_impl_is_joined_to_it(tmp_path):
    from kata.testing.options import joined_impl_arguments

    assert joined_impl_arguments(["--impl", str(tmp_path), "-q"]) == [f"--impl={tmp_path}", "-q"], (
        f"--impl FOLDER is joined into --impl=FOLDER: {joined_impl_arguments(['--impl', str(tmp_path), '-q'])}")
    assert joined_impl_arguments(["--impl", "solutions", "-n", "auto"]) is None, "a package name is no path"
    assert joined_impl_arguments([f"--impl={tmp_path}"]) is None, "an --impl already joined is left as it is"
    assert joined_impl_arguments(["--", "--impl", str(tmp_path)]) is None, (
        "arguments after -- are not pytest's options: left as they are")


# ---- the manifest and the mirror -------------------------------------------------------------------------------


def test_the_course_data_numbers_and_totals_are_derived():
    assert [c.number for c in CONCEPTS] == list(range(1, len(CONCEPTS) + 1)), (
        f"a concept's number is its place in kata/concepts/course.toml: {[c.number for c in CONCEPTS]}")
    assert MAX_POINTS == sum(c.points for c in CONCEPTS) and all(c.points > 0 for c in CONCEPTS), (
        f"the point total is the sum of the concepts' points, each > 0: {MAX_POINTS}")
    assert {c.name for c in CONCEPTS} == {p.stem for p in SOLUTIONS.glob("*.py") if p.stem != "__init__"}, (
        "every concept has its module in solutions/, and every module there is a concept")
    for c in CONCEPTS:
        assert c.guide_section == f"GUIDE.md §{c.number}", f"{c.name}: its GUIDE section is its number"
        assert len(c.hints) >= 3, f"{c.name}: hints go from a nudge to nearly the answer"
        assert c.mistakes, f"{c.name}: list the mistakes its tests catch"
        assert (ROOT / "tests" / f"test_{c.name}.py").is_file(), f"{c.name}: its tests are tests/test_{c.name}.py"
    concept_exports = [name for c in CONCEPTS for name in c.exports]
    assert len(set(concept_exports)) == len(concept_exports), "a public name belongs to one concept"
    assert not set(concept_exports) & set(FRAME_EXPORTS), "a public name is a concept's or the frame's, not both"
    assert export_map() == {**{name: f".{c.name}" for c in CONCEPTS for name in c.exports}, **FRAME_EXPORTS}, (
        "the packages export what the manifest lists, each name from its concept's module or the frame's")
    for name, module in FRAME_EXPORTS.items():
        assert module.startswith("kata.") and callable(getattr(importlib.import_module(module), name, None)), (
            f"course.toml's frame_exports: {module} defines {name}")


def test_the_course_data_says_what_is_malformed(tmp_path):
    from kata.concepts.manifest import load_course

    broken = tmp_path / "course.toml"
    broken.write_text("[[concepts]]\nname = 'gae'\ntitle = 'GAE'\nexports = []\nhints = []\n")
    with pytest.raises(ValueError, match="concept 1 \\(gae\\) is malformed"):
        load_course(broken)


def test_the_guide_has_every_section_and_anchor():
    guide = (ROOT / "GUIDE.md").read_text()
    for concept in CONCEPTS:
        assert f"\n## {concept.guide_heading}\n" in guide, (
            f"GUIDE.md's section of {concept.name} is headed '## {concept.guide_heading}' (its number and title)")


@pytest.mark.parametrize("concept", CONCEPTS, ids=lambda c: c.name)
def test_exercises_and_solutions_mirror_each_other(concept):
    assert (EXERCISES / f"{concept.name}.py").exists() == (SOLUTIONS / f"{concept.name}.py").exists(), (
        f"{concept.name}.py exists in both exercises/ and solutions/, or in neither")
    if not (SOLUTIONS / f"{concept.name}.py").exists():
        pytest.skip(f"{concept.name} is not written yet")
    exercises = implementations.load("exercises").module(concept.name)
    solutions = implementations.load("solutions").module(concept.name)
    for name in concept.exports:
        assert hasattr(solutions, name), f"solutions/{concept.name}.py does not define {name}"
        assert hasattr(exercises, name), f"exercises/{concept.name}.py does not define {name}"
        assert inspect.signature(getattr(exercises, name)) == inspect.signature(getattr(solutions, name)), (
            f"{name}: the stub's signature must be the reference's"
        )
        assert inspect.getdoc(getattr(exercises, name)), f"exercises: {name} needs its docstring (the contract)"


def test_every_file_is_mirrored():
    names = {p.name for p in SOLUTIONS.glob("*.py")}
    assert names == {p.name for p in EXERCISES.glob("*.py")}, "exercises/ and solutions/ mirror file for file"


@pytest.mark.e2e
def test_pytest_started_outside_the_repository_runs_the_kata_tests_from_it(tmp_path):
    submissions = tmp_path / "submissions"
    copy_of_solutions(submissions / "student-7")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--impl", "student-7", "-m", "baselines and not slow", "-k", "worked_example",
         "-p", "no:cacheprovider", "--kata-no-progress"], cwd=submissions, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0 and "1 passed" in completed.stdout, (
        f"`cd submissions && pytest --impl student-7` runs the kata's tests on the folder: "
        f"{completed.stdout[-1500:]}{completed.stderr[-500:]}")
    assert f"running its tests from {ROOT}" in completed.stderr, (
        f"the run says in one line where its tests come from: {completed.stderr[-500:]}")


@pytest.mark.e2e
def test_a_misspelt_marker_is_an_error_that_names_the_markers():
    completed = subprocess.run([sys.executable, "-m", "pytest", "-m", "gea and not slow", "-q", "--co",
                                "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 4 and "no test is marked gea" in output and "gae" in output, (
        f"`pytest -m gea` stops in one line naming the known markers, instead of deselecting everything: {output}")


@pytest.mark.e2e
def test_the_end_to_end_tests_run_only_when_asked_and_never_carry_a_concept():
    def collected(*arguments: str) -> set[str]:
        completed = subprocess.run([sys.executable, "-m", "pytest", "--impl", "solutions", "--co", "-q",
                                    "-p", "no:cacheprovider", *arguments], cwd=ROOT, capture_output=True, text=True,
                                   timeout=300)
        assert completed.returncode == 0, f"collection of {arguments} failed: {completed.stdout[-1500:]}"
        return {line for line in completed.stdout.splitlines() if "::" in line}

    every, default, only = collected("--e2e"), collected(), collected("-m", "e2e")
    assert only and default.isdisjoint(only) and default | only == every, (
        f"README's test command leaves out exactly the {len(only)} e2e tests, and --e2e adds them back: "
        f"{len(default)} + {len(only)} of {len(every)}")
    assert all(node.startswith("tests/frame/") for node in only), (
        f"only the frame's tests are end to end; a concept's would go ungraded: {sorted(only)[:3]}")
