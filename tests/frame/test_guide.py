"""GUIDE.md teaches without giving an answer away, and its links lead somewhere.

No line of a ``# BEGIN SOLUTION`` block of solutions/ appears in the code of GUIDE.md (inline spans, fenced and
indented blocks), nor in the student edition's guide, up to the names of its variables: every name is one token and
whitespace is ignored, so ``-(lp * adv.detach()).mean()`` is found however its names are spelt. Math in prose is
fine; code that is the answer is not. A line shaped like something the frame itself holds (``like_inputs(x, y)``)
says nothing of an answer and is not looked for, nor is a line of fewer than ``MIN_TOKENS`` tokens."""

from __future__ import annotations

import keyword
import re
from pathlib import Path

import pytest

from kata.catalogue import stubs
from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.concepts.manifest import CONCEPTS, concept
from kata.grading import release

pytestmark = pytest.mark.frame

MIN_TOKENS = 6  # `N(N, N)`-sized fragments are everywhere in the frame; an answer's line is longer
TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\*\*|//|[<>=!]=|\S")
ASSIGNMENT = re.compile(r"^\s*[\w.\[\], ()*]+?\s*(?:[-+*/]?=)(?!=)\s*(.+)$")


def normalised(code: str) -> tuple[str, ...]:
    """``code`` as tokens, every name (keywords aside) replaced by ``N``; whitespace and comments dropped."""
    code = code.split("  #")[0] if "  #" in code else code
    return tuple("N" if re.fullmatch(r"[A-Za-z_]\w*", t) and not keyword.iskeyword(t) else t
                 for t in TOKEN.findall(code))


def fragments(line: str) -> set[tuple[str, ...]]:
    """What of one line of code may be printed elsewhere: the line, its right-hand side, what it returns."""
    found = {normalised(line)}
    assigned = ASSIGNMENT.match(line)
    if assigned:
        found.add(normalised(assigned.group(1)))
    if line.strip().startswith("return "):
        found.add(normalised(line.strip()[len("return "):]))
    return {f for f in found if len(f) >= MIN_TOKENS}


def solution_lines(repository: Path = ROOT) -> dict[tuple[str, ...], str]:
    """Each normalised fragment of a ``# BEGIN SOLUTION`` line of solutions/ that the frame does not also hold,
    with the line it comes from."""
    inside: dict[tuple[str, ...], str] = {}
    outside: set[tuple[str, ...]] = set()
    for path in sorted((repository / "solutions").glob("*.py")):
        for block, line in stubs.answer_marked_lines(path.read_text()):
            stripped = line.strip()
            if stripped.startswith("#"):
                continue
            for fragment in fragments(line):
                if block:
                    inside.setdefault(fragment, f"{path.name}: {stripped}")
                else:
                    outside.add(fragment)
    frame = [*(repository / "kata").rglob("*.py"), *(repository / "tests").glob("*.py")]
    texts = [path.read_text() for path in frame]
    texts += [stub.text for stub in stubs.plan(CONCEPTS, repository / "solutions", repository / "exercises")]
    for text in texts:
        for line in text.splitlines():
            outside.update(fragments(line))
    return {fragment: line for fragment, line in inside.items() if fragment not in outside}


def code_of(markdown: str) -> list[str]:
    """The code a markdown text prints: fenced blocks, indented blocks and inline code spans, one entry a line."""
    code, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            code.append(line)
        else:
            code.extend(re.findall(r"`([^`]+)`", line))
    return code


def answers_printed(markdown: str, answers: dict[tuple[str, ...], str]) -> list[str]:
    printed = []
    for line in code_of(markdown):
        tokens = " " + " ".join(normalised(line)) + " "
        found = [(len(fragment), source) for fragment, source in answers.items()
                 if " " + " ".join(fragment) + " " in tokens]
        if found:  # one report a printed line: the longest answer it holds
            printed.append(f"{line.strip()!r} is {max(found)[1]!r}")
    return printed


@pytest.fixture(scope="module")
def answers():
    found = solution_lines()
    assert len(found) > 100, f"the search needs the answers' lines to look for: {len(found)} found"
    return found


def test_the_search_finds_an_answer_however_its_names_are_spelt(answers):
    printed = "`-(lp * adv.detach()).mean()` and\n\n    x = y.clamp_min(torch.finfo(y.dtype).min)\n"
    assert len(answers_printed(printed, answers)) == 2, (
        f"renamed answers are found: {answers_printed(printed, answers)}")
    assert not answers_printed("`like_inputs(loss, log_probs)` and `return x`", answers), (
        "what the frame holds, and short lines, are not answers")


def test_the_guide_prints_no_line_of_an_answer(answers):
    printed = answers_printed((ROOT / "GUIDE.md").read_text(), answers)
    assert not printed, f"GUIDE.md prints lines of the reference's answers (say it in math or prose): {printed}"


def test_the_student_editions_guide_prints_no_line_of_an_answer(answers):
    guide = release.student_guide((ROOT / "GUIDE.md").read_text())
    printed = answers_printed(guide, answers)
    assert not printed, f"the student edition's GUIDE.md prints lines of the reference's answers: {printed}"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("name", ["GUIDE.md", "docs/libraries.md"])
def test_every_link_of_the_guide_and_its_companion_leads_somewhere(name):
    path = ROOT / name
    text = path.read_text()
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.MULTILINE)
            if anchor not in {github_anchor(h) for h in headings}:
                broken.append(target)
    assert not broken, f"{name} links to files or headings that do not exist: {broken}"


def test_the_guide_names_its_eight_takeaways_near_the_top():
    guide = (ROOT / "GUIDE.md").read_text()
    top = guide[:guide.index(f"\n## {CONCEPTS[0].guide_heading}\n")]
    for c in CONCEPTS:
        assert f"](#{github_anchor(c.guide_heading)})" in top, (
            f"the takeaways before §1 link to {c.name}'s section, #{github_anchor(c.guide_heading)}")


GUIDE_LIMIT = 35_000  # characters: a study guide read in an evening; the libraries' details are docs/libraries.md


def test_the_guide_stays_a_study_guide():
    size = len((ROOT / "GUIDE.md").read_text(encoding="utf-8"))
    assert size <= GUIDE_LIMIT, (
        f"GUIDE.md holds {size} characters, over {GUIDE_LIMIT}: move library details to docs/libraries.md and "
        "figures to docs/benchmarks.md")


# ---- the common mistakes -----------------------------------------------------------------------------------------
# A section's "**Common mistakes.**" paragraph is the guide's short list of its concept's catalogue: each item (the
# parts between semicolons and commas, an aside in parentheses left out) is written in the words of one mistake of
# kata/concepts/course.toml, its name or its misunderstanding, so that the list cannot drift from the catalogue.

COMMON_MISTAKES = "**Common mistakes.**"
FILLER = set("a an and are as at be by for from has in into is it its of on or than that the their they this to "
             "was were when with".split())
SPELLED = {"γ": " gamma ", "λ": " lambda ", "ε": " eps ", "π": " pi "}


def word_stems(text: str) -> set[str]:
    """The words of ``text`` that carry meaning, lower case, each cut to a rough stem (bootstrapping, bootstraps:
    bootstrap), possessives dropped and Greek letters spelt as the course data spells them."""
    text = re.sub(r"['’]s\b", "", text.lower())
    for letter, word in SPELLED.items():
        text = text.replace(letter, word)
    stems = set()
    for word in re.findall(r"[a-z0-9]+|[<>=]+", text):
        for ending in ("ing", "ed", "es", "s"):
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                word = word[:-len(ending)]
                break
        if len(word) > 3 and word[-1] == word[-2]:  # runn(ing), cutt(ing)
            word = word[:-1]
        stems.add(word)
    return stems - FILLER


def common_mistakes(section: str) -> list[str]:
    """The items of a section's common-mistakes paragraph ([] when it has none)."""
    if COMMON_MISTAKES not in section:
        return []
    paragraph = section.split(COMMON_MISTAKES, 1)[1].split("\n\n", 1)[0].replace("\n", " ").replace("`", "")
    paragraph = re.sub(r"\s\([^)]*\)", "", paragraph)
    return [item.strip(" .") for item in re.split(r";|, or | or |, ", paragraph) if item.strip(" .")]


@pytest.mark.parametrize("name", [c.name for c in CONCEPTS])
def test_the_guides_common_mistakes_are_catalogued_mistakes(name):
    c = concept(name)
    guide = (ROOT / "GUIDE.md").read_text(encoding="utf-8")
    section = guide.split(f"\n## {c.guide_heading}\n", 1)[1].split("\n## ", 1)[0]
    items = common_mistakes(section)
    assert items, f"GUIDE.md's section {c.guide_heading!r} lists its common mistakes after {COMMON_MISTAKES}"
    catalogue = {m.name: word_stems(f"{m.name.replace('_', ' ')} {m.misunderstanding}") for m in c.mistakes}
    for item in items:
        closest = min(catalogue, key=lambda m: len(word_stems(item) - catalogue[m]))
        missing = sorted(word_stems(item) - catalogue[closest])
        assert not missing, (
            f"GUIDE.md §{c.number} names the common mistake {item!r}, which is no catalogued mistake of {name} in "
            f"kata/concepts/course.toml: the closest, {closest}, has no word for {missing}; write the item in the "
            "catalogue's words, or catalogue the mistake")
