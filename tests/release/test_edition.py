"""The student edition at work: written by `kata release`, set up exactly as its README says, and used as a student
uses it. Slow (a fresh environment is installed), so it is not part of the default run: CI runs it as a step of its
own (`pytest tests/release --kata-test-timeout=0 --timeout=1800`: the set-up takes longer than the limit of one
test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.manifest import CONCEPTS
from kata.grading import release

pytestmark = pytest.mark.frame

SETUP = "python3 -m venv .venv && .venv/bin/python -m pip install -q -r requirements.txt"
INSTRUCTOR_COMMANDS = ("diagnose", "mistakes", "variants", "selfcheck", "stubs", "grade", "autograder", "release")


def run(out: Path, command: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_", "PYTEST_", "PYTHON", "VIRTUAL"))}
    environment["MPLBACKEND"] = "Agg"
    return subprocess.run(["bash", "-c", command], cwd=out, capture_output=True, text=True, env=environment,
                          timeout=timeout)


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out, _ = release.release(tmp_path_factory.mktemp("edition") / "policy-gradients")
    subprocess.run(["git", "init", "-q"], cwd=out, check=True)
    readme = (out / "README.md").read_text()
    assert f"{SETUP.replace(' -q', '')} && .venv/bin/python -m pytest" in readme, "the README's test command"
    installed = run(out, SETUP)
    assert installed.returncode == 0, f"the README's set-up works in the edition: {installed.stderr[-2000:]}"
    return out


def test_on_the_stubs_every_concept_test_fails_with_the_readable_line(edition):
    report = edition / "report.json"
    completed = run(edition, f".venv/bin/python -m pytest -q -p no:cacheprovider --kata-report={report}")
    assert completed.returncode == 1, f"pytest fails on the stubs: {completed.stdout[-1500:]}"
    summary = json.loads(report.read_text())["concepts"]
    assert set(summary) == {c.name for c in CONCEPTS}, f"every concept's tests ran: {sorted(summary)}"
    for name, counts in summary.items():
        assert counts["collected"] and counts["failed"] == counts["not_implemented"] == counts["collected"], (
            f"{name}: every test fails on its stub with 'not implemented yet': {counts}")


def test_the_students_commands_work_and_the_instructors_say_where_they_belong(edition):
    for command, expected in (("list", f"{len(CONCEPTS)} concepts"), ("hint gae", "hint 1 of"),
                              ("status", "not started"), ("check gae", "not implemented yet: gae_advantages")):
        completed = run(edition, f".venv/bin/kata {command}")
        assert expected in completed.stdout and completed.returncode in (0, 1), (
            f"`kata {command}` works in the edition: {completed.stdout[-1500:]}{completed.stderr[-500:]}")
    status = run(edition, ".venv/bin/kata status").stdout
    assert status.count("not started") == len(CONCEPTS), f"every untouched stub is 'not started': {status}"
    for command in INSTRUCTOR_COMMANDS:
        completed = run(edition, f".venv/bin/kata {command}")
        lines = completed.stderr.strip().splitlines()
        assert completed.returncode == 2 and len(lines) == 1 and "instructor's repository" in lines[0], (
            f"`kata {command}` says in one line that it belongs to the instructor's repository: {completed.stderr}")


def test_kata_watch_checks_on_start_and_stops_on_ctrl_c(edition):
    process = subprocess.Popen([".venv/bin/kata", "watch", "baselines"], cwd=edition, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output, started = [], time.monotonic()
    try:
        for line in process.stdout:
            output.append(line)
            if "watching" in line or time.monotonic() - started > 300:
                break
    finally:
        os.killpg(process.pid, signal.SIGINT)
        output.append(process.communicate(timeout=30)[0])
    text = "".join(output)
    assert "not implemented yet: no_baseline_advantages" in text and "stopped watching" in text, (
        f"kata watch runs the check, then waits, and Ctrl-C stops it: {text[-2000:]}")


def test_with_the_reference_every_graded_step_passes_and_the_lab_runs(edition, tmp_path):
    copy = tmp_path / "with-the-reference"
    shutil.copytree(edition, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for c in CONCEPTS:
        shutil.copy2(ROOT / "solutions" / f"{c.name}.py", copy / "exercises" / f"{c.name}.py")
    workflow = (copy / ".github" / "workflows" / "classroom.yml").read_text()
    commands = re.findall(r"^\s+command: (.+)$", workflow, re.MULTILINE)
    assert len(commands) == len(CONCEPTS), f"one graded command per concept: {commands}"
    for command in commands:  # as written, with the environment's python first on the path
        completed = run(copy, f"PATH=$PWD/.venv/bin:$PATH {command}")
        assert completed.returncode == 0, (
            f"with the reference in exercises/, the graded step passes: {command}\n{completed.stdout[-2000:]}")
    lab = run(copy, ".venv/bin/kata lab --impl exercises --out lab-output/reference")
    assert lab.returncode == 0 and (copy / "lab-output" / "reference" / "report.md").is_file(), (
        f"kata lab --impl exercises runs the lab on the student's code: {lab.stdout[-2000:]}{lab.stderr[-1000:]}")
    on_the_stubs = run(edition, ".venv/bin/kata lab --impl exercises --out lab-output/stubs")
    assert on_the_stubs.returncode == 0 and "skipped:" in on_the_stubs.stdout, (
        f"on the stubs, the lab skips what is not written yet: {on_the_stubs.stdout[-1500:]}")
