"""`kata watch`: the same verdict as `kata check`, from a warm process, on every save.

The check a watch runs in a child of its warm forkserver (or, without fork, in a fresh pytest) must print exactly what
`kata check` prints: the same tests, messages, Hypothesis profile, state line and diagnosis, on an untouched stub, on
wrong code and on right code."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.patches import apply
from kata.student import watch

pytestmark = pytest.mark.frame

COPIED = ("kata", "exercises", "solutions", "tests", "mistakes", "conftest.py", "pyproject.toml")
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".kata", "frame", "parity")
THROUGH_THE_WATCH = """
import shutil, sys
from kata.concepts.manifest import concept
from kata.student import commands, watch
runner = watch.choose_runner(commands.diagnosis_available(), commands.pytest_in_a_subprocess)  # once, as kata watch
for source in sys.argv[2:]:  # one save after another, each checked by the same runner
    shutil.copy(source, "exercises/" + sys.argv[1] + ".py")
    code = commands.run_check(concept(sys.argv[1]), run_pytest=runner)
    print(f"=== exit {code}", flush=True)
"""


def _copy(destination: Path) -> Path:
    destination.mkdir()
    for name in COPIED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, destination / name, ignore=LEFT_OUT)
        else:
            shutil.copy2(ROOT / name, destination / name)
    return destination


def _run(copy: Path, *command: str, **variables: str) -> tuple[int, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KATA_", "PYTEST_", "PYTHONPATH"))}
    environment.update(KATA_PROGRESS=str(copy / ".kata" / "progress.json"), KATA_HYPOTHESIS_PROFILE="ci", **variables)
    completed = subprocess.run([sys.executable, *command], cwd=copy, capture_output=True, text=True,
                               env=environment, timeout=300)
    output = re.sub(r" in \d+\.\d+s", " in <time>", completed.stdout + completed.stderr)
    return completed.returncode, output


@pytest.mark.e2e
@pytest.mark.parametrize("platform", [{}, {"KATA_NO_FORK": "1"}], ids=["warm", "without-fork"])
def test_the_watch_gives_the_verdict_of_kata_check_on_a_stub_a_wrong_and_a_right_file(tmp_path, platform):
    copy = _copy(tmp_path / "repository")
    module = copy / "exercises" / "baselines.py"
    reference = (ROOT / "solutions" / "baselines.py").read_text()
    wrong = apply(reference, (ROOT / "mistakes" / "baselines" / "rloo_includes_self.diff").read_text())
    files = {"stub": module.read_text(), "wrong": wrong, "right": reference}
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    checked = {}
    for name, text in files.items():
        module.write_text(text)
        code, output = _run(copy, "-m", "kata", "check", "baselines")
        checked[name] = f"{output}=== exit {code}\n"
    code, watched = _run(copy, "-c", THROUGH_THE_WATCH, "baselines", *(str(tmp_path / f"{n}.py") for n in files),
                         **platform)
    assert code == 0, f"the warm process ran every check: {watched[-2000:]}"
    if platform:  # the one line that says why each check starts a fresh pytest, then kata check's output
        line = "kata watch: this platform cannot fork a warm process; each check starts a fresh pytest\n"
        assert watched.startswith(line), f"without fork, watch says so in one line first: {watched[:300]!r}"
        watched = watched.removeprefix(line)
    assert watched == "".join(checked.values()), (
        "on a stub, a wrong and a right file, the watch's checks must print what kata check prints:\n--- kata "
        f"check:\n{''.join(checked.values())}\n--- through the watch:\n{watched}")
    for name, expected in (("stub", "not implemented yet"), ("wrong", "behaves like the catalogued mistake"),
                           ("right", "passes every test")):
        assert expected in checked[name], f"on the {name} file the verdict says '{expected}':\n{checked[name]}"
    assert checked["stub"].startswith("kata check: 2. baselines"), (
        f"kata check's output starts with the concept's number and name: {checked['stub'][:200]!r}")
    recorded = json.loads((copy / ".kata" / "progress.json").read_text())["concepts"]
    assert list(recorded) == ["baselines"], f"only the concept that ran is recorded: {list(recorded)}"
    outcomes = [test["outcome"] for test in recorded["baselines"]["tests"].values() if not test["slow"]]
    assert outcomes and set(outcomes) == {"passed"}, (
        f"every quick test of the concept ran on the right file and was recorded as passed: {outcomes}")


def test_without_fork_watch_says_so_once_and_checks_in_a_fresh_pytest(monkeypatch):
    said: list[str] = []

    def one_shot(arguments: list[str]) -> int:
        return 0

    monkeypatch.setenv("KATA_NO_FORK", "1")
    assert watch.choose_runner(False, one_shot, said.append) is one_shot, "without fork, each check is one_shot's"
    assert said == ["kata watch: this platform cannot fork a warm process; each check starts a fresh pytest"], (
        f"watch says once why each check starts a fresh pytest: {said}")
    monkeypatch.delenv("KATA_NO_FORK")
    if not hasattr(os, "fork"):
        return  # Windows: the one-shot path is the platform's own
    said.clear()
    assert watch.choose_runner(False, one_shot, said.append) is not one_shot and not said, (
        "where there is fork, checks run in a warm child and nothing is said")


def test_file_events_see_a_save_made_while_a_check_runs(tmp_path):
    (tmp_path / "gae.py").write_text("x = 1\n")
    changes = watch.file_events(tmp_path)
    if changes is None:
        pytest.skip("watchfiles is not installed: kata watch polls instead")
    time.sleep(0.3)  # the listener thread is up
    (tmp_path / "gae.py").write_text("x = 2\n")  # saved before anyone asks for the next change
    (tmp_path / "notes.txt").write_text("not Python")
    seen: queue.Queue[bool] = queue.Queue()
    threading.Thread(target=lambda: seen.put(next(changes) is None), daemon=True).start()
    assert seen.get(timeout=5), "a save made while no one was waiting is reported at the next ask"
