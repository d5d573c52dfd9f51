"""The frame: `kata stubs` writes exercises/ from the marked solutions/, checks without writing, and never
overwrites a stub that differs from what it would write unless told to, keeping a copy then."""

from __future__ import annotations

import subprocess
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from kata import cli
from kata.catalogue import stubs
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, concept

pytestmark = pytest.mark.frame

SOLUTION = textwrap.dedent('''\
    """The reference for a tiny concept."""

    from kata.arrays import like_inputs
    # BEGIN STUB
    # from kata.concepts.stub import not_implemented
    # END STUB


    def double(x):
        """Twice x."""
        checked = x
        # BEGIN SOLUTION
        return like_inputs(2 * checked, x)
        # END SOLUTION
        # BEGIN STUB
        # # checked: the input, checked.
        # #
        # raise not_implemented("double")
        # END STUB
    # BEGIN SOLUTION


    def _reference_only_helper():
        return None
    # END SOLUTION
''')

STUB = textwrap.dedent('''\
    """HEADER"""

    from kata.arrays import like_inputs
    from kata.concepts.stub import not_implemented


    def double(x):
        """Twice x."""
        checked = x
        # checked: the input, checked.
        #
        raise not_implemented("double")
''').replace("HEADER", stubs.stub_header(concept("gae")))


def test_solution_blocks_leave_and_stub_blocks_enter_the_stub():
    assert stubs.stub_text(SOLUTION, header=stubs.stub_header(concept("gae"))) == STUB, (
        "the stub must be the solution without its SOLUTION blocks, with its STUB blocks uncommented once and "
        "its first line written from the course data: number, title and GUIDE section")


@pytest.mark.parametrize("text, complaint", [
    ("x = 1\n# BEGIN SOLUTION\nx = 2\n", "x.py:2: # BEGIN SOLUTION is never closed"),
    ("# BEGIN SOLUTION\n# BEGIN STUB\n# END STUB\n# END SOLUTION\n", "x.py:2: # BEGIN STUB inside"),
    ("x = 1\n# END STUB\n", "x.py:2: # END STUB closes no # BEGIN STUB"),
    ("# BEGIN SOLUTION\nx = 1\n# END STUB\n", "x.py:3: # END STUB closes no"),
    ("def f():\n    # BEGIN STUB\n    raise ValueError\n    # END STUB\n", "x.py:3: a line of a STUB block must"),
    ("def f():\n    # BEGIN STUB\n  # raise ValueError\n    # END STUB\n", "x.py:3: a line of a STUB block must"),
    ("# BEGIN STUB\n#raise ValueError\n# END STUB\n", "x.py:2: a STUB block's '#' must be followed by a space"),
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n", "does not compile"),
], ids=["unclosed", "nested", "stray end", "wrong end", "uncommented", "outdented", "no space", "no body"])
def test_malformed_markers_are_refused_with_their_line(text, complaint):
    with pytest.raises(stubs.StubMarkupError, match=complaint.replace("(", r"\(")):
        stubs.stub_text(text, "solutions/x.py")


def _changed_since_the_last_commit(path: Path) -> bool:
    """Whether git says ``path`` was edited and not committed (False where there is no git or no repository)."""
    try:
        found = subprocess.run(["git", "status", "--porcelain", "--", str(path)], cwd=REPOSITORY_ROOT,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return found.returncode == 0 and bool(found.stdout.strip())


def test_the_committed_stubs_are_what_the_solutions_give():
    differing = [stub for stub in stubs.plan() if stub.state != "same"]
    # A student's work in exercises/ (a function written, or any edit not committed yet) is theirs: this check is
    # of the stubs as committed, which `kata stubs --check` also makes on CI's clean clone.
    work = [stub for stub in differing if stub.written or _changed_since_the_last_commit(stub.path)]
    stale = [stub.concept.name for stub in differing if stub not in work]
    assert not stale, (f"exercises/ differs from what solutions/ gives for {stale}, and no function there is "
                       "written: after editing solutions/ (the one source), `kata stubs --force` rewrites these "
                       "stubs, keeping a copy of each (`kata stubs --check` shows the difference)")
    if work:
        pytest.skip(f"exercises/ holds work in progress ({', '.join(stub.concept.name for stub in work)}): it is "
                    "left out of this check of the committed stubs")


@pytest.mark.parametrize("c", CONCEPTS, ids=lambda c: c.name)
def test_every_solution_marks_what_the_student_writes(c):
    text = (REPOSITORY_ROOT / "solutions" / f"{c.name}.py").read_text(encoding="utf-8")
    assert text.count(stubs.BEGIN_SOLUTION) >= 1, f"solutions/{c.name}.py marks no # BEGIN SOLUTION block"
    stub = stubs.stub_text(text)
    assert stub.count("raise not_implemented(") >= 1, f"the stub of {c.name} raises no not_implemented(...)"


def test_reference_only_helpers_stay_in_the_reference():
    stub = (REPOSITORY_ROOT / "exercises" / "ppo_cartpole.py").read_text(encoding="utf-8")
    for helper in ("_minibatch_loss", "_clipped_step"):
        assert helper not in stub, f"{helper} is the reference's: it belongs inside a SOLUTION block"
    from solutions.ppo_cartpole import _clipped_step, _minibatch_loss  # noqa: F401 - the reference keeps them


# ---- writing: never a student's work ----------------------------------------------------------------------------


@pytest.fixture()
def layout(tmp_path: Path) -> tuple[Path, Path]:
    solutions, exercises = tmp_path / "solutions", tmp_path / "exercises"
    solutions.mkdir()
    (solutions / "gae.py").write_text(SOLUTION, encoding="utf-8")
    return solutions, exercises


def _plan(layout: tuple[Path, Path]) -> list[stubs.Stub]:
    solutions, exercises = layout
    return stubs.plan([concept("gae")], solutions=solutions, exercises=exercises)


def test_a_missing_stub_is_written_and_a_current_one_left_as_it_is(layout, capsys):
    exercises = layout[1]
    assert stubs.write(_plan(layout)) == 0, "writing a missing stub succeeds"
    assert (exercises / "gae.py").read_text(encoding="utf-8") == STUB, "the stub written is what the solution gives"
    assert stubs.write(_plan(layout)) == 0, "writing again over an up-to-date stub succeeds"
    assert "0 written, 0 left alone, 1 already up to date" in capsys.readouterr().out, (
        "the second write reports the stub as already up to date")
    assert stubs.check(_plan(layout)) == 0, "--check passes on the stub just written"


def test_a_stub_that_differs_is_left_alone_without_force(layout, capsys):
    path = layout[1] / "gae.py"
    path.parent.mkdir()
    work = STUB.replace('raise not_implemented("double")', "return 2 * checked")
    path.write_text(work, encoding="utf-8")
    assert stubs.write(_plan(layout)) == 1, "refusing to overwrite must be a failure the caller sees"
    assert path.read_text(encoding="utf-8") == work, "kata stubs overwrote a student's work without --force"
    assert sorted(p.name for p in path.parent.iterdir()) == ["gae.py"], "no copy is made when nothing is written"
    out = capsys.readouterr().out
    assert "left" in out and "double" in out and "--force" not in out, (
        f"the refusal must name the written function and send no one to overwrite a student's work: {out}")
    assert stubs.check(_plan(layout)) == 1 and "--force" not in capsys.readouterr().out, (
        "--check must not suggest overwriting a file that holds written code")


def test_a_stub_changed_by_hand_without_written_code_may_be_forced(layout, capsys):
    path = layout[1] / "gae.py"
    path.parent.mkdir()
    path.write_text(STUB.replace("Twice x.", "Twice x, by hand."), encoding="utf-8")
    assert stubs.write(_plan(layout)) == 1, "a differing stub is still left alone without --force"
    out = capsys.readouterr().out
    assert "left" in out and "--force" in out, f"where no function is written, the refusal says how to rewrite: {out}"


def test_force_overwrites_and_keeps_a_dated_copy(layout):
    path = layout[1] / "gae.py"
    path.parent.mkdir()
    path.write_text("my work\n", encoding="utf-8")
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert stubs.write(_plan(layout), force=True, now=now) == 0, "--force overwrites a differing stub and succeeds"
    assert path.read_text(encoding="utf-8") == STUB, "--force writes what the solution gives"
    copy = path.with_name("gae.py.bak-20260102T030405Z")
    assert copy.read_text(encoding="utf-8") == "my work\n", "--force must keep what it overwrote"


def test_check_only_reads(layout, capsys):
    path = layout[1] / "gae.py"
    path.parent.mkdir()
    path.write_text(STUB.replace("Twice x.", "Twice x, by hand."), encoding="utf-8")
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    assert stubs.check(_plan(layout)) == 1, "--check must fail when a stub is not what the solution gives"
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before, "--check wrote to exercises/"
    out = capsys.readouterr().out
    assert "-    \"\"\"Twice x, by hand.\"\"\"" in out and "+    \"\"\"Twice x.\"\"\"" in out, (
        f"--check must show the difference: {out}")
    path.unlink()
    assert stubs.check(_plan(layout)) == 1, "--check must fail when a stub is missing"
    assert not path.exists(), "--check wrote a missing stub"


def test_the_command_line(capsys):
    if any(stub.state != "same" for stub in stubs.plan()):
        pytest.skip("exercises/ holds work in progress: `kata stubs --check` fails on it, as it should")
    assert cli.main(["stubs", "--check"]) == 0, capsys.readouterr().out
    assert "all 8 stubs" in capsys.readouterr().out, "`kata stubs --check` reports all 8 stubs up to date"
    assert cli.main(["stubs", "--check", "gae", "reinforce"]) == 0, "`kata stubs --check gae reinforce` passes"
    assert "all 2 stubs" in capsys.readouterr().out, "naming two concepts checks just those two stubs"
    with pytest.raises(SystemExit):
        cli.main(["stubs", "--check", "--force"])
    with pytest.raises(SystemExit):
        cli.main(["stubs", "no_such_concept"])
