"""What grading finds, per concept and per submission, and the reports that say it (Markdown, JSON, CSV, Gradescope).

Each concept has two statuses. ``status`` grades the concept on the submission's own module for it, with the
reference's modules for the concepts it builds on (the default), so one broken early concept costs only its own
points. ``chained_status`` is the same concept with the submission's own earlier concepts (what ``kata grade
--chained`` scores): where the two differ, every report says so in one sentence ("ppo_cartpole passes on its own
code; with your gae it fails (gae is wrong)").

Every report is written atomically (a temporary file renamed over the old one), so a grader stopped at any moment
leaves the previous complete report, never a truncated one. A submission not graded (yet) has blank cells, never 0.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.concepts.manifest import CONCEPTS, Concept, catalogued_mistake

STATUSES = ("passed", "failed", "not attempted", "error", "timeout")
VERBS = {"passed": "passes", "failed": "fails", "not attempted": "is still the stub", "error": "does not load",
         "timeout": "hangs"}


@dataclass
class ConceptResult:
    points: float
    max_points: float
    passed: int
    failed: int
    status: str  # one of STATUSES: on the concept's own code (or all the submission's, --chained)
    message: str
    chained_status: str = ""  # with the submission's own earlier concepts; "" until known
    chained_message: str = ""  # the sentence that says how the two differ; "" when they agree
    # Further per-concept findings, each under its own key (for example a diagnosis); reports carry them as they are.
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        data = {name: value for name, value in vars(self).items() if name != "extra"}
        data["chained_status"] = self.chained_status or self.status
        return {**data, **self.extra}


@dataclass
class SubmissionResult:
    submission: str  # the folder as given, printable (bytes a file name may hold that are not UTF-8 escaped)
    concepts: dict[str, ConceptResult] = field(default_factory=dict)
    graded: bool = True
    notes: list[str] = field(default_factory=list)  # what the grader saw happen: files changed, limits reached

    @property
    def total(self) -> float:
        return round(sum(result.points for result in self.concepts.values()), 6)

    @property
    def max_total(self) -> float:
        return float(sum(result.max_points for result in self.concepts.values()))

    def as_json(self) -> dict[str, Any]:
        return {
            "submission": self.submission,
            "graded": self.graded,
            "total": self.total if self.graded else None,
            "max_total": self.max_total if self.graded else None,
            "notes": list(self.notes),
            "concepts": {name: result.as_json() for name, result in self.concepts.items()},
        }


def printable(path: str | os.PathLike[str]) -> str:
    """A folder's name as text any report can hold: bytes that are not UTF-8 become ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def not_graded(submission: str, why: str) -> SubmissionResult:
    return SubmissionResult(printable(submission), graded=False, notes=[why])


def error_result(concept: Concept, message: str, status: str = "error") -> ConceptResult:
    return ConceptResult(0.0, float(concept.points), 0, 0, status, message)


def concept_result(concept: Concept, summary: dict[str, Any] | None) -> ConceptResult:
    """Points and status of one concept from the plugin's per-concept summary (see kata.testing.progress)."""
    max_points = float(concept.points)
    if not summary or not summary.get("collected"):
        return error_result(concept, f"no test of {concept.name} ran (are tests/test_{concept.name}.py there?)")
    passed, failed = int(summary["passed"]), int(summary["failed"])
    message = summary.get("message", "")
    if summary.get("timeout"):
        return ConceptResult(0.0, max_points, passed, failed, "timeout", message)
    if summary.get("import_error") or summary.get("setup_error", 0) >= summary["collected"]:
        # The module did not load, so no test of it ran: no test failed, the concept is an error, said in one line.
        return error_result(concept, message or f"no test of {concept.name} could run")
    if passed + failed == 0:
        return ConceptResult(0.0, max_points, 0, 0, "error", f"every {concept.name} test was skipped")
    points = round(max_points * passed / (passed + failed), 6)
    return ConceptResult(points, max_points, passed, failed, "passed" if failed == 0 else "failed", message)


def mark_not_attempted(r: ConceptResult, module: Path, reference: Path | None) -> None:
    """``failed`` becomes ``not attempted`` where ``module`` is an untouched stub: no test passed, and its source
    (read, not imported) holds no function of the student's own: every function it defines still raises the
    stub's ``not_implemented(...)`` or is the code the reference gives ready-made (``kata status``'s "not
    started"), so every test failed on the stub's "not implemented yet" line."""
    from kata.concepts.sources import analyse_source  # the ast only: no import of the module

    if r.status == "failed" and r.passed == 0 and analyse_source(module, reference).not_started:
        r.status = "not attempted"


def chained_sentence(name: str, own: str, chained: str, culprits: Sequence[tuple[str, str]]) -> str:
    """"ppo_cartpole passes on its own code; with your gae it fails (gae is wrong)"."""
    yours = " and ".join(culprit for culprit, _ in culprits)
    why = ", ".join(f"{culprit} {'is wrong' if status == 'failed' else VERBS[status]}"
                    for culprit, status in culprits)
    return f"{name} {VERBS[own]} on its own code; with your {yours} it {VERBS[chained]} ({why})"


# ---- reports -----------------------------------------------------------------------------------------------------


def to_json(results: Sequence[SubmissionResult]) -> dict[str, Any]:
    return {"submissions": [result.as_json() for result in results]}


def to_csv(results: Sequence[SubmissionResult], concepts: Sequence[Concept] = CONCEPTS) -> str:
    """One row per submission: its points in each concept, the total, the maximum, each concept's status (passed,
    failed, not attempted, error, timeout: an error is code that did not load, not a test that failed), each
    concept's message (the first failure of every concept not passed; blank for one passed), the diagnoses and the
    notes (blank if not graded). A note every graded submission shares is the run's, not a row's: the Markdown and
    JSON reports carry it."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["submission", *(c.name for c in concepts), "total", "max_total",
                     *(f"{c.name} status" for c in concepts), *(f"{c.name} message" for c in concepts),
                     "diagnoses", "notes"])
    shared = shared_notes(results)
    for result in results:
        if not result.graded:
            writer.writerow([result.submission, *([""] * (3 * len(concepts) + 3)), "; ".join(result.notes)])
            continue
        mine = [result.concepts.get(c.name) for c in concepts]
        cells = [format_points(r.points) if r else "" for r in mine]
        statuses = [r.status if r else "" for r in mine]
        messages = [r.message if r and r.status != "passed" else "" for r in mine]
        diagnoses = [m for r in mine if r for m in diagnoses_of(r)]
        writer.writerow([result.submission, *cells, format_points(result.total), format_points(result.max_total),
                         *statuses, *messages, " ".join(diagnoses),
                         "; ".join(note for note in _notes(result) if note not in shared)])
    return stream.getvalue()


def shared_notes(results: Sequence[SubmissionResult]) -> list[str]:
    """The notes every graded submission carries, where two or more were graded: the run's (bwrap cannot start
    here), said once per report instead of on every row."""
    graded = [result for result in results if result.graded]
    if len(graded) < 2:
        return []
    return [note for note in graded[0].notes if all(note in result.notes for result in graded[1:])]


def diagnoses_of(r: ConceptResult) -> list[str]:
    """The catalogued mistakes ("concept/name") the concept's functions behave like (``kata grade`` diagnoses)."""
    return list(r.extra.get("diagnoses", []))


def diagnosis_line(mistake: str) -> str:
    """"your code behaves like the catalogued mistake '...' (gae/...): `kata hint gae --level 2`"."""
    entry = catalogued_mistake(mistake)
    return (f"your code behaves like the catalogued mistake '{entry.misunderstanding}' ({mistake}): "
            f"`kata hint {mistake.partition('/')[0]} --level {entry.hint}`")


def _notes(result: SubmissionResult) -> list[str]:
    return [*result.notes, *(r.chained_message for r in result.concepts.values() if r.chained_message)]


def gradescope_output(concept: Concept, r: ConceptResult) -> str:
    """What a student reads under one concept: the counts, the first failure, how the chain differs, what to run."""
    if r.status == "error":  # the code did not load: no test ran, so none passed or failed
        output = f"error: {r.message}"
    elif r.status == "not attempted":
        output = (f"not attempted: {concept.name}.py is still the stub as handed out (0 of {r.failed} tests "
                  f"passed)\nfirst failure: {r.message}")
    else:
        output = f"{r.status}: {r.passed} of {r.passed + r.failed} tests passed"
        if r.message:
            output += f"\nfirst failure: {r.message}"
    if r.chained_message:
        output += f"\n{r.chained_message}"
    output += "".join(f"\n{diagnosis_line(mistake)}" for mistake in diagnoses_of(r))
    return output + f"\nread {concept.guide_section}; run `kata check {concept.name} --slow` to see every failure"


def to_gradescope(result: SubmissionResult, concepts: Sequence[Concept] = CONCEPTS) -> dict[str, Any]:
    """Gradescope's ``results.json``: a test per concept (name, score, max_score, output, visibility), the score."""
    tests = [{"name": f"{c.number}. {c.name}: {c.title}", "score": result.concepts[c.name].points,
              "max_score": result.concepts[c.name].max_points,
              "output": gradescope_output(c, result.concepts[c.name]), "visibility": "visible"}
             for c in concepts if c.name in result.concepts]
    data: dict[str, Any] = {"score": result.total, "tests": tests, "visibility": "visible"}
    if result.notes or not result.graded:
        data["output"] = "\n".join(result.notes)
    return data


def markdown(results: Sequence[SubmissionResult], concepts: Sequence[Concept] = CONCEPTS) -> str:
    """A summary table (a row per submission), then what went wrong in each, concept by concept."""
    names = [c.name for c in concepts]
    lines = ["| submission | " + " | ".join(names) + " | total |",
             "|---|" + "---:|" * len(names) + "---:|"]
    for result in results:
        cells = []
        for name in names:
            r = result.concepts.get(name)
            cells.append("" if r is None else f"{format_points(r.points)}/{format_points(r.max_points)}"
                         + ("" if r.status == "passed" else f" {r.status}")
                         + (f" (chained: {r.chained_status})" if r.chained_message else ""))
        total = f"{format_points(result.total)}/{format_points(result.max_total)}" if result.graded else ""
        lines.append(f"| {_cell(result.submission)} | " + " | ".join(cells) + f" | {total} |")
    shared = shared_notes(results)
    if shared:
        lines += ["", "Every submission:"] + [f"- {_cell(note)}" for note in shared]
    for result in results:
        problems = [(name, r) for name, r in result.concepts.items() if r.status != "passed" or r.chained_message]
        notes = [note for note in result.notes if note not in shared]
        if not problems and not notes:
            continue
        lines += ["", f"{result.submission}:"]
        lines += [f"- {_cell(note)}" for note in notes]
        for name, r in problems:
            if r.status == "error":  # the code did not load: one line, its message, no count of tests
                lines.append(f"- {name} (error): {_cell(r.message)}")
            elif r.status != "passed":
                counts = f"{r.passed} of {r.passed + r.failed} passed" if r.passed + r.failed else "no test ran"
                lines.append(f"- {name} ({r.status}, {counts}): {_cell(r.message)}")
                lines += [f"- {name}: {_cell(diagnosis_line(mistake))}" for mistake in diagnoses_of(r)]
            if r.chained_message:
                lines.append(f"- {_cell(r.chained_message)}")
    return "\n".join(lines) + "\n"


def format_points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_reports(
    results: Sequence[SubmissionResult],
    *,
    json_path: str | None = None,
    csv_path: str | None = None,
    gradescope_path: str | None = None,
    markdown_path: str | None = None,
    concepts: Sequence[Concept] = CONCEPTS,
) -> list[Path]:
    """Write every requested report, each atomically; returns the paths written."""
    written = []
    if json_path:
        written.append(write_atomically(json_path, json.dumps(to_json(results), indent=2) + "\n"))
    if csv_path:
        written.append(write_atomically(csv_path, to_csv(results, concepts)))
    if markdown_path:
        written.append(write_atomically(markdown_path, markdown(results, concepts)))
    if gradescope_path and results:
        text = json.dumps(to_gradescope(results[0], concepts), indent=2) + "\n"
        written.append(write_atomically(gradescope_path, text))
    return written


def write_atomically(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``.

    The file gets the mode any file written here would (0644 under the usual umask 022), like the class report
    beside it: mkstemp's own 0600 would make the grades readable by their writer alone, by accident. A folder that
    must stay private is kept so by its own mode (docs/grading.md)."""
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, 0o666 & ~current_umask())
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def current_umask() -> int:
    """The process's umask (reading it means setting it: it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
