"""`kata release OUT`: the student edition of this repository, and the Gradescope autograder beside it.

    kata release OUT [--autograder FILE] [--force]

The edition is a complete repository a class can be given (``git init`` ready, or a GitHub Classroom template):
the stubs (written afresh from solutions/, whatever exercises/ holds in this checkout), the concept tests and
their assertions, the frame a student needs (kata/ without the catalogue and grading), GUIDE.md (without its
instructor-only passages, so that it names nothing the edition lacks: ``student_guide``), the lab's notebook,
a README for students, the project files, and ``.github/workflows/classroom.yml``: the workflow GitHub Classroom's
autograding reads, one graded step per concept worth its points, on the CPU build of torch. It holds no
solutions/, mistakes/ or variants/, no grading code, and no line of an answer (tests/frame/test_release.py searches
it for every line of every ``# BEGIN SOLUTION`` block). The autograder zip (kata.grading.autograder) is written
beside it, to ``OUT-autograder.zip`` by default, as otter-grader's ``otter assign`` writes both at once.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

from kata.catalogue import stubs
from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, MAX_POINTS, Concept
from kata.grading import autograder

LEFT_OUT_OF_KATA = ("catalogue", "grading")  # the instructor's tools: they need the answers
NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".kata", *LEFT_OUT_OF_KATA)
COPIED_FILES = ("conftest.py", "requirements.txt", "notebooks/lab.py", "notebooks/lab.ipynb", ".gitignore")
GUIDE = "GUIDE.md"  # written from the instructor's, its instructor-only passages left out (student_guide)
INSTRUCTOR_ONLY = re.compile(r"<!-- instructor -->.*?<!-- /instructor -->", re.DOTALL)
PRISTINE = Path("kata") / "student" / "pristine"  # the stubs as handed out: `kata status` tells written from given
WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
TORCH_INDEX = autograder.TORCH_INDEX
GRADING_MINUTES = 10  # per concept: its slow tests train an agent in seconds; a hanging loop costs ten minutes


def release(out: Path, *, repository: Path = REPOSITORY_ROOT, autograder_zip: Path | None = None,
            force: bool = False) -> tuple[Path, Path]:
    """Write the student edition to ``out`` and the Gradescope autograder to ``autograder_zip`` (default
    ``<out>-autograder.zip``); returns both paths. ``out`` must not exist, or be empty, unless ``force``."""
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        if not force:
            work = [stub.path.name for stub in stubs.plan(CONCEPTS, repository / "solutions", out / "exercises")
                    if stub.written]
            if work:  # never suggest replacing a student's work
                raise FileExistsError(f"{out} exists and its exercises/ holds written code ({', '.join(work)}), "
                                      "someone's work: give another folder")
            raise FileExistsError(f"{out} exists and is not empty: give another folder, or --force to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(repository / "kata", out / "kata", ignore=NOT_COPIED)
    for name in COPIED_FILES:
        if (repository / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repository / name, out / name)
    (out / GUIDE).write_text(student_guide((repository / GUIDE).read_text(encoding="utf-8")), encoding="utf-8")
    (out / "exercises").mkdir()
    (out / PRISTINE).mkdir(parents=True)
    shutil.copy2(repository / "exercises" / "__init__.py", out / "exercises" / "__init__.py")
    for stub in stubs.plan(CONCEPTS, repository / "solutions", out / "exercises"):
        (out / "exercises" / stub.path.name).write_text(stub.text, encoding="utf-8")
        (out / PRISTINE / stub.path.name).write_text(stub.text, encoding="utf-8")
    (out / "tests").mkdir()
    for name in ("__init__.py", "assertions.py", *(f"test_{c.name}.py" for c in CONCEPTS)):
        shutil.copy2(repository / "tests" / name, out / "tests" / name)
    (out / "pyproject.toml").write_text(student_pyproject(repository), encoding="utf-8")
    (out / "README.md").write_text(student_readme(), encoding="utf-8")
    (out / WORKFLOW).parent.mkdir(parents=True)
    (out / WORKFLOW).write_text(classroom_workflow(), encoding="utf-8")
    zipped = Path(autograder_zip) if autograder_zip is not None else out.with_name(f"{out.name}-autograder.zip")
    autograder.build(zipped, repository=repository)
    return out, zipped


# ---- the study guide ---------------------------------------------------------------------------------------------


def student_guide(guide: str) -> str:
    """GUIDE.md for the edition: the passages marked ``<!-- instructor -->`` ... ``<!-- /instructor -->`` (the
    library companion, solutions/, the catalogue, the benchmarks: what the edition does not hold) left out. A line
    that held nothing but such a passage goes with it, so no empty quote or paragraph is left behind."""
    kept = []
    for line in guide.splitlines(keepends=True):
        stripped = INSTRUCTOR_ONLY.sub("", line)
        if stripped != line:
            if stripped.strip() in ("", ">"):
                continue
            stripped = stripped.rstrip() + "\n"
        kept.append(stripped)
    text = INSTRUCTOR_ONLY.sub("", "".join(kept))  # passages over several lines
    return re.sub(r"\n{3,}", "\n\n", text)


# ---- the project file --------------------------------------------------------------------------------------------


def student_pyproject(repository: Path) -> str:
    """This repository's pyproject.toml for the edition: the same package and pytest settings, no reference among
    the packages, no instructor's extras (dev, parity) and no layer contracts naming packages it does not hold."""
    data = tomllib.loads((repository / "pyproject.toml").read_text())
    project = dict(data["project"])
    project["optional-dependencies"] = {k: v for k, v in project.get("optional-dependencies", {}).items()
                                        if k not in ("dev", "parity")}
    tools = {key: value for key, value in data.get("tool", {}).items() if key != "importlinter"}
    tools["setuptools"] = {**tools.get("setuptools", {}),
                           "packages": {"find": {"include": ["kata*", "exercises*"]}}}
    edition = {"build-system": data["build-system"], "project": project, "tool": tools}
    return ("# The student edition's project file, written by `kata release` from the instructor's repository.\n"
            + _toml_tables(edition))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _toml_key(key: str) -> str:
    return key if key and all(ch.isalnum() or ch in "-_" for ch in key) else _toml_value(key)


def _toml_tables(data: dict[str, Any], prefix: str = "") -> str:
    """``data`` as TOML: a table's plain values under its header, then each nested dict as a table of its own."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    text = (f"\n[{prefix}]\n" if prefix and lines else "") + "".join(line + "\n" for line in lines)
    for key, table in data.items():
        if isinstance(table, dict):
            text += _toml_tables(table, f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key))
    return text


# ---- the student's README ----------------------------------------------------------------------------------------


def student_readme() -> str:
    setup = "python3 -m venv .venv && .venv/bin/python -m pip install -r requirements.txt"
    rows = "\n".join(f"| {c.number} | `{c.name}` | {c.title} | {c.points:g} |" for c in CONCEPTS)
    return f"""# Policy gradients, from REINFORCE to PPO

A test-driven kata: each concept is a stub in `exercises/` that you fill in until its property tests go green. The
loops of concepts 5 and 8 train an agent and a tiny language model with *your* functions.

## On a fresh machine (Python 3.11 or newer, and pip)

`python3 --version` says which Python you have (3.11 to 3.14 work; where `python3` is older, name a newer one, e.g.
`python3.12`). `requirements.txt` pins torch 2.13.0, which has no wheel for Intel Macs or Windows on ARM. On Linux
x86_64 PyPI's default torch wheel is the CUDA build (several GB): get the CPU build first (macOS and Windows wheels
on PyPI are CPU builds already):

```bash
python3 -m venv .venv && .venv/bin/python -m pip install torch==2.13.0 --index-url {TORCH_INDEX}
```

Set up, then run the whole lab on your code (a section you have not written yet is skipped, with one line):

```bash
{setup} && .venv/bin/kata lab --impl exercises
```

Set up, then run the tests on your code (every test fails until you write its concept):

```bash
{setup} && .venv/bin/python -m pytest
```

On Windows (PowerShell or cmd), the set-up in two lines, then the lab or the tests:

```
python -m venv .venv
.venv\\Scripts\\python -m pip install -r requirements.txt
.venv\\Scripts\\kata lab --impl exercises
.venv\\Scripts\\python -m pytest
```

## How you work

```bash
kata list           # the concepts in order, their points and GUIDE.md sections
kata check          # the next unfinished concept's tests (or: kata check gae, or: pytest -m gae)
kata watch          # the same check again every time you save a file in exercises/ (Ctrl-C stops)
kata hint gae       # a nudge; --level 2, 3, ... come nearer the answer
kata status         # every concept: not started / failing k of n / done, and what is next
```

(`kata` is `.venv/bin/kata`, `.venv\\Scripts\\kata` on Windows, or activate the environment first: `source
.venv/bin/activate`.) Read a concept's
section of GUIDE.md and the docstring of its stub (the contract: shapes, dtypes, an example), then write the
arithmetic. A failing test says what property failed and shows the smallest input Hypothesis found. `kata check`
leaves out the tests marked `slow`, which train an agent (`kata check --slow` runs them); grading runs them.

| # | concept | what it is about | points |
|---|---|---|---|
{rows}

{len(CONCEPTS)} concepts, {MAX_POINTS:g} points.

## Grading

Every push runs `.github/workflows/classroom.yml`: one graded step per concept, worth its points when every test of
the concept passes on your `exercises/`, slow ones included. Your instructor may also grade your submission with
the course's own copy of the tests.
"""


# ---- the GitHub Classroom workflow -------------------------------------------------------------------------------


def grading_command(concept: Concept) -> str:
    """What a concept's graded step runs: every test of the concept, slow ones included, on exercises/, under the
    derandomized profile grading uses (every push meets the same examples)."""
    return (f"KATA_HYPOTHESIS_PROFILE=ci python -m pytest tests/test_{concept.name}.py -m {concept.name} "
            "--impl exercises -q -p no:cacheprovider --kata-no-progress")


def classroom_workflow() -> str:
    """The workflow file GitHub Classroom's autograding reads (.github/workflows/classroom.yml): set-up on the CPU
    build of torch, a command-grader step per concept carrying its points, and the reporter over all of them."""
    steps = []
    for c in CONCEPTS:
        steps.append(f"""      - name: "{c.number}. {c.name}"
        id: {c.name}
        uses: classroom-resources/autograding-command-grader@v1
        with:
          test-name: "{c.number}. {c.name}: {c.title}"
          command: {grading_command(c)}
          timeout: {GRADING_MINUTES}
          max-score: {c.points:g}
""")
    results = "".join(f'          {c.name.upper()}_RESULTS: "${{{{steps.{c.name}.outputs.result}}}}"\n'
                      for c in CONCEPTS)
    return f"""# Written by `kata release` from the course data: GitHub Classroom's autograding runs this on every push
# of a student's repository. One graded step per concept, worth its points when every test of the concept passes.
name: Autograding
"on":
  - push
  - repository_dispatch
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
      - name: Check out the submission
        uses: actions/checkout@v4
      - name: Set up Python 3.11
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install the kata on the CPU build of torch
        run: |
          python -m pip install torch==2.13.0 --index-url {TORCH_INDEX}
          python -m pip install -r requirements.txt
{"".join(steps)}      - name: Autograding Reporter
        uses: classroom-resources/autograding-grading-reporter@v1
        env:
{results}        with:
          runners: {",".join(c.name for c in CONCEPTS)}
"""
