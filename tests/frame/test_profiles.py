"""The student's Hypothesis profile runs every example of grading's profile first: what grading fails, `kata check`
fails on every run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT

pytestmark = pytest.mark.frame

PROBE = Path(__file__).parent / "fixtures" / "profiles" / "probe.py"


def _run(profile: str, mode: str, record: Path, seed: int | None = None) -> subprocess.CompletedProcess:
    arguments = [sys.executable, "-m", "pytest", str(PROBE), "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                 "--impl", "solutions", "-x"]
    if seed is not None:
        arguments.append(f"--hypothesis-seed={seed}")
    environment = {**os.environ, "KATA_HYPOTHESIS_PROFILE": profile, "KATA_PROBE_MODE": mode,
                   "KATA_PROBE_FILE": str(record)}
    return subprocess.run(arguments, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.e2e
def test_the_student_profile_fails_whatever_grading_fails(tmp_path):
    # What grading's derandomized profile draws for the probe, less the small numbers any profile draws often: a
    # test that fails only there passes a purely random profile almost surely (25 of 2**62 values).
    drawn = tmp_path / "ci.txt"
    recording = _run("ci", "record", drawn)
    assert recording.returncode == 0, f"recording grading's examples failed:\n{recording.stdout}{recording.stderr}"
    rare = [line for line in drawn.read_text().split() if int(line) > 2**20]
    assert rare, f"grading's profile drew no large integer: {drawn.read_text()!r}"
    (tmp_path / "rare.txt").write_text("\n".join(rare))
    graded = _run("ci", "check", tmp_path / "rare.txt")
    assert graded.returncode == 1, f"grading's profile must fail on its own examples:\n{graded.stdout}"
    for seed in (1, 2, 3):  # three student runs, each with another random stream
        student = _run("dev", "check", tmp_path / "rare.txt", seed=seed)
        assert student.returncode == 1, (
            f"the student's profile (seed {seed}) passed a test that grading fails: it must run grading's examples "
            f"first\n{student.stdout}")
        assert "is one of the recorded examples" in student.stdout, f"not the probe's failure:\n{student.stdout}"


@pytest.mark.e2e
def test_the_student_sees_the_first_failure_at_its_smallest_and_every_failure_fails():
    arguments = [sys.executable, "-m", "pytest", str(PROBE.with_name("shrinking.py")), "-q", "-p", "no:cacheprovider",
                 "-p", "no:xdist", "--impl", "solutions"]
    for profile in ("dev", "ci"):
        run = subprocess.run(arguments, cwd=ROOT, env={**os.environ, "KATA_HYPOTHESIS_PROFILE": profile},
                             capture_output=True, text=True, timeout=120)
        assert "2 failed" in run.stdout, f"both tests must fail under {profile}:\n{run.stdout}"
        assert "first: 1000 is 1000 or more" in run.stdout, (
            f"under {profile}, the first failure must show its smallest counterexample, 1000:\n{run.stdout}")
