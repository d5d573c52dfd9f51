"""The class's misconceptions: how many submissions behave like each catalogued mistake, concept by concept.

``kata grade --class-report DIR`` counts the diagnoses the grader found (kata.catalogue.diagnose, run on each failed
concept) and writes three files to DIR:

- ``misconceptions.md``: per concept, each catalogued mistake found, the misunderstanding in the manifest's words,
  how many submissions hold it and which; largest first, so that an instructor sees what to re-teach. Given the
  grader's results, then a row per submission (every folder graded, an empty one's ``error`` included: each
  concept's status) and, concept by concept, every submission that did not pass it, with its status and its
  first message;
- ``misconceptions.json``: the same, ``{"submissions": N, "concepts": {NAME: [{"mistake", "misunderstanding",
  "count", "submissions"}]}, "results": [{"submission", "graded", "concepts": {NAME: {"status", "message"}}}]}``
  (``results`` given the grader's results);
- ``misconceptions.png``: a bar chart per concept (matplotlib, Agg).

A submission counts once per mistake, however many of its functions behave like it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kata.concepts.manifest import CONCEPTS, Concept, catalogued_mistake, concept

# submission -> concept name -> the mistakes ("concept/name") its functions behave like
Diagnosed = Mapping[str, Mapping[str, Sequence[str]]]


@dataclass
class MistakeCount:
    mistake: str
    misunderstanding: str
    submissions: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.submissions)


def misunderstanding(entry: str) -> str:
    """The manifest's sentence for ``"concept/name"``."""
    return catalogued_mistake(entry).misunderstanding


def from_results(results: Sequence) -> dict[str, dict[str, list[str]]]:
    """Each graded submission's diagnoses (``kata.grading.results.SubmissionResult``, graded with diagnosis on)."""
    from kata.grading.results import diagnoses_of

    return {r.submission: {name: diagnoses_of(c) for name, c in r.concepts.items() if diagnoses_of(c)}
            for r in results if r.graded}


def tally(diagnosed: Diagnosed, concepts: Sequence[Concept] = CONCEPTS) -> dict[str, list[MistakeCount]]:
    """Per concept (teaching order), each mistake held by at least one submission, largest count first."""
    table: dict[str, list[MistakeCount]] = {}
    for c in concepts:
        counts: dict[str, MistakeCount] = {}
        for submission, by_concept in diagnosed.items():
            for entry in dict.fromkeys(by_concept.get(c.name, ())):
                counts.setdefault(entry, MistakeCount(entry, misunderstanding(entry))).submissions.append(submission)
        table[c.name] = sorted(counts.values(), key=lambda m: (-m.count, m.mistake))
    return table


def outcomes(results: Sequence, concepts: Sequence[Concept] = CONCEPTS) -> list[dict]:
    """Every submission of the grader's results, graded or not: ``{"submission", "graded", "concepts": {NAME:
    {"status", "message"}}}``, the message blank for a concept passed."""
    return [{"submission": r.submission, "graded": r.graded,
             "concepts": {c.name: {"status": found.status, "message": "" if found.status == "passed" else found.message}
                          for c in concepts if (found := r.concepts.get(c.name)) is not None}}
            for r in results]


def to_json(diagnosed: Diagnosed, concepts: Sequence[Concept] = CONCEPTS, results: Sequence | None = None) -> dict:
    data: dict = {
        "submissions": len(diagnosed),
        "concepts": {name: [{"mistake": m.mistake, "misunderstanding": m.misunderstanding, "count": m.count,
                             "submissions": m.submissions} for m in counts]
                     for name, counts in tally(diagnosed, concepts).items()},
    }
    if results is not None:
        data["results"] = outcomes(results, concepts)
    return data


def outcome_lines(results: Sequence, concepts: Sequence[Concept] = CONCEPTS) -> list[str]:
    """A row per submission (each concept's status), then, per concept, every submission that did not pass it."""
    rows = outcomes(results, concepts)
    lines = ["## Every submission", "", "| submission | " + " | ".join(c.name for c in concepts) + " |",
             "|---|" + "---|" * len(concepts)]
    for row in rows:
        cells = [row["concepts"].get(c.name, {}).get("status", "" if row["graded"] else "not graded")
                 for c in concepts]
        lines.append(f"| {_cell(row['submission'])} | " + " | ".join(cells) + " |")
    lines += ["", "## What did not pass, concept by concept", ""]
    for c in concepts:
        missed = [(row["submission"], row["concepts"][c.name]) for row in rows
                  if c.name in row["concepts"] and row["concepts"][c.name]["status"] != "passed"]
        if missed:
            lines += [f"### {c.number}. {c.name}: {len(missed)} of {len(rows)} did not pass", ""]
            lines += [f"- {_cell(who)} ({r['status']}): {_cell(r['message'])}" for who, r in missed]
            lines.append("")
    if lines[-2] == "## What did not pass, concept by concept":
        lines += ["Every submission passed every concept.", ""]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(diagnosed: Diagnosed, concepts: Sequence[Concept] = CONCEPTS, results: Sequence | None = None) -> str:
    total = len(diagnosed)
    lines = ["# The class's misconceptions", "",
             f"{total} submission(s) diagnosed: how many behave like each catalogued mistake (`kata diagnose`), "
             "largest first. A submission counts once per mistake.", ""]
    table = tally(diagnosed, concepts)
    for c in concepts:
        counts = table[c.name]
        if not counts:
            continue
        lines += [f"## {c.number}. {c.name} ({c.guide_section})", ""]
        lines += ["| submissions | mistake | misunderstanding | who |", "|---:|---|---|---|"]
        for m in counts:
            who = ", ".join(m.submissions).replace("|", "\\|")
            lines.append(f"| {m.count} of {total} | `{m.mistake}` | {m.misunderstanding} | {who} |")
        lines.append("")
    clean = [f"{c.number}. {c.name}" for c in concepts if not table[c.name]]
    if clean:
        lines += [f"No catalogued mistake found in {'any concept' if len(clean) == len(concepts) else 'the others'}"
                  f": {', '.join(clean)}.", ""]
    if results is not None:
        lines += outcome_lines(results, concepts)
    return "\n".join(lines)


def plot(diagnosed: Diagnosed, path: Path, concepts: Sequence[Concept] = CONCEPTS) -> None:
    """One horizontal bar chart per concept with a mistake found, largest bar on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = {name: counts for name, counts in tally(diagnosed, concepts).items() if counts}
    rows = max(1, len(table))
    heights = [max(1.2, 0.45 * len(counts) + 0.8) for counts in table.values()] or [2.0]
    figure, axes = plt.subplots(rows, 1, figsize=(9, sum(heights)), squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    if not table:
        axes[0][0].text(0.5, 0.5, f"no catalogued mistake found in {len(diagnosed)} submission(s)",
                        ha="center", va="center")
        axes[0][0].axis("off")
    for axis, (name, counts) in zip(axes[:, 0], table.items()):
        labels = [m.mistake.partition("/")[2] for m in counts][::-1]
        axis.barh(labels, [m.count for m in counts][::-1], color="tab:red")
        axis.set_title(f"{concept(name).number}. {name}", loc="left", fontsize=10)
        axis.set_xlim(0, max(1, len(diagnosed)))
        axis.xaxis.get_major_locator().set_params(integer=True)
    axes[-1][0].set_xlabel(f"submissions (of {len(diagnosed)})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write(diagnosed: Diagnosed, folder: str | Path, concepts: Sequence[Concept] = CONCEPTS,
          results: Sequence | None = None) -> list[Path]:
    """misconceptions.md, .json and .png in ``folder`` (created if needed); returns the paths. ``results`` (the
    grader's, kata.grading.results.SubmissionResult) adds a row per submission and what did not pass."""
    target = Path(folder).expanduser()
    target.mkdir(parents=True, exist_ok=True)
    markdown, report, figure = (target / f"misconceptions.{suffix}" for suffix in ("md", "json", "png"))
    markdown.write_text(to_markdown(diagnosed, concepts, results))
    report.write_text(json.dumps(to_json(diagnosed, concepts, results), indent=2) + "\n")
    plot(diagnosed, figure, concepts)
    return [markdown, report, figure]
