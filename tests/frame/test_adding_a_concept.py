"""Adding a concept: a throwaway one, added to a copy of the repository the way CONTRIBUTING.md's checklist says,
touches at most six files besides its own mistake and variant patches, and `kata list`, the stub generator,
`kata check`, the catalogue's runs and the diagnosis take it up from the course data alone."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.manifest import CONCEPTS, MAX_POINTS

pytestmark = pytest.mark.frame

MOST_FILES_TOUCHED = 6
COPIED = ("kata", "exercises", "solutions", "tests", "mistakes", "variants", "conftest.py", "pyproject.toml",
          "GUIDE.md", "CONTRIBUTING.md")
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".kata", "frame", "parity")

NAME = "reward_scaling"
COURSE_ENTRY = f'''
[[concepts]]
name = '{NAME}'
title = 'Reward scaling: a throwaway concept'
points = 5
exports = ['scale_rewards']
hints = [
    'Multiply.',
    'Every reward by the same positive scale.',
    'Return like_inputs(rewards_t * scale, rewards).',
]

[[concepts.mistakes]]
name = 'scale_added'
hint = 2
misunderstanding = 'the scale is added to the rewards instead of multiplying them'

[[concepts.variants]]
name = 'scale_divided_by_inverse'
summary = 'the rewards divided by the inverse of the scale'
reason = 'r / (1 / s) is r * s up to the last bits, and the test compares to a relative tolerance'
'''
SOLUTION = '''"""The reference for reward scaling."""

from kata.arrays import as_float_tensor, check_positive, like_inputs
# BEGIN STUB
# from kata.concepts.stub import not_implemented
# END STUB


def scale_rewards(rewards, scale):
    """``rewards`` times ``scale`` (> 0), in the kind of array given."""
    rewards_t = as_float_tensor(rewards, "rewards")
    scale = check_positive("scale", scale)
    # BEGIN SOLUTION
    return like_inputs(rewards_t * scale, rewards)
    # END SOLUTION
    # BEGIN STUB
    # raise not_implemented("scale_rewards")
    # END STUB
'''
TESTS = '''"""The reward_scaling tests: a throwaway concept."""

import numpy as np
import pytest
from hypothesis import given

from kata.testing.strategies.reward_scaling import scaled_rewards

pytestmark = pytest.mark.reward_scaling


@given(case=scaled_rewards())
def test_every_reward_is_multiplied_by_the_scale(impl, case):
    rewards, scale = case
    np.testing.assert_allclose(impl.scale_rewards(rewards, scale), rewards * scale, rtol=1e-12,
                               err_msg="each reward times the scale")
'''
STRATEGIES = '''"""reward_scaling: the strategies its tests draw from, and its probes: a throwaway concept."""

from __future__ import annotations

from hypothesis import strategies as st

from kata.testing.drawing import drawn
from kata.testing.strategies import Probes, float_arrays, floats


@st.composite
def scaled_rewards(draw):
    """Rewards [N] in [-10, 10] and a scale in [0.1, 10]."""
    return draw(float_arrays((draw(st.integers(1, 5)),), -10.0, 10.0)), draw(floats(0.1, 10.0))


PROBES = (
    Probes("scale_rewards", drawn(scaled_rewards, "scaled_rewards", build=lambda c: dict(rewards=c[0], scale=c[1]))),
)
UNPROBED: dict[str, str] = {}
'''
GUIDE_SECTION = '''
## 9. Reward scaling: a throwaway concept

Multiplying every reward by one positive scale multiplies every advantage by it.
'''


def patch_of_the_solution(new: str) -> str:
    """A catalogue entry: the unified diff of solutions/reward_scaling.py with its one multiplication replaced."""
    changed = SOLUTION.replace("rewards_t * scale", new)
    return "".join(difflib.unified_diff(SOLUTION.splitlines(keepends=True), changed.splitlines(keepends=True),
                                        f"a/solutions/{NAME}.py", f"b/solutions/{NAME}.py"))


MISTAKE = patch_of_the_solution("rewards_t + scale")
VARIANT = patch_of_the_solution("rewards_t / (1.0 / scale)")


def snapshot(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in root.rglob("*") if path.is_file() and "__pycache__" not in path.parts}


def kata(copy: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The copy's own `kata` (python -m puts the copy first on the path, before the installed checkout)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_", "PYTEST_", "PYTHONPATH"))}
    environment["KATA_PROGRESS"] = str(copy / ".kata" / "progress.json")
    return subprocess.run([sys.executable, "-m", "kata", *arguments], cwd=copy, capture_output=True, text=True,
                          env=environment, timeout=300)


@pytest.mark.e2e
def test_a_new_concept_touches_at_most_six_files_and_every_tool_takes_it_up(tmp_path):
    copy = tmp_path / "repository"
    copy.mkdir()
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=LEFT_OUT)
        else:
            shutil.copy2(source, copy / name)
    before = snapshot(copy)

    # The checklist of CONTRIBUTING.md, "Adding a concept", step by step.
    with open(copy / "kata" / "concepts" / "course.toml", "a") as course:
        course.write(COURSE_ENTRY)
    (copy / "solutions" / f"{NAME}.py").write_text(SOLUTION)
    (copy / "tests" / f"test_{NAME}.py").write_text(TESTS)
    (copy / "kata" / "testing" / "strategies" / f"{NAME}.py").write_text(STRATEGIES)
    with open(copy / "GUIDE.md", "a") as guide:
        guide.write(GUIDE_SECTION)
    for kind, text, entry in (("mistakes", MISTAKE, "scale_added"), ("variants", VARIANT, "scale_divided_by_inverse")):
        (copy / kind / NAME).mkdir()
        (copy / kind / NAME / f"{entry}.diff").write_text(text)

    stubs = kata(copy, "stubs")
    assert stubs.returncode == 0 and (copy / "exercises" / f"{NAME}.py").is_file(), (
        f"the stub generator writes exercises/{NAME}.py from the solution: {stubs.stdout}{stubs.stderr}")
    stub = (copy / "exercises" / f"{NAME}.py").read_text()
    assert stub.startswith(f'"""Exercise {len(CONCEPTS) + 1} — Reward scaling: a throwaway concept (GUIDE.md '
                           f'§{len(CONCEPTS) + 1}).'), f"the stub's first line comes from the course data: {stub[:120]}"

    listed = kata(copy, "list")
    assert listed.returncode == 0 and re.search(rf"^\s*{len(CONCEPTS) + 1}\s+{NAME}\s+5\s+GUIDE.md §"
                                                  rf"{len(CONCEPTS) + 1}\b", listed.stdout, re.MULTILINE), (
        f"`kata list` shows the new concept, numbered after the others: {listed.stdout}")
    assert f"{len(CONCEPTS) + 1} concepts, {MAX_POINTS + 5:g} points" in listed.stdout, (
        f"the count and the point total are derived: {listed.stdout}")

    on_the_stub = kata(copy, "check", NAME)
    assert on_the_stub.returncode == 1 and f"not implemented yet: scale_rewards — GUIDE.md §{len(CONCEPTS) + 1}" in (
        on_the_stub.stdout), f"`kata check` runs the new concept's test, which fails on its stub: {on_the_stub.stdout}"
    shutil.copy2(copy / "solutions" / f"{NAME}.py", copy / "exercises" / f"{NAME}.py")
    on_the_reference = kata(copy, "check", NAME)
    assert on_the_reference.returncode == 0 and "passes every test" in on_the_reference.stdout, (
        f"`kata check` passes the new concept on the reference: {on_the_reference.stdout}")

    mistakes = kata(copy, "mistakes", NAME, "--jobs", "1")
    assert mistakes.returncode == 0 and f"caught  {NAME}/scale_added" in mistakes.stdout, (
        f"`kata mistakes` applies the new concept's patch and its test catches it: {mistakes.stdout}{mistakes.stderr}")
    variants = kata(copy, "variants", NAME, "--jobs", "1")
    assert variants.returncode == 0 and f"accepted  {NAME}/scale_divided_by_inverse" in variants.stdout, (
        f"`kata variants` applies the new concept's variant and its test accepts it: {variants.stdout}")

    diagnosed = kata(copy, "diagnose", NAME, "--mistake", f"{NAME}/scale_added", "--json")
    named = [entry["mistake"] for entry in json.loads(diagnosed.stdout or "{}").get("diagnoses", [])]
    assert diagnosed.returncode == 0 and named == [f"{NAME}/scale_added"], (
        f"`kata diagnose` runs the new concept's probes and names its mistake: {diagnosed.stdout}{diagnosed.stderr}")

    after = snapshot(copy)
    touched = sorted(name for name in after.keys() | before.keys() if before.get(name) != after.get(name)
                     and not name.startswith((f"mistakes/{NAME}/", f"variants/{NAME}/", ".kata/", ".hypothesis/")))
    touched = [name for name in touched if name != f"exercises/{NAME}.py"] + [f"exercises/{NAME}.py"]
    assert len(touched) <= MOST_FILES_TOUCHED, (
        f"adding a concept touched {len(touched)} files besides its own mistake and variant patches: {touched}")
    checklist = (ROOT / "CONTRIBUTING.md").read_text().partition("## Adding a concept")[2].partition("\n## ")[0]
    unnamed = [name for name in touched if Path(name).name.replace(NAME, "<concept>") not in checklist
               and name.replace(NAME, "<concept>") not in checklist]
    assert not unnamed, f"CONTRIBUTING.md's 'Adding a concept' checklist names every file touched; not: {unnamed}"
