"""The grading sandbox (kata.grading.sandbox): what a run sees, and submissions that try to get out of it.

The escapes (tests/frame/fixtures/submissions/escaping/escape.py) read a secret planted in the grader's HOME, read the
grader's repository, write a file beside it, connect to a listener on 127.0.0.1 and leave a daemon (one that kills
its run's supervisor, kata.grading.limits, to outlive it, where only the tests run). Sandboxed, every attempt fails
and the submission keeps every point; unsandboxed, the same submission leaks, which proves the attempts are real.
Where bwrap does not work the sandboxed tests skip, except under .ci/run ($KATA_REQUIRE_SANDBOX), which installs
bubblewrap first; there `kata grade` refuses to grade, in one line, unless told --no-sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from kata import cli
from kata.grading import batch as grading_batch
from kata.grading import results as reports
from kata.grading import grader as grade
from kata.grading import sandbox, workspace
from tests.frame.test_grade import (
    FIXTURES,
    MINI_CONCEPTS,
    MINI_MAX,
    MINI_SOLUTIONS,
    ROOT,
    mini_repository,
    process_tagged,
    sandbox_works,
    submission,
    write_modules,
)

pytestmark = pytest.mark.frame

ESCAPE_CHECK = "\n\nfrom . import escape  # noqa: E402 - the escapes, tried once the module's code is defined\n" \
               "\nescape.check()\n"


@pytest.fixture
def listener():
    """A TCP listener on 127.0.0.1 that records what every connection sends."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    received.append(connection.recv(4096))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield SimpleNamespace(port=server.getsockname()[1], received=received)
    done.set()
    thread.join(timeout=5)
    server.close()


AIMED = ("GRADE_FIXTURE_ESCAPE",)  # the one variable the escapes need: the grader passes it on, and nothing else


@pytest.fixture
def targets(tmp_path, monkeypatch, listener):
    """A secret in the grader's (temporary) HOME, and what escape.py aims at, in $GRADE_FIXTURE_ESCAPE; afterwards,
    any daemon the escapes left is killed (by its own id, found by its tag)."""
    home = tmp_path / "home"
    home.mkdir()
    secret = home / "secret.txt"
    secret.write_text(f"the grader's secret {os.getpid()}-{tmp_path.name}\n")
    monkeypatch.setenv("HOME", str(home))
    found = SimpleNamespace(secret=secret, listener=listener, tag=f"kata-escape-{os.getpid()}-{tmp_path.name}")

    def aim(repository: Path, daemon: str = "sleeps") -> Path:
        beside = repository.parent / f"escaped-{found.tag}.txt"
        monkeypatch.setenv("GRADER_API_TOKEN", secret.read_text().strip())  # exported in the grader's shell
        monkeypatch.setenv("GRADE_FIXTURE_ESCAPE", json.dumps(dict(
            secret=str(secret), repository=str(repository), beside=str(beside), port=listener.port, tag=found.tag,
            daemon=daemon, variable="GRADER_API_TOKEN")))
        return beside

    found.aim = aim
    yield found
    for pid in process_tagged(found.tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def escaping_submission(root: Path, name: str) -> str:
    """The miniature reference with the escaping baselines (and escape.py) laid over it."""
    return submission(root, name, MINI_SOLUTIONS, "escaping")


def report_of(tmp_path: Path, name: str, results: list[reports.SubmissionResult]) -> dict:
    paths = reports.write_reports(results, json_path=str(tmp_path / f"{name}.json"),
                                csv_path=str(tmp_path / f"{name}.csv"), markdown_path=str(tmp_path / f"{name}.md"),
                                concepts=MINI_CONCEPTS)
    assert len(paths) == 3, f"the JSON, CSV and Markdown reports are written: {paths}"
    return json.loads((tmp_path / f"{name}.json").read_text())["submissions"][0]


# ---- what a run sees ---------------------------------------------------------------------------------------------

LOOK_AROUND = """
import importlib.util, json, os, socket, sys
import kata
seen = {"kata": kata.__file__, "solutions": importlib.util.find_spec("solutions") is not None,
        "home": sorted(os.listdir(os.environ["HOME"])), "root": sorted(os.listdir("/")),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
for name, path in [("repository", sys.argv[1]), ("secret", sys.argv[2])]:
    try:
        open(path).read()
        seen[name] = "read"
    except OSError as error:
        seen[name] = type(error).__name__
for name, path in [("usr", "/usr/kata-escape"), ("root_write", "/kata-escape"), ("tmp", "/tmp/kata-escape"),
                   ("scratch", sys.argv[3])]:
    try:
        open(path, "w").close()
        seen[name] = "written"
    except OSError as error:
        seen[name] = type(error).__name__
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[4])), timeout=2).close()
    seen["connect"] = "connected"
except OSError as error:
    seen["connect"] = type(error).__name__
print(json.dumps(seen))
"""


def test_a_run_sees_its_copy_and_the_interpreter_and_nothing_of_the_repository_or_home(targets):
    sandbox_works()
    with tempfile.TemporaryDirectory(prefix="kata-grade-") as scratch:
        copy = workspace.repository_copy(Path(scratch) / "repository", ROOT)
        prefix = sandbox.command(scratch, hidden=[ROOT])
        completed = subprocess.run(
            [*prefix, sys.executable, "-c", LOOK_AROUND, str(ROOT / "pyproject.toml"), str(targets.secret),
             str(Path(scratch) / "written.txt"), str(targets.listener.port)],
            cwd=copy, capture_output=True, text=True, timeout=60)
        assert completed.returncode == 0, f"the look around runs in the sandbox: {completed.stderr[-2000:]}"
        seen = json.loads(completed.stdout)
        assert seen["kata"] == str(copy / "kata" / "__init__.py"), (
            f"`import kata` finds the copy, not the checkout the editable install maps it to: {seen['kata']}")
        assert not seen["solutions"], "the reference cannot even be found: the checkout is not there"
        assert (seen["repository"], seen["secret"]) == ("FileNotFoundError", "FileNotFoundError"), (
            f"neither the grader's repository nor its home exists inside: {seen}")
        assert seen["home"] == [], f"HOME is empty: {seen['home']}"
        mounted = {path.parts[1] for path in [*sandbox.interpreter_paths(sys.executable), Path(scratch)]}
        assert set(seen["root"]) <= {"usr", *sandbox.TOP_LEVEL, "etc", "proc", "dev", "tmp", *mounted}, (
            f"the root holds the system's folders and the mount points of the interpreter and the copy: {seen['root']}")
        assert seen["usr"] in ("OSError", "PermissionError") and seen["root_write"] == "OSError", (
            f"the system and the root are read-only: {seen}")
        assert (seen["tmp"], seen["scratch"]) == ("written", "written"), f"/tmp and the copy are writable: {seen}"
        assert seen["connect"] != "connected" and targets.listener.received == [], (
            f"no network: the host's 127.0.0.1 is out of reach: {seen['connect']}")
        assert len(seen["pids"]) <= 4, f"its own PID namespace: only its own few processes are seen: {seen['pids']}"
        assert not (Path(tempfile.gettempdir()) / "kata-escape").exists(), "its /tmp is private"


def test_the_grader_s_home_and_repository_are_never_bound_nor_any_folder_above_them(tmp_path, monkeypatch):
    repository, outside = tmp_path / "work" / "kata", tmp_path / "opt" / "python"
    venv = repository / ".venv"
    for folder in (venv, outside):
        folder.mkdir(parents=True)
    monkeypatch.setattr(sandbox, "interpreter_paths",
                        lambda python: (tmp_path / "work", repository, venv, outside, Path("/usr/lib/python3")))
    prefix = sandbox.command(tmp_path / "scratch", hidden=[repository])
    bound = [prefix[i + 1] for i, word in enumerate(prefix) if word == "--ro-bind"]
    assert str(venv) in bound and str(outside) in bound, (
        f"the interpreter's folders are bound, a virtual environment inside the repository included: {bound}")
    assert str(repository) not in bound and str(tmp_path / "work") not in bound, (
        f"neither the repository nor a folder holding it is bound: {bound}")
    assert "/usr/lib/python3" not in bound, "a folder under /usr is already there"
    assert prefix[prefix.index("--bind") + 1] == str((tmp_path / "scratch").resolve()), "the scratch is read-write"
    assert {"--unshare-all", "--die-with-parent", "--new-session"} <= set(prefix), (
        f"every namespace, death with the grader, a session of its own: {prefix}")
    assert prefix[prefix.index("--cap-drop") + 1] == "ALL" and prefix[-1] == "--", "no capability; then the command"


COVERED_LOOK = """
import json, os, sys
seen = {"files": sorted(os.listdir(sys.argv[1])), "venv": open(sys.argv[2]).read()}
try:
    open(os.path.join(sys.argv[1], "written.txt"), "w").close()
    seen["write"] = "written"
except OSError as error:
    seen["write"] = type(error).__name__
print(json.dumps(seen))
"""


def test_a_repository_inside_a_system_folder_is_covered_and_its_virtual_environment_still_bound(tmp_path, monkeypatch):
    """A repository in a folder every run sees whole (/usr/src/app, say) is covered by an empty read-only folder."""
    sandbox_works()
    system, interpreter_paths = tmp_path / "system", sandbox.interpreter_paths
    repository = system / "src" / "kata"
    venv = repository / ".venv"
    (repository / "solutions").mkdir(parents=True)
    (repository / "solutions" / "baselines.py").write_text("the answers\n")
    venv.mkdir()
    (venv / "marker.txt").write_text("the interpreter's own\n")
    monkeypatch.setattr(sandbox, "SYSTEM", (*sandbox.SYSTEM, str(system)))  # bound whole, as /usr is
    monkeypatch.setattr(sandbox, "interpreter_paths", lambda python: (*interpreter_paths(python), venv))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    prefix = sandbox.command(scratch, hidden=[repository])
    covers = [prefix[i + 1] for i, word in enumerate(prefix) if word == "--tmpfs"]
    assert str(repository) in covers and prefix.index(str(repository)) > prefix.index(str(system)), (
        f"an empty tmpfs covers the repository, after the folder that holds it is bound: {prefix}")
    completed = subprocess.run([*prefix, sys.executable, "-c", COVERED_LOOK, str(repository), str(venv / "marker.txt")],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, f"the look runs in the sandbox: {completed.stderr[-2000:]}"
    seen = json.loads(completed.stdout)
    assert seen["files"] == [".venv"], f"nothing of the repository but the mount point of its .venv: {seen}"
    assert seen["venv"] == "the interpreter's own\n", f"the virtual environment inside it is still bound: {seen}"
    assert seen["write"] == "OSError", f"the cover is read-only: {seen}"
    assert not (repository / "written.txt").exists(), "nothing was written in the repository"


# ---- submissions that try to escape ------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_a_submission_that_tries_every_escape_gets_every_point_sandboxed_and_leaks_unsandboxed(tmp_path, targets):
    sandbox_works()
    repository = mini_repository(tmp_path / "repository")
    beside = targets.aim(repository, daemon="kills its supervisor")
    subs = tmp_path / "submissions"
    graded = grading_batch.grade_all([escaping_submission(subs, "escaping")], grade.Grader(
        concepts=MINI_CONCEPTS, timeout=5.0, watchdog=60.0, repository=repository, passed_variables=AIMED))
    report = report_of(tmp_path, "sandboxed", graded)
    assert {name: c["status"] for name, c in report["concepts"].items()} == dict(
        reinforce="passed", baselines="passed", gae="passed"), f"every concept passes, sandboxed: {report}"
    assert (report["total"], report["max_total"], report["notes"]) == (MINI_MAX, MINI_MAX, []), (
        f"every point, no note: nothing leaked (a leak would have kept baselines from importing): {report}")
    assert report["concepts"]["baselines"]["passed"] == 4, "every baselines test ran and passed"
    assert targets.secret.read_text() not in json.dumps(report), "the secret is in no report"
    assert not beside.exists(), f"nothing was written beside the grader's repository: {beside}"
    assert targets.listener.received == [], f"no connection reached 127.0.0.1: {targets.listener.received}"
    assert not process_tagged(targets.tag), "the daemon did not outlive its run"
    rows = (tmp_path / "sandboxed.csv").read_text().splitlines()
    assert rows[1].split(",")[1:5] == ["10", "10", "15", "35"], f"the CSV row is whole: {rows}"

    # The same submission, unsandboxed: what it reaches is what the sandbox kept from it.
    graded = grading_batch.grade_all([escaping_submission(subs, "escaping_again")], grade.Grader(
        concepts=MINI_CONCEPTS, timeout=5.0, watchdog=60.0, repository=repository, sandbox=False,
        passed_variables=AIMED))
    report = report_of(tmp_path, "unsandboxed", graded)
    message = report["concepts"]["baselines"]["message"]
    assert report["concepts"]["baselines"]["status"] == "error" and "escaped its run" in message, (
        f"unsandboxed, the escapes succeed and baselines does not import: {report['concepts']['baselines']}")
    for leak in ("read the secret", "read the repository", "wrote beside it", "reached 127.0.0.1"):
        assert leak in message, f"unsandboxed, the escape '{leak}' succeeds: {message}"
    assert "read a secret variable" not in message, (
        f"sandboxed or not, a run gets none of the grader's environment variables but the basics: {message}")
    assert targets.secret.read_text().strip() in message, f"unsandboxed, the secret is in the report: {message}"
    assert beside.read_text() == targets.secret.read_text(), "unsandboxed, the secret is written beside the repository"
    assert targets.secret.read_text().encode() in targets.listener.received, "unsandboxed, the secret reaches 127.0.0.1"


@pytest.mark.e2e
@pytest.mark.slow
def test_kata_grade_sandboxes_the_tests_and_the_diagnosis_of_a_submission_that_tries_to_escape(tmp_path, targets):
    """The real tests and the diagnosis, through the command: the escapes run in the baselines tests' run and, in a
    wrong gae, in the diagnosis too (a diagnosis runs only for a concept that failed)."""
    sandbox_works()
    beside = targets.aim(ROOT)
    folder = tmp_path / "submissions" / "escaping"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(FIXTURES / "escaping" / "escape.py", folder / "escape.py")
    (folder / "baselines.py").write_text((ROOT / "solutions" / "baselines.py").read_text() + ESCAPE_CHECK)
    (folder / "gae.py").write_text((FIXTURES / "lambda_ignored" / "gae.py").read_text() + ESCAPE_CHECK)
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "kata", "grade", str(folder), "--concepts", "baselines,gae", "--no-slow",
             "--json", str(tmp_path / "report.json"), "--pass-env", "GRADE_FIXTURE_ESCAPE"],
            cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert "no sandbox" not in completed.stderr, f"the runs were sandboxed: {completed.stderr[-2000:]}"
        [report] = json.loads((tmp_path / "report.json").read_text())["submissions"]
        baselines, gae = report["concepts"]["baselines"], report["concepts"]["gae"]
        assert (baselines["status"], baselines["points"], baselines["failed"]) == ("passed", 10.0, 0), (
            f"the reference's baselines with the escapes keeps every point: {baselines}")
        assert gae["status"] == "failed" and gae["passed"] > 0, (
            f"the wrong gae imports (no escape succeeded) and fails some tests: {gae}")
        assert gae["diagnoses"] == ["gae/lambda_not_applied"], (
            f"the diagnosis, which imported the escapes too, still names the mistake: {gae}")
        assert report["notes"] == [], f"no note: {report['notes']}"
        assert targets.secret.read_text() not in json.dumps(report), "the secret is in no report"
        assert not beside.exists(), f"nothing was written beside the grader's repository: {beside}"
        assert targets.listener.received == [], f"no connection reached 127.0.0.1: {targets.listener.received}"
        assert not process_tagged(targets.tag), "no daemon outlived the runs"
    finally:
        beside.unlink(missing_ok=True)


# ---- without bwrap -----------------------------------------------------------------------------------------------

FAKE_BWRAP = """#!/bin/sh
echo "$0 $*" >> "${0%/*}/calls.txt"
echo "bwrap: No permissions to create new namespace" >&2
exit 1
"""


def fake_path(tmp_path: Path, monkeypatch, case: str) -> Path:
    """A PATH whose only bwrap fails to start ("failing"), or none at all ("missing")."""
    fake = tmp_path / "bin"
    fake.mkdir()
    if case == "failing":
        (fake / "bwrap").write_text(FAKE_BWRAP)
        (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))  # the only bwrap there is, or none; the grader runs Python by its path
    return fake


@pytest.mark.parametrize("case", ["missing", "failing"])
def test_without_a_working_bwrap_kata_grade_refuses_in_one_line_and_runs_nothing(tmp_path, monkeypatch, capsys, case):
    fake = fake_path(tmp_path, monkeypatch, case)
    graded = []
    monkeypatch.setattr(grade.Grader, "grade", lambda self, folder: graded.append((folder, self.sandbox)))
    folder = submission(tmp_path / "submissions", "a", MINI_SOLUTIONS)
    assert cli.main(["grade", folder, "--json", str(tmp_path / "grades.json")]) == 2, "refused: exit 2"
    error = capsys.readouterr().err
    [line] = [line for line in error.splitlines() if "no sandbox" in line]
    assert line.startswith("kata grade: no sandbox: ") and error.count("\n") == 1, (
        f"one line, and nothing else, says why: {error!r}")
    expected = "is not installed" if case == "missing" else "cannot start here (bwrap: No permissions"
    assert expected in line and "--no-sandbox" in line, f"the line says why ({case}) and names the flag: {line}"
    if case == "missing":
        assert "`sudo apt-get install bubblewrap`" in line, f"the line names the command that installs it: {line}"
    calls = (fake / "calls.txt").read_text().splitlines() if case == "failing" else []
    assert graded == [] and len(calls) <= 1 and not (tmp_path / "grades.json").exists(), (
        f"nothing graded, no report written, bwrap run once at most (the check): {graded}, {calls}")

    grader = grade.Grader(concepts=MINI_CONCEPTS)  # the library refuses too: no submitted code runs unconfined
    with pytest.raises(grade.SandboxUnavailable, match="no sandbox: "):
        grading_batch.run_batch([folder], grader, reports=dict(json_path=str(tmp_path / "grades.json")))
    assert graded == [] and not (tmp_path / "grades.json").exists(), "run_batch refuses before grading or writing"

    assert cli.main(["grade", folder, "--no-sandbox"]) == 0, "--no-sandbox grades all the same"
    assert graded == [(folder, False)], f"unsandboxed, as told: {graded}"


@pytest.mark.e2e
@pytest.mark.slow
def test_no_sandbox_grades_every_point_without_running_bwrap_or_a_note(tmp_path, monkeypatch, capfd):
    fake = fake_path(tmp_path, monkeypatch, "failing")
    repository = mini_repository(tmp_path / "repository")
    grader = grade.Grader(concepts=MINI_CONCEPTS, timeout=5.0, watchdog=60.0, repository=repository, sandbox=False)
    folders = [submission(tmp_path / "submissions", name, MINI_SOLUTIONS) for name in ("a", "b")]
    graded = grading_batch.grade_all(folders, grader, jobs=2)
    assert [r.total for r in graded] == [MINI_MAX, MINI_MAX], f"every point: {graded}"
    assert [r.notes for r in graded] == [[], []] and "no sandbox" not in capfd.readouterr().err, "nothing to say"
    assert not (fake / "calls.txt").exists(), "--no-sandbox: bwrap is never run"


def test_kata_grade_no_sandbox_reaches_the_grader(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(sandbox, "unavailable", lambda python=None: None)  # as where bwrap works
    monkeypatch.setattr(grading_batch, "run_batch", lambda submissions, grader, **_: seen.append(grader) or ([], False))
    (tmp_path / "student").mkdir()
    for extra in ([], ["--no-sandbox"]):
        assert cli.main(["grade", str(tmp_path / "student"), *extra]) == 0, f"`kata grade {extra}` exits 0"
    assert [g.sandbox for g in seen] == [True, False], (
        f"sandboxed by default, not with --no-sandbox: {[g.sandbox for g in seen]}")


def test_the_autograder_grades_unsandboxed_in_gradescope_s_container_where_there_is_no_bwrap(tmp_path, monkeypatch):
    """Gradescope's throwaway container is each upload's isolation, and bwrap is not there: the autograder grades
    unsandboxed, explicitly, instead of refusing as `kata grade` does (kata.grading.autograder)."""
    from kata.grading import autograder

    fake_path(tmp_path, monkeypatch, "missing")
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / autograder.SETTINGS).write_text(json.dumps({"concepts": ["baselines"]}))
    write_modules(root / "submission", {"baselines.py": MINI_SOLUTIONS["baselines.py"]})
    made = []

    class Recorded(grade.Grader):
        def grade(self, submission):
            made.append(self)
            grading_batch.refuse_unsandboxed(self)  # what kata grade would meet: nothing, unsandboxed
            return reports.SubmissionResult("submission", {"baselines": reports.ConceptResult(
                10.0, 10.0, 4, 0, "passed", "")})

    monkeypatch.setattr(autograder, "Grader", Recorded)
    data = autograder.run(root)
    assert [g.sandbox for g in made] == [False], f"the autograder grades unsandboxed: {[g.sandbox for g in made]}"
    assert data["score"] == 10.0 and json.loads((root / "results" / "results.json").read_text())["score"] == 10.0, (
        f"and writes its results: {data}")
