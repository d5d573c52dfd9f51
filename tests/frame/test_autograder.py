"""The Gradescope autograder, end to end: `kata autograder` builds the zip; unpacked into a root laid out as
Gradescope lays it out (source/, submission/, results/), its run_autograder grades a perfect, a stub, a broken and a
misconceived submission with the python3 on PATH, and results.json holds Gradescope's documented fields
(https://gradescope-autograders.readthedocs.io/en/latest/specs/). Three concepts, no slow tests, one upload per test,
a failed concept's diagnosis included."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kata.grading import autograder
from kata import cli
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import concept

pytestmark = [pytest.mark.frame, pytest.mark.e2e]

CONCEPTS = ("reinforce", "baselines", "gae")
TEST_FIELDS = {"name", "score", "max_score", "output", "visibility"}
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


def gradescope_root(tmp_path: Path, zip_path: Path, name: str) -> Path:
    root = tmp_path / name
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):  # zipfile does not restore modes; Gradescope's unzip does
        mode = zipfile.ZipFile(zip_path).getinfo(script).external_attr >> 16
        assert mode & stat.S_IXUSR, f"{script} is executable in the zip"
        (root / "source" / script).chmod(mode)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


def run_autograder(root: Path) -> dict:
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root),
                       PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("KATA_IMPL", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"):
        environment.pop(name, None)
    completed = subprocess.run([str(root / "run_autograder")], cwd=root, env=environment, capture_output=True,
                               text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text())
    assert isinstance(data["score"], (int, float)) and isinstance(data["execution_time"], int), (
        f"a numeric score and an int execution_time: {data.get('score')!r}, {data.get('execution_time')!r}")
    assert [t["name"].split(".")[1].split(":")[0].strip() for t in data["tests"]] == list(CONCEPTS), (
        f"one Gradescope test per concept, in order {CONCEPTS}: {[t['name'] for t in data['tests']]}")
    for test in data["tests"]:
        assert TEST_FIELDS <= set(test), f"Gradescope's fields: {test}"
        assert test["visibility"] in VISIBILITIES and 0 <= test["score"] <= test["max_score"], (
            f"a known visibility, 0 <= score <= max: {test['visibility']!r}, {test['score']}/{test['max_score']}")
        assert "kata check" in test["output"], "the hint command is shown"
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"])), (
        f"the total is the sum of the tests' scores: {data['score']} vs {[t['score'] for t in data['tests']]}")
    return data


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory) -> Path:
    """The zip of three concepts, no slow tests, built once: each test below grades its uploads with it (one test
    per kind of upload keeps each within the per-test limit on a busy 2-core machine)."""
    path = tmp_path_factory.mktemp("zip") / "autograder.zip"
    assert cli.main(["autograder", "--out", str(path), "--no-slow", "--timeout", "20"]) == 0, (
        "`kata autograder --out ZIP` exits 0")
    autograder.build(path, timeout=20, include_slow=False, concepts=CONCEPTS)
    return path


@pytest.mark.slow
def test_the_autograder_zip_holds_what_grading_needs_and_grades_a_perfect_submission(tmp_path, zip_path):
    names = zipfile.ZipFile(zip_path).namelist()
    assert {"setup.sh", "run_autograder", "requirements-autograder.txt", "solutions/gae.py", "tests/test_gae.py",
            "conftest.py"} <= set(names), (
        f"the zip carries the setup, the runner, the pins, the solutions and the tests; it holds {sorted(names)}")
    assert "mistakes/gae/truncation_as_termination.diff" in names, "the catalogue a failed concept is diagnosed by"
    assert not [n for n in names if n.startswith(("variants/", "exercises/")) or "fixtures" in n], (
        "no exercises, variants or test fixtures in the zip: grading needs none of them")
    assert "torch==2.13.0" in zipfile.ZipFile(zip_path).read("requirements-autograder.txt").decode(), (
        "the zip pins requirements.txt's torch, whose CPU build setup.sh installs")

    perfect = gradescope_root(tmp_path, zip_path, "perfect")
    for name in CONCEPTS:  # flat files, as a student drags them in
        shutil.copy2(REPOSITORY_ROOT / "solutions" / f"{name}.py", perfect / "submission")
    data = run_autograder(perfect)
    assert data["score"] == sum(concept(name).points for name in CONCEPTS), (
        f"a perfect submission earns every point: {data['score']}")


@pytest.mark.slow
def test_the_autograder_grades_a_stub(tmp_path, zip_path):
    stub = gradescope_root(tmp_path, zip_path, "stub")
    shutil.copytree(REPOSITORY_ROOT / "exercises", stub / "submission" / "exercises",
                    ignore=shutil.ignore_patterns("__pycache__"))
    data = run_autograder(stub)
    assert data["score"] == 0, f"an untouched stub earns nothing: {data['score']}"
    assert all("not implemented yet" in t["output"] for t in data["tests"]), (
        "each stub concept's output says it is not implemented yet")
    assert all(t["output"].startswith("not attempted: ") for t in data["tests"]), (
        f"each stub concept is not attempted, told apart from a failure: {[t['output'] for t in data['tests']]}")


@pytest.mark.slow
def test_the_autograder_grades_a_broken_submission_concept_by_concept(tmp_path, zip_path):
    broken = gradescope_root(tmp_path, zip_path, "broken")
    shutil.copy2(REPOSITORY_ROOT / "solutions" / "reinforce.py", broken / "submission")
    (broken / "submission" / "gae.py").write_text("def gae_advantages(:\n")
    data = run_autograder(broken)
    reinforce, baselines, gae = data["tests"]
    assert reinforce["score"] == reinforce["max_score"], (
        f"a correct reinforce.py keeps its points beside broken files: {reinforce['score']}/{reinforce['max_score']}")
    assert baselines["score"] == 0 and "baselines.py is missing" in baselines["output"], (
        f"a missing baselines.py scores 0 and is named: {baselines['score']}, {baselines['output'][-500:]!r}")
    assert gae["score"] == 0 and "SyntaxError" in gae["output"], (
        f"a gae.py that does not parse scores 0 and says SyntaxError: {gae['score']}, {gae['output'][-500:]!r}")


@pytest.mark.slow
def test_the_autograder_names_the_misconception_of_a_failed_concept(tmp_path, zip_path):
    misconceived = gradescope_root(tmp_path, zip_path, "misconceived")
    for name in CONCEPTS:
        shutil.copy2(REPOSITORY_ROOT / "solutions" / f"{name}.py", misconceived / "submission")
    shutil.copy2(REPOSITORY_ROOT / "tests" / "frame" / "fixtures" / "submissions" / "truncation_as_termination"
                 / "gae.py",
                 misconceived / "submission")
    reinforce, baselines, gae = run_autograder(misconceived)["tests"]
    assert reinforce["score"] == reinforce["max_score"] and baselines["score"] == baselines["max_score"], (
        "the correct concepts keep their points")
    assert gae["score"] < gae["max_score"], f"a GAE that never bootstraps past a cut fails: {gae['score']}"
    assert "gae/truncation_as_termination" in gae["output"], (
        f"a failed concept's output names the misconception it behaves like; it reads: {gae['output']!r}")
