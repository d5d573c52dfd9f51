"""What the kata command prints around a check: the slow tests' note, the line under a failure, and a quiet end when
the reader of its output goes away (`kata status | head`)."""

from __future__ import annotations

import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kata import cli
from kata.concepts.manifest import concept
from kata.concepts.stub import not_implemented
from kata.student import commands

pytestmark = pytest.mark.frame

STUB_LINE = str(not_implemented("gae_advantages"))
IMPORT_LINE = ("exercises/gae.py could not be imported (NameError near line 3: name 'x' is not defined); fix it to "
               "run the gae tests")
PROPERTY_LINE = "AssertionError: advantages before a trace cut changed when values after it changed"


def test_the_slow_note_says_what_is_true_of_the_concept():
    assert commands.has_slow_tests(concept("ppo_cartpole")) and not commands.has_slow_tests(concept("gae")), (
        "ppo_cartpole's tests train an agent (marked slow); gae's do not")
    assert commands.slow_note(concept("ppo_cartpole"), slow=True) == "slow integration tests included", (
        "kata check --slow on a concept with slow tests says they are included")
    assert "left out" in commands.slow_note(concept("ppo_cartpole"), slow=False), (
        "kata check on a concept with slow tests says they are left out")
    for slow in (False, True):
        note = commands.slow_note(concept("gae"), slow)
        assert "included" not in note and "left out" not in note and "no slow tests" in note, (
            f"a concept with no slow tests must say so, not that they were included or left out: {note!r}")


@pytest.mark.parametrize("label, failures, diagnosed, wanted, unwanted", [
    ("not started", [STUB_LINE] * 3, False, "still raises not_implemented", "misunderstanding"),
    ("syntax error (line 65: invalid syntax)", [], False, "until exercises/gae.py imports", "misunderstanding"),
    ("failing 11 of 11", [IMPORT_LINE] * 11, False, "until exercises/gae.py imports", "misunderstanding"),
    ("failing 2 of 11", [PROPERTY_LINE, STUB_LINE], False, "states what failed", "mistake"),
    ("failing 2 of 11", [PROPERTY_LINE], True, "names the mistake your code behaves like", "raises not_impl"),
], ids=["stubs", "syntax error", "import error", "a property", "a property and a diagnosis"])
def test_the_line_under_a_failure_claims_only_what_the_failures_imply(label, failures, diagnosed, wanted, unwanted):
    line = commands.closing_line(concept("gae"), label, failures, diagnosed)
    assert line.startswith(f"gae: {label}.") and wanted in line and unwanted not in line, (
        f"under {label!r} with {failures[:1]} the line must say {wanted!r} and not {unwanted!r}: {line!r}")


def test_the_command_from_a_shell_takes_sigpipes_default(monkeypatch):
    asked = []
    recorder = SimpleNamespace(SIGPIPE=signal.SIGPIPE, SIG_DFL=signal.SIG_DFL,
                               signal=lambda number, action: asked.append((number, action)))
    monkeypatch.setattr(cli, "signal", recorder)  # the process's own handler stays as pytest set it
    monkeypatch.setattr(sys, "argv", ["kata", "list"])
    assert cli.main() == 0, "`kata list` exits 0"
    assert asked == [(signal.SIGPIPE, signal.SIG_DFL)], (
        f"the kata command must end quietly when its reader closes the pipe, as ls | head does: {asked}")
    asked.clear()
    assert cli.main(["list"]) == 0 and not asked, "main() called with arguments (a test) keeps Python's handling"


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["status", "list", "hint gae --level 3"])
def test_a_closed_pipe_ends_the_command_without_a_traceback(command):
    shell = f"{sys.executable} -m kata {command} | head -c 1 >/dev/null"
    finished = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in finished.stderr and "BrokenPipeError" not in finished.stderr, (
        f"`kata {command} | head` must end quietly: {finished.stderr}")


# ---- a concept test's failure is its message -------------------------------------------------------------------


def test_concept_test_modules_are_told_from_the_others():
    from kata.testing.plain_asserts import concept_test_module

    names = ["gae", "reinforce"]
    assert concept_test_module("/copy/of/tests/test_gae.py", names), "a concept's module, wherever it was copied"
    for other in ("/repo/tests/frame/test_gae.py", "/repo/tests/test_layout.py", "/repo/tests/assertions.py",
                  "/repo/conftest.py"):
        assert not concept_test_module(other, names), f"{other} is not a concept's test module"


def test_a_concept_tests_assertions_are_plain_and_the_frames_rewritten():
    import importlib

    concept_module = importlib.import_module("tests.test_gae")
    frame_module = importlib.import_module("tests.frame.test_stubs")
    assert "@pytest_ar" not in vars(concept_module), (
        "tests/test_gae.py must not be rewritten: its failures would carry '+ where tensor(False) = ...' lines")
    assert "@pytest_ar" in vars(frame_module), "the frame's own tests keep pytest's introspection"
