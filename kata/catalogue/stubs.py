"""Write the stubs of ``exercises/`` from the reference in ``solutions/``: each concept has one source.

In ``solutions/<concept>.py`` the student's part is marked, and the stub's text is written next to it::

    rewards_t = as_float_tensor(rewards, ...)     kept: the checks are the stub's too
    # BEGIN SOLUTION
    deltas = ...                                  left out of the stub
    return like_inputs(...)
    # END SOLUTION
    # BEGIN STUB
    # # rewards_t, values_t: checked tensors ...  the stub's lines, commented once: "# " comes off
    # raise not_implemented("gae_advantages")
    # END STUB

Every other line is copied as it is, except the module docstring's first line, which the stub gets from the course
data: "Exercise 3 — <title> (GUIDE.md §3)." (a solution's own first line says what it is: "The reference for ...").
A marker stands alone on its line; the lines of a STUB block are indented at least as far as its
``# BEGIN STUB`` and start with ``#`` there (a bare ``#`` is a blank line). SOLUTION and STUB blocks do not nest. The
stub must compile, or nothing is written.

    kata stubs [CONCEPT ...]           write exercises/<concept>.py from solutions/<concept>.py
    kata stubs --check [CONCEPT ...]   only read: fail if a committed stub differs from what would be written
    kata stubs --force [CONCEPT ...]   overwrite a stub that differs, keeping a copy <file>.bak-<UTC time>

Without ``--force`` a stub that differs from what would be written (a student's work, or a stub written by hand)
is never overwritten.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kata.concepts.impl import REPOSITORY_ROOT
from kata.concepts.arguments import concept_argument
from kata.concepts.manifest import CONCEPTS, Concept
from kata.concepts.sources import stub_functions

BEGIN_SOLUTION, END_SOLUTION = "# BEGIN SOLUTION", "# END SOLUTION"
BEGIN_STUB, END_STUB = "# BEGIN STUB", "# END STUB"
_OPENS = {BEGIN_SOLUTION: END_SOLUTION, BEGIN_STUB: END_STUB}


def answer_marked_lines(solution: str) -> Iterator[tuple[bool, str]]:
    """Each line of ``solution`` but the solution markers themselves, with whether it stands inside a
    ``# BEGIN SOLUTION`` block: the answer a stub leaves out, which nothing a student reads may print."""
    inside = False
    for line in solution.splitlines():
        if line.strip() in (BEGIN_SOLUTION, END_SOLUTION):
            inside = line.strip() == BEGIN_SOLUTION
            continue
        yield inside, line


class StubMarkupError(ValueError):
    """A solution's markers are malformed; the message names the file and line."""


def stub_header(concept: Concept) -> str:
    """The first line of a stub's docstring: ``Exercise 3 — <title> (GUIDE.md §3).``, from the course data."""
    return f"Exercise {concept.number} — {concept.title} ({concept.guide_section})."


def stub_text(solution: str, source: str = "<solution>", header: str | None = None) -> str:
    """The stub written from one solution module's text (see the module docstring for the markers); ``header``
    replaces the first line of the module docstring."""
    lines: list[str] = []
    block: str | None = None  # the marker that opened the current block
    opened_at, indent = 0, ""
    for number, line in enumerate(solution.splitlines(keepends=True), start=1):
        marker = line.strip()
        if marker in _OPENS:
            if block is not None:
                raise StubMarkupError(f"{source}:{number}: {marker} inside the {block} of line {opened_at}")
            block, opened_at, indent = marker, number, line[: len(line) - len(line.lstrip())]
        elif marker in _OPENS.values():
            if block is None or _OPENS[block] != marker:
                raise StubMarkupError(f"{source}:{number}: {marker} closes no {marker.replace('END', 'BEGIN')}")
            block = None
        elif block == BEGIN_STUB:
            lines.append(_uncommented(line, indent, f"{source}:{number}"))
        elif block is None:
            lines.append(line)
    if block is not None:
        raise StubMarkupError(f"{source}:{opened_at}: {block} is never closed by {_OPENS[block]}")
    if header is not None:
        if not lines or not lines[0].startswith('"""'):
            raise StubMarkupError(f"{source}:1: a concept module starts with its docstring")
        closes = lines[0].rstrip("\n").endswith('"""') and len(lines[0].strip()) > 3
        lines[0] = f'"""{header}' + ('"""\n' if closes else "\n")
    text = "".join(lines)
    try:
        compile(text, source, "exec")
    except SyntaxError as error:
        raise StubMarkupError(f"{source}: the stub written from it does not compile: {error}") from None
    return text


def _uncommented(line: str, indent: str, where: str) -> str:
    """A STUB block's line with one level of comment taken off: ``    # raise x`` -> ``    raise x``."""
    newline = "\n" if line.endswith("\n") else ""
    body = line.rstrip("\n")
    if body.strip() == "":
        return newline
    if not body.startswith(indent + "#"):
        raise StubMarkupError(f"{where}: a line of a STUB block must start with '#' at the marker's indentation")
    rest = body[len(indent) + 1:]
    if rest == "":
        return newline
    if not rest.startswith(" "):
        raise StubMarkupError(f"{where}: a STUB block's '#' must be followed by a space or end the line")
    return indent + rest[1:] + newline


@dataclass(frozen=True)
class Stub:
    """One concept's stub: where it goes, what the generator writes there, and what is there now."""

    concept: Concept
    path: Path
    text: str
    current: str | None

    @property
    def state(self) -> str:
        if self.current is None:
            return "missing"
        return "same" if self.current == self.text else "differs"

    @property
    def written(self) -> tuple[str, ...]:
        """The functions this stub leaves to the student that the file there now holds without the stub's
        ``raise``: a student's work, which no message of this module sends anyone to overwrite. A file that does not
        parse is counted as work throughout."""
        if self.current is None or self.state == "same":
            return ()
        generated, now = stub_functions(self.text), stub_functions(self.current)
        left = sorted(generated[1]) if generated else []
        if now is None:
            return tuple(left) or ("the whole file",)
        defined, still_stubs = now
        return tuple(name for name in left if name in defined and name not in still_stubs)

    def diff(self) -> list[str]:
        return list(difflib.unified_diff(
            (self.current or "").splitlines(keepends=True), self.text.splitlines(keepends=True),
            f"{self.path.name} (now)", f"{self.path.name} (from the solution)"))


def plan(concepts: Sequence[Concept] = CONCEPTS, solutions: Path = REPOSITORY_ROOT / "solutions",
         exercises: Path = REPOSITORY_ROOT / "exercises") -> list[Stub]:
    """Each concept's stub as the generator would write it; reads only."""
    stubs = []
    for concept in concepts:
        source = solutions / f"{concept.name}.py"
        path = exercises / f"{concept.name}.py"
        text = stub_text(source.read_text(encoding="utf-8"), str(source), stub_header(concept))
        current = path.read_text(encoding="utf-8") if path.exists() else None
        stubs.append(Stub(concept, path, text, current))
    return stubs


def check(stubs: Sequence[Stub]) -> int:
    """Print the difference of every stub that is not what the generator writes; 0 when none differs."""
    stale = [stub for stub in stubs if stub.state != "same"]
    for stub in stale:
        if stub.current is None:
            print(f"{stub.path}: missing")
        else:
            print("".join(stub.diff()), end="")
    work = [stub for stub in stale if stub.written]
    if stale:
        print(f"kata stubs --check: {len(stale)} of {len(stubs)} stubs are not what solutions/ gives: "
              f"{', '.join(stub.concept.name for stub in stale)}.")
        if len(work) < len(stale):
            print("Where solutions/ changed: edit solutions/ (the one source), then run `kata stubs` (`--force` "
                  "where a stub without written code was changed by hand; it keeps a copy).")
        for stub in work:
            print(f"{stub.path} holds written code ({', '.join(stub.written)}): a student's work, which is theirs "
                  "to keep; it is not a stub any more.")
        return 1
    print(f"kata stubs --check: all {len(stubs)} stubs are what solutions/ gives")
    return 0


def write(stubs: Sequence[Stub], force: bool = False, now: datetime | None = None) -> int:
    """Write every missing or outdated stub; one that differs only with ``force``, keeping a dated copy.

    Returns 0, or 1 when a stub was left alone because it differs and ``force`` was not given.
    """
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    refused = []
    for stub in stubs:
        if stub.state == "same":
            continue
        if stub.state == "differs":
            if not force:
                refused.append(stub)
                continue
            copy = stub.path.with_name(f"{stub.path.name}.bak-{stamp}")
            copy.write_text(stub.current or "", encoding="utf-8")
            print(f"kept {copy}")
        stub.path.parent.mkdir(parents=True, exist_ok=True)
        stub.path.write_text(stub.text, encoding="utf-8")
        print(f"wrote {stub.path}")
    for stub in refused:
        changed = sum(1 for line in stub.diff() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        said = f"left {stub.path} alone: it differs from what solutions/{stub.concept.name}.py gives ({changed} lines)"
        if stub.written:
            print(f"{said} and holds written code ({', '.join(stub.written)}): a student's work stays as it is; "
                  "`kata stubs --check` shows the difference")
        else:
            print(f"{said}; `kata stubs --check` shows how; it holds no written function, so `kata stubs --force` "
                  "may rewrite it (keeping a copy)")
    written = sum(stub.state != "same" for stub in stubs) - len(refused)
    print(f"kata stubs: {written} written, {len(refused)} left alone, "
          f"{sum(stub.state == 'same' for stub in stubs)} already up to date")
    return 1 if refused else 0


def main(concepts: Sequence[Concept] = (), check_only: bool = False, force: bool = False) -> int:
    stubs = plan(concepts or CONCEPTS)
    return check(stubs) if check_only else write(stubs, force=force)


DESCRIPTION = (
    "Write each stub exercises/CONCEPT.py from solutions/CONCEPT.py, whose # BEGIN SOLUTION / # END SOLUTION blocks "
    "are left out and whose # BEGIN STUB / # END STUB blocks are uncommented (CONTRIBUTING.md, 'A stub'). A stub "
    "that differs from what would be written is left alone unless --force.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``kata stubs`` (and of ``python -m kata.catalogue.stubs``)."""
    names = ", ".join(c.name for c in CONCEPTS)
    parser.add_argument("concepts", nargs="*", type=concept_argument, metavar="CONCEPT",
                        help=f"one of: {names} (default: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 and show the difference if a stub is not what solutions/ gives")
    mode.add_argument("--force", action="store_true",
                      help="overwrite a stub that differs, keeping a copy beside it (<file>.bak-<UTC time>)")


def command(args: argparse.Namespace) -> int:
    """``kata stubs``: write the stubs, or with ``--check`` only compare them."""
    return main(args.concepts, check_only=args.check, force=args.force)


if __name__ == "__main__":
    import sys

    parser = argparse.ArgumentParser(prog="python -m kata.catalogue.stubs", description=DESCRIPTION)
    add_arguments(parser)
    sys.exit(command(parser.parse_args()))
