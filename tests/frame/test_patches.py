"""A catalogue entry is a patch of its reference, applied by content: a hunk is found by its context and removed
lines wherever they now stand, exactly once, or the patch fails naming itself and showing the hunk."""

from __future__ import annotations

import difflib

import numpy as np
import pytest

from kata.concepts import impl as implementations
from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.patches import PatchError, apply

pytestmark = pytest.mark.frame

TEXT = "".join("\n" if i == 9 else f"line {i}\n" for i in range(1, 21))  # line 9 is blank
GAE = (ROOT / "solutions" / "gae.py").read_text(encoding="utf-8")
LAB_EXAMPLE = dict(rewards=np.array([1.0, 100.0]), values=np.array([2.0, 0.0]), next_values=np.array([10.0, 0.0]),
                   terminated=np.array([False, True]), trace_cuts=np.array([True, True]), gamma=0.9, gae_lambda=1.0)


def diff(before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), "a", "b"))


def test_a_hunk_is_found_by_its_content_not_its_line_numbers():
    patch = diff(TEXT, TEXT.replace("line 10\n", "line ten\n"))
    moved = "header\n" * 7 + TEXT
    assert apply(moved, patch) == moved.replace("line 10\n", "line ten\n"), (
        "a hunk applies where its lines now stand, seven lines below where its header says")
    assert apply(TEXT.replace("\n", "\r\n"), patch.replace("\n", "\r\n")) == TEXT.replace("line 10\n", "line ten\n"), (
        "a patch and a text checked out with Windows line ends apply as they do with Unix ones")
    edited = patch.replace("\n \n", "\n\n")
    assert edited != patch and apply(TEXT, edited) == apply(TEXT, patch), (
        "a blank context line whose space an editor took off still counts")


@pytest.mark.parametrize("where", ["nowhere", "twice"])
def test_a_hunk_found_nowhere_or_twice_fails_naming_the_patch_and_showing_the_hunk(where):
    patch = diff(TEXT, TEXT.replace("line 10\n", "line ten\n"))
    text = TEXT.replace("line 8\n", "line eight\n") if where == "nowhere" else TEXT + TEXT[TEXT.index("line 7"):]
    with pytest.raises(PatchError) as failure:
        apply(text, patch, "mistakes/gae/example.diff", "solutions/gae.py")
    message = str(failure.value)
    found = "found nowhere" if where == "nowhere" else "found 2 times"
    assert message.startswith("mistakes/gae/example.diff: hunk 1 of 1 does not apply to solutions/gae.py") and (
        found in message), f"the failure names the patch, the hunk, its target and how often it was found: {message}"
    assert "-line 10\n+line ten" in message, f"the failure shows the hunk: {message}"


def test_a_patch_without_a_hunk_or_with_a_second_file_is_refused():
    with pytest.raises(PatchError, match="no hunk"):
        apply(TEXT, "--- a\n+++ b\n", "empty.diff")
    two_files = diff(TEXT, TEXT.replace("line 3\n", "line three\n")) + "diff --git a/other b/other\n"
    with pytest.raises(PatchError, match="not a line of a hunk"):
        apply(TEXT, two_files, "two.diff")


def test_a_mistake_replaces_its_concept_module_in_a_private_copy_that_the_loops_import():
    wrong = implementations.load("solutions", mistake="gae/truncation_as_termination")
    assert wrong.module("ppo_cartpole").gae_advantages is wrong.module("gae").gae_advantages, (
        "the copy's PPO module imports the patched gae module: the loop trains with the mistake")
    assert not np.allclose(wrong.gae_advantages(**LAB_EXAMPLE), [8.0, 100.0]), "the patched module is the one run"
    assert implementations.load("solutions").module("gae").__file__.endswith("gae.py"), "the reference is untouched"


def test_a_stale_patch_stops_pytest_at_start_up_naming_the_entry_and_showing_the_hunk(tmp_path, monkeypatch):
    (tmp_path / "gae").mkdir()
    earlier = GAE.replace("decay = gamma * gae_lambda", "decay = gae_lambda * gamma")  # since refactored
    stale = diff(earlier, earlier.replace("decay = gae_lambda * gamma", "decay = gamma"))
    (tmp_path / "gae" / "stale.diff").write_text(stale, encoding="utf-8")
    monkeypatch.setitem(implementations.CATALOGUES, "mistake", tmp_path)
    problem = implementations.spec_problem("solutions", mistake="gae/stale")
    assert problem is not None and problem.startswith(f"--mistake gae/stale: {tmp_path.name}/gae/stale.diff: hunk 1 "
                                                      "of 1 does not apply"), f"the entry is named: {problem}"
    assert "-    decay = gae_lambda * gamma\n+    decay = gamma" in problem, f"the hunk is shown: {problem}"
    with pytest.raises(PatchError, match="does not apply"):
        implementations.load("solutions", mistake="gae/stale")
