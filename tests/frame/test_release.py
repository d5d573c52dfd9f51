"""`kata release`: the student edition holds what a class needs and not one line of an answer; its workflow has a
graded step per concept worth its points. (The edition at work, installed as its README says, is tests/release/.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from kata.catalogue import stubs
from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.manifest import CONCEPTS
from kata.grading import release

pytestmark = pytest.mark.frame


def answer_lines(repository: Path = ROOT) -> set[str]:
    """Every line of every ``# BEGIN SOLUTION`` block of solutions/, stripped, that the frame does not also hold
    (a bare ``)`` or ``else:`` is in kata/ anyway, and says nothing of an answer)."""
    inside, outside = set(), set()
    for path in sorted((repository / "solutions").glob("*.py")):
        for block, line in stubs.answer_marked_lines(path.read_text()):
            (inside if block else outside).add(line.strip())
    for path in [*(repository / "kata").rglob("*.py"), *(repository / "tests").glob("*.py")]:
        outside.update(line.strip() for line in path.read_text().splitlines())
    for stub in stubs.plan(CONCEPTS, repository / "solutions", repository / "exercises"):  # the stubs as written
        outside.update(line.strip() for line in stub.text.splitlines())
    return {line for line in inside if line} - outside


def lines_found(texts: dict[str, str], answers: set[str]) -> list[str]:
    return sorted(f"{name}: {line.strip()}" for name, text in texts.items() for line in text.splitlines()
                  if line.strip() in answers)


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "policy-gradients-student"
    return release.release(out)


def test_the_edition_holds_no_line_of_an_answer(edition):
    out, zipped = edition
    answers = answer_lines()
    assert len(answers) > 150, f"the search needs the answers' lines to look for: {len(answers)} found"
    texts = {path.relative_to(out).as_posix(): path.read_text(errors="replace")
             for path in out.rglob("*") if path.is_file()}
    leaked = lines_found(texts, answers)
    assert not leaked, f"the student edition holds lines of the reference's answers: {leaked[:10]}"
    with zipfile.ZipFile(zipped) as archive:  # the same search finds them where they belong: the autograder's copy
        graded = {name: archive.read(name).decode(errors="replace") for name in archive.namelist()
                  if name.startswith("solutions/")}
    assert len(lines_found(graded, answers)) > 150, "the search finds the answers in the autograder's solutions/"


def test_the_edition_is_a_repository_a_class_can_be_given(edition):
    out, zipped = edition
    names = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}
    for needed in ("README.md", "GUIDE.md", "conftest.py", "pyproject.toml", "requirements.txt", ".gitignore",
                   ".github/workflows/classroom.yml", "exercises/__init__.py", "tests/assertions.py",
                   "kata/concepts/course.toml", "kata/cli.py", "notebooks/lab.py"):
        assert needed in names, f"the edition needs {needed}"
    given = {stub.concept.name: stub.text for stub in stubs.plan()}
    for c in CONCEPTS:
        assert {f"exercises/{c.name}.py", f"tests/test_{c.name}.py", f"kata/student/pristine/{c.name}.py"} <= names, (
            f"{c.name}: its stub, its tests and the stub as handed out are in the edition")
        assert (out / "exercises" / f"{c.name}.py").read_text() == given[c.name], (
            f"exercises/{c.name}.py is the stub solutions/ gives, whatever the checkout's exercises/ holds")
    forbidden = [name for name in names if name.split("/")[0] in ("solutions", "mistakes", "variants", "benchmarks")
                 or name.startswith(("kata/grading/", "kata/catalogue/", "tests/frame/", "tests/parity/"))]
    assert not forbidden, f"the edition holds no answers, no catalogue and no grading code: {forbidden[:10]}"
    project = tomllib.loads((out / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["kata*", "exercises*"], (
        "the edition's package is kata and exercises")
    assert "importlinter" not in project["tool"] and not {"dev", "parity"} & set(project["project"].get(
        "optional-dependencies", {})), "no instructor's extras, no contracts naming packages the edition lacks"
    readme = (out / "README.md").read_text()
    setup = "python3 -m venv .venv && .venv/bin/python -m pip install -r requirements.txt"
    for command in (f"{setup} && .venv/bin/kata lab --impl exercises", f"{setup} && .venv/bin/python -m pytest"):
        assert command in readme, f"the student README gives its two commands: {command}"
    assert "download.pytorch.org/whl/cpu" in readme, "the student README says how to get the CPU build of torch"
    assert readme.index("download.pytorch.org/whl/cpu") < readme.index(setup), (
        "the student README says how to get torch's CPU build before its first command installs torch")
    for line in ("python -m venv .venv", ".venv\\Scripts\\python -m pip install -r requirements.txt",
                 ".venv\\Scripts\\python -m pytest"):
        assert f"\n{line}\n" in readme, f"the student README gives Windows its own lines: {line}"
    assert zipped.is_file() and zipped.parent == out.parent, "the Gradescope autograder is written beside the edition"
    with pytest.raises(FileExistsError, match="--force"):
        release.release(out)


def test_a_folder_holding_a_students_work_is_never_offered_to_force(tmp_path):
    out = tmp_path / "pg-kata"
    (out / "exercises").mkdir(parents=True)
    (out / "exercises" / "gae.py").write_text((ROOT / "solutions" / "gae.py").read_text())  # written code
    with pytest.raises(FileExistsError) as refused:
        release.release(out)
    assert "gae.py" in str(refused.value) and "--force" not in str(refused.value), (
        f"an edition a student works in must not be offered to --force, which replaces it: {refused.value}")


INSTRUCTORS_TOP_LEVEL = {path.name for path in ROOT.iterdir()
                         if not path.name.startswith(".") and not path.name.endswith(".egg-info")}
PATH_LIKE = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w.-]*/)+[\w.-]*)")
FILE_NAME = re.compile(r"(?<![\w./-])([\w-]+\.(?:md|py|toml|ipynb|yml|txt))\b")


def paths_missing(out: Path) -> list[str]:
    """What the edition's markdown files point to that the edition lacks: a link's target, a path under one of the
    instructor's repository's top-level folders or files (solutions/, docs/libraries.md, tests/parity, ...), or a
    file named bare (CLAIMS.md) that is nowhere in the edition."""
    names = {path.name for path in out.rglob("*") if path.is_file()}
    missing = []
    for markdown in sorted(out.rglob("*.md")):
        if ".venv" in markdown.parts:
            continue
        text = markdown.read_text()
        where = markdown.relative_to(out).as_posix()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            file = target.partition("#")[0]
            if file and not target.startswith(("http://", "https://", "mailto:")):
                if not (markdown.parent / file).exists():
                    missing.append(f"{where}: link {target}")
        for path in PATH_LIKE.findall(text):
            path = path.rstrip(".,;:")
            if path.split("/")[0] in INSTRUCTORS_TOP_LEVEL and not (out / path).exists():
                missing.append(f"{where}: {path}")
        missing += [f"{where}: {name}" for name in FILE_NAME.findall(text) if name not in names]
    return missing


def test_the_editions_pages_speak_only_of_what_it_ships(edition):
    out, _ = edition
    assert (out / "GUIDE.md").read_text() == release.student_guide((ROOT / "GUIDE.md").read_text()), (
        "the edition's GUIDE.md is the instructor's, its instructor-only passages left out")
    guide = (out / "GUIDE.md").read_text()
    assert "<!-- instructor -->" not in guide and "<!-- /instructor -->" not in guide, (
        "every instructor-only passage is left out of the edition's guide, markers included")
    for c in CONCEPTS:
        assert f"\n## {c.guide_heading}\n" in guide, f"the edition's guide keeps the section of {c.name}"
    missing = paths_missing(out)
    assert not missing, f"the edition's markdown points to paths it does not hold: {missing}"


def test_the_path_check_finds_what_the_instructors_guide_points_to(tmp_path):
    (tmp_path / "GUIDE.md").write_text((ROOT / "GUIDE.md").read_text())
    missing = paths_missing(tmp_path)
    assert any("docs/libraries.md" in m for m in missing) and any("mistakes/" in m for m in missing), (
        f"the check sees the instructor-only references of the full guide: {missing}")


def test_the_workflow_grades_each_concept_for_its_points(edition):
    out, _ = edition
    workflow = (out / ".github" / "workflows" / "classroom.yml").read_text()
    scores = re.findall(r"^\s+max-score: (\S+)$", workflow, re.MULTILINE)
    commands = re.findall(r"^\s+command: (.+)$", workflow, re.MULTILINE)
    assert [float(s) for s in scores] == [c.points for c in CONCEPTS], (
        f"one graded step per concept, in order, worth its points: {scores}")
    assert commands == [release.grading_command(c) for c in CONCEPTS], (
        f"each step runs its concept's tests on exercises/: {commands}")
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in workflow, (
        "the workflow installs the CPU build of torch")
    assert f"runners: {','.join(c.name for c in CONCEPTS)}" in workflow, "the reporter reads every graded step"


def test_the_workflow_passes_actionlint(edition):
    out, _ = edition
    actionlint = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if actionlint is None:
        pytest.skip("actionlint is not installed (the dev extra installs it)")
    completed = subprocess.run([actionlint, "-no-color", str(out / ".github" / "workflows" / "classroom.yml")],
                               capture_output=True, text=True)
    assert completed.returncode == 0, f"actionlint finds problems in the workflow: {completed.stdout}"
