"""Where a student stands, without running a single test: the state behind ``kata status`` and ``kata check``.

Two sources, both cheap to read (this module imports neither torch nor pytest, so ``kata status`` answers at once):

- the source of ``exercises/<concept>.py``, parsed (never imported): which functions still raise
  ``not_implemented`` (stubs) and which the student has written;
- the last test results the pytest plugin :mod:`kata.testing.progress` recorded (:mod:`kata.testing.record`), each
  concept's results stamped with a fingerprint of the files they depend on. A result whose fingerprint no longer
  matches is stale: the student changed the code since, and the state says so.

A concept's state is one of: ``not started``, ``failing k of n``, ``passing k, m not run yet``, ``fast tests green;
`kata check NAME --slow` trains the agent, and grading runs it``, ``done``,
``changed since last check``, ``not checked yet``, ``missing``, ``syntax error``. ``done`` means every test of the
concept that is not marked ``slow`` has passed on the current code (slow integration tests count only when run,
with ``kata check --slow``); a concept that failed any test it ran is not done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.manifest import CONCEPTS, Concept
from kata.concepts.sources import analyse_source
from kata.testing.record import ConceptRecord, fingerprint, load_progress

@dataclass(frozen=True)
class ConceptState:
    concept: Concept
    label: str  # what `kata status` prints
    done: bool
    passed: int = 0
    failed: int = 0
    not_run: int = 0
    message: str = ""  # the first recorded failure, when the record is current


def concept_state(
    concept: Concept,
    *,
    exercises_dir: Path,
    tests_dir: Path,
    reference_dir: Path | None,
    records: Mapping[str, ConceptRecord],
) -> ConceptState:
    module = exercises_dir / f"{concept.name}.py"
    source = analyse_source(module, reference_dir / f"{concept.name}.py" if reference_dir else None)
    if not source.exists:
        return ConceptState(concept, f"missing ({module.parent.name}/{module.name} does not exist)", done=False)
    if source.syntax_error:
        return ConceptState(concept, f"syntax error ({source.syntax_error})", done=False)
    record = records.get(concept.name)
    current = record is not None and record.fingerprint == fingerprint(concept.name, exercises_dir, tests_dir)
    # An untouched stub can still pass a test (one that checks the arguments before the stub raises): any passing
    # test of the current code makes the concept "failing k of n", never "not started".
    if source.not_started and not (current and record.counts()[0]):
        return ConceptState(concept, "not started", done=False)
    stubs_left = f" ({len(source.stubs)} stub{'s' if len(source.stubs) != 1 else ''} left)" if source.stubs else ""
    if record is None:
        return ConceptState(concept, "not checked yet" + stubs_left, done=False)
    if not current:
        return ConceptState(concept, "changed since last check" + stubs_left, done=False)
    passed, failed, not_run = record.counts()
    counts = dict(passed=passed, failed=failed, not_run=not_run)
    if failed:
        label = f"failing {failed} of {passed + failed}" + (f", {not_run} not run yet" if not_run else "")
        return ConceptState(concept, label, done=False, message=record.first_failure(), **counts)
    if not_run or not passed:
        return ConceptState(concept, f"passing {passed}, {not_run} not run yet", done=False, **counts)
    if record.slow_not_run():
        return ConceptState(concept, slow_not_run_label(concept), done=True, **counts)
    return ConceptState(concept, "done", done=True, **counts)


def slow_not_run_label(concept: Concept) -> str:
    """What a concept whose fast tests all pass, and whose slow (training) tests have not run, says."""
    return f"fast tests green; `kata check {concept.name} --slow` trains the agent, and grading runs it"


PRISTINE = Path(__file__).with_name("pristine")  # a student edition's stubs as handed out (kata release writes them)


def given_code() -> Path:
    """Where the code a concept module is given ready-made can be read: the reference (the instructor's repository),
    or the stubs as handed out (a student edition, which holds no reference). A function equal to its copy there is
    not the student's work."""
    reference = REPOSITORY_ROOT / "solutions"
    return reference if reference.is_dir() or not PRISTINE.is_dir() else PRISTINE


def all_states(
    *,
    exercises_dir: Path | None = None,
    tests_dir: Path | None = None,
    reference_dir: Path | None = None,
    progress: Path | None = None,
    concepts: Iterable[Concept] = CONCEPTS,
) -> list[ConceptState]:
    """Every concept's state, in teaching order (defaults: this repository's folders and progress file)."""
    exercises_dir = exercises_dir or REPOSITORY_ROOT / "exercises"
    tests_dir = tests_dir or REPOSITORY_ROOT / "tests"
    reference_dir = reference_dir if reference_dir is not None else given_code()
    records = load_progress(progress)
    return [
        concept_state(c, exercises_dir=exercises_dir, tests_dir=tests_dir, reference_dir=reference_dir,
                      records=records)
        for c in concepts
    ]


def next_concept(states: Iterable[ConceptState]) -> Concept | None:
    """The first concept in teaching order that is not done; None when all are."""
    return next((state.concept for state in states if not state.done), None)
