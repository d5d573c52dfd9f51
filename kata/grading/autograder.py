"""A Gradescope autograder: build its zip here, run it there.

    kata autograder --out autograder.zip [--timeout 60] [--no-slow]    build (this repository)
    python3 -m kata.grading.autograder run                                      grade (inside Gradescope's container)

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) builds an image from the zip once: it
unpacks the zip into ``/autograder/source`` and runs ``setup.sh`` (here: Python 3.11, a virtual environment with
this repository's requirements and the CPU build of torch). For every submission it starts a fresh container with
the student's files in ``/autograder/submission``, runs ``run_autograder`` and reads
``/autograder/results/results.json``. Each submission is thus graded in its own container, in parallel, on
Gradescope's machines.

``run`` takes the concept files from the submission (flat ``*.py`` files, or an ``exercises/`` folder inside it;
a file that is missing gets ``error`` naming it), grades them as ``kata grade`` does (per-concept credit, the ci
profile, slow tests included unless the zip was built with --no-slow, the per-test timeout it was built with) with
the repository's tests and reference from ``source/``, and writes results.json: one test per concept (name, score,
max_score, output: the first failure's message, the catalogued misconception a failed concept behaves like (as
``kata grade`` diagnoses it) and the command that shows every failure, visibility) and the score.
``AUTOGRADER_ROOT`` (default ``/autograder``) replaces the root, so the whole flow runs anywhere.

Inside Gradescope it grades unsandboxed, on purpose and explicitly (``sandbox=False``, as ``kata grade
--no-sandbox``): each upload has a throwaway container of its own, which is its isolation, and a container's
default policy usually denies the user namespaces bwrap needs, so setup.sh does not install it. ``kata grade``, which
refuses to run submitted code without bwrap unless told, is the grader of one machine; this is not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path

from kata.grading.grader import Grader
from kata.grading.results import SubmissionResult, error_result, to_gradescope, write_atomically
from kata.testing.limits import DEFAULT_TEST_TIMEOUT
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, concept

ROOT_VARIABLE = "AUTOGRADER_ROOT"
SETTINGS = "autograder.json"
SOURCES = ("kata", "tests", "solutions", "mistakes", "conftest.py", "pyproject.toml", "README.md")
LEFT_OUT = ("__pycache__", "*.pyc", ".hypothesis", ".kata", "frame", "parity", "release")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, on its Ubuntu image: Python 3.11 and the grader's requirements, torch's CPU
# build, in a virtual environment that run_autograder puts first on PATH.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
apt-get update
apt-get install -y software-properties-common
if ! apt-get install -y python3.11 python3.11-venv; then
  add-apt-repository -y ppa:deadsnakes/ppa && apt-get update && apt-get install -y python3.11 python3.11-venv
fi
python3.11 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --upgrade pip
"$ROOT/venv/bin/python" -m pip install --extra-index-url %(index)s -r "$ROOT/source/requirements-autograder.txt"
"$ROOT/venv/bin/python" -c "import torch; print('torch', torch.__version__)"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in a fresh container; it writes $ROOT/results/results.json.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
if [ -x "$ROOT/venv/bin/python3" ]; then
  export PATH="$ROOT/venv/bin:$PATH"
fi
cd "$ROOT/source"
exec python3 -m kata.grading.autograder run
"""


def requirements(repository: Path = REPOSITORY_ROOT) -> str:
    """The pinned torch of requirements.txt and the other dependencies of pyproject.toml, without the package."""
    pinned = [line for line in (repository / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith(("#", "-e"))]
    project = tomllib.loads((repository / "pyproject.toml").read_text())["project"]["dependencies"]
    others = [dependency for dependency in project if not dependency.startswith("torch")]
    return "\n".join([*pinned, *others]) + "\n"


def build(out: Path, *, timeout: float = DEFAULT_TEST_TIMEOUT, include_slow: bool = True,
          concepts: Sequence[str] | None = None, repository: Path = REPOSITORY_ROOT) -> Path:
    """Write the autograder zip to ``out``: setup.sh and run_autograder at its root, the grader's sources beside."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {"timeout": timeout, "include_slow": include_slow,
                "concepts": list(concepts) if concepts else [c.name for c in CONCEPTS]}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP_SH % {"index": TORCH_INDEX}), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # executable once unpacked
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
        archive.writestr("requirements-autograder.txt", requirements(repository))
        archive.writestr(SETTINGS, json.dumps(settings, indent=2) + "\n")
        for name in SOURCES:
            source = repository / name
            paths = [source] if source.is_file() else sorted(source.rglob("*"))
            for path in paths:
                relative = path.relative_to(repository)
                if path.is_file() and not any(relative.match(p) or p in relative.parts for p in LEFT_OUT):
                    archive.write(path, str(relative))
    return out


def collect(submission: Path, destination: Path) -> list[str]:
    """Copy the concept files of a Gradescope submission to ``destination``; returns the missing file names."""
    folder = submission / "exercises" if (submission / "exercises").is_dir() else submission
    destination.mkdir(parents=True)
    missing = []
    for c in CONCEPTS:
        found = folder / f"{c.name}.py"
        if found.is_file():
            shutil.copy2(found, destination / found.name)
        else:
            missing.append(found.name)
    for helper in folder.glob("*.py"):  # the student's own helper modules, and an __init__.py
        if not (destination / helper.name).exists():
            shutil.copy2(helper, destination / helper.name)
    return missing


def run(root: Path) -> dict:
    """Grade ``root/submission`` with ``root/source`` and write ``root/results/results.json``; its content."""
    started = time.monotonic()
    source = root / "source"
    settings = json.loads((source / SETTINGS).read_text()) if (source / SETTINGS).exists() else {}
    concepts = [concept(name) for name in settings.get("concepts", [c.name for c in CONCEPTS])]
    grader = Grader(concepts=concepts, timeout=float(settings.get("timeout", DEFAULT_TEST_TIMEOUT)),
                    include_slow=bool(settings.get("include_slow", True)), repository=source,
                    diagnose=(source / "mistakes").is_dir(),  # a failed concept's output names its misconception
                    sandbox=False)  # explicitly: each upload has a throwaway container of its own (module docstring)
    with tempfile.TemporaryDirectory(prefix="kata-autograder-") as scratch:
        student = Path(scratch) / "submission"
        missing = [name for name in collect(root / "submission", student)
                   if name[:-3] in {c.name for c in concepts}]
        where = "at the top of your upload or in an exercises/ folder"
        result = SubmissionResult("submission") if len(missing) == len(concepts) else grader.grade(student)
        for c in concepts:
            if f"{c.name}.py" in missing:
                result.concepts[c.name] = error_result(c, f"{c.name}.py is missing: upload it {where}")
        result.concepts = {c.name: result.concepts[c.name] for c in concepts}
    data = to_gradescope(result, concepts)
    data["execution_time"] = round(time.monotonic() - started)
    if missing:
        data["output"] = "\n".join([data.get("output", ""), f"missing: {', '.join(missing)}"]).strip()
    write_atomically(root / "results" / "results.json", json.dumps(data, indent=2) + "\n")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kata.grading.autograder", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="grade $AUTOGRADER_ROOT/submission (default /autograder) into results/results.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        data = run(Path(os.environ.get(ROOT_VARIABLE, "/autograder")))
        print(f"score {data['score']:g}: " + ", ".join(f"{t['name'].split(':')[0]} {t['score']:g}/{t['max_score']:g}"
                                                          for t in data["tests"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
