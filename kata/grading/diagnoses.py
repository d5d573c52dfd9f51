"""The diagnosis of a graded submission: which catalogued mistakes a failed concept behaves like.

It runs the submission's code, so it runs in a child process (:func:`diagnose_in_subprocess`, the command line of
kata.catalogue.diagnose), in throwaway copies of everything it touches (see :func:`diagnose_submission`), through
the grader's command prefixes (its bwrap sandbox where it works, its resource limits), after the score is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kata.catalogue.diagnose import REFERENCE, Diagnosis
from kata.concepts.impl import REPOSITORY_ROOT
from kata.grading import sandbox, workspace

DIAGNOSE_TIMEOUT = 120.0  # seconds for a whole diagnosis in a child process; a slower one is left out
STOP_GRACE = 5.0  # seconds for a sandbox to collect its killed namespace


def diagnose_in_subprocess(spec: str, concept_names: list[str], *, timeout: float = DIAGNOSE_TIMEOUT,
                           extra: tuple[str, ...] = (), prefix: Sequence[str] = (),
                           cwd: Path = REPOSITORY_ROOT, environment: dict[str, str] | None = None) -> list[Diagnosis]:
    """``kata diagnose --json`` on ``spec`` in a child process (submitted code may hang or crash it), started
    through ``prefix`` (the grader's sandbox and limits) in the repository ``cwd``; [] if it does not answer within
    ``timeout`` seconds or fails. Past ``timeout``, a child started through bwrap has its whole PID namespace killed.
    """
    command = [*prefix, sys.executable, "-m", "kata.catalogue.diagnose", *concept_names, "--impl", spec, "--json",
               *extra]
    if environment is None:
        environment = {name: value for name, value in os.environ.items()
                       if name != "KATA_IMPL" and not name.startswith("PYTHONPATH")}
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=environment, stdin=subprocess.DEVNULL) as process:
        try:
            stdout, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            if not sandbox.stop(process, STOP_GRACE):  # not a sandbox (or no child yet): kill the child itself
                process.kill()
            process.wait()
            return []
    try:
        report = json.loads(stdout) if process.returncode == 0 else {}
    except json.JSONDecodeError:
        return []
    fields = Diagnosis.__dataclass_fields__
    return [Diagnosis(**{key: entry[key] for key in fields}) for entry in report.get("diagnoses", [])]


def diagnose_submission(submission: Path, concept_names: list[str], *, prefix: Sequence[str] = (),
                        isolate: Callable[[Path], Sequence[str]] | None = None,
                        repository: Path = REPOSITORY_ROOT, reference: Path | None = None,
                        timeout: float = DIAGNOSE_TIMEOUT, environment: dict[str, str] | None = None
                        ) -> list[Diagnosis]:
    """:func:`diagnose_in_subprocess` for someone else's code (``kata grade``): the child runs in a throwaway copy of
    what a diagnosis needs (the ``kata`` package, tests/ for the strategies, the reference ``reference`` as
    solutions/, mistakes/) on a copy of the submission's Python files, both deleted afterwards. Code that writes
    where it finds itself, or beside ``kata``, changes only those copies: never this repository, the submission
    handed in, or what the next submission is diagnosed against. ``isolate(scratch)``, when given, is the command
    prefix (the grader's bwrap sandbox) that confines the child to the folder holding both copies; it goes before
    ``prefix``. ``environment``: the child's (the grader gives its runs' own, kata.grading.sandbox.run_environment)."""
    reference = reference if reference is not None else repository / REFERENCE
    if not (repository / "mistakes").is_dir():
        return []  # no catalogue to diagnose against
    with tempfile.TemporaryDirectory(prefix="kata-diagnose-") as scratch_name:
        scratch = Path(scratch_name)
        copy = workspace.repository_copy(scratch / "repository", repository)
        shutil.copytree(reference, copy / REFERENCE, ignore=workspace.NOT_COPIED)
        shutil.copytree(repository / "mistakes", copy / "mistakes", ignore=workspace.NOT_COPIED)
        student = workspace.submission_files(submission, scratch / "submission")
        confined = [*(isolate(scratch) if isolate is not None else ()), *prefix]
        return diagnose_in_subprocess(str(student), concept_names, prefix=confined, cwd=copy, timeout=timeout,
                                      environment=environment)
