"""The diagnosis of a graded submission: which catalogued mistakes a failed concept behaves like.

It runs the submission's code, so it runs in throwaway copies of everything it touches (see
:func:`diagnose_submission`), through the grader's command prefix (its resource limits), after the score is set.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kata.catalogue.diagnose import DIAGNOSE_TIMEOUT, REFERENCE, Diagnosis, diagnose_in_subprocess
from kata.concepts.impl import REPOSITORY_ROOT
from kata.grading import workspace


def diagnose_submission(submission: Path, concept_names: list[str], *, prefix: Sequence[str] = (),
                        repository: Path = REPOSITORY_ROOT, reference: Path | None = None,
                        timeout: float = DIAGNOSE_TIMEOUT) -> list[Diagnosis]:
    """:func:`diagnose_in_subprocess` for someone else's code (``kata grade``): the child runs in a throwaway copy of
    what a diagnosis needs (the ``kata`` package, tests/ for the strategies, the reference ``reference`` as
    solutions/, mistakes/) on a copy of the submission's Python files, both deleted afterwards. Code that writes
    where it finds itself, or beside ``kata``, changes only those copies: never this repository, the submission
    handed in, or what the next submission is diagnosed against."""
    reference = reference if reference is not None else repository / REFERENCE
    if not (repository / "mistakes").is_dir():
        return []  # no catalogue to diagnose against
    with tempfile.TemporaryDirectory(prefix="kata-diagnose-") as scratch_name:
        scratch = Path(scratch_name)
        copy = workspace.repository_copy(scratch / "repository", repository)
        shutil.copytree(reference, copy / REFERENCE, ignore=workspace.NOT_COPIED)
        shutil.copytree(repository / "mistakes", copy / "mistakes", ignore=workspace.NOT_COPIED)
        student = workspace.submission_files(submission, scratch / "submission")
        return diagnose_in_subprocess(str(student), concept_names, prefix=prefix, cwd=copy, timeout=timeout)
