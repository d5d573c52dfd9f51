"""Apply a unified diff to a text by its content: how a catalogue entry becomes a module.

A catalogue entry (``mistakes/<concept>/<name>.diff``, ``variants/<concept>/<name>.diff``) is a unified diff of
``solutions/<concept>.py``, as ``diff -u`` or ``git diff`` print it. Each hunk is found by its content (its context
and removed lines, in order), never by the line numbers of its ``@@`` header, and must be found exactly once in the
text as the hunks before it left it; those lines are replaced by its context and added lines. Everything before
the first ``@@`` (the ``---``/``+++`` header) is not read. A hunk found nowhere, or more than once, is a
:class:`PatchError` that names the patch and shows the hunk: the reference changed under it, and the patch must be
written again as a diff of the reference as it is now.
"""

from __future__ import annotations

from dataclasses import dataclass


class PatchError(ValueError):
    """A patch that is malformed or does not apply; the message names the patch and shows the hunk."""


@dataclass(frozen=True)
class Hunk:
    header: str  # the "@@ -a,b +c,d @@" line, for messages only
    lines: tuple[str, ...]  # each with its ' ', '-' or '+'

    @property
    def old(self) -> list[str]:
        """The context and removed lines: what the hunk is found by."""
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new(self) -> list[str]:
        """The context and added lines: what replaces them."""
        return [line[1:] for line in self.lines if line[0] in " +"]

    def __str__(self) -> str:
        return "\n".join((self.header, *self.lines))


def hunks(patch: str, name: str = "<patch>") -> list[Hunk]:
    """The hunks of a one-file unified diff, in order."""
    found: list[tuple[str, list[str]]] = []
    for number, line in enumerate(patch.rstrip("\n").splitlines(), start=1):
        if line.startswith("@@"):
            found.append((line, []))
        elif not found or line.startswith("\\"):  # the file header; "\ No newline at end of file"
            continue
        elif line == "":  # a blank context line whose space an editor took off
            found[-1][1].append(" ")
        elif line[0] in " -+":
            found[-1][1].append(line)
        else:
            raise PatchError(f"{name}:{number}: {line!r} is not a line of a hunk (a patch changes one file)")
    if not found:
        raise PatchError(f"{name}: no hunk ('@@ ... @@') in it")
    return [Hunk(header, tuple(lines)) for header, lines in found]


def apply(text: str, patch: str, name: str = "<patch>", target: str = "<text>") -> str:
    """``text`` with every hunk of ``patch`` applied; ``name`` and ``target`` are what a PatchError calls them."""
    lines = text.splitlines()
    found = hunks(patch, name)
    for index, hunk in enumerate(found, start=1):
        old = hunk.old
        starts = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old] if old else []
        if len(starts) != 1:
            at = ", ".join(str(i + 1) for i in starts)
            where = f"{len(starts)} times (at lines {at})" if starts else "nowhere"
            raise PatchError(
                f"{name}: hunk {index} of {len(found)} does not apply to {target}: its {len(old)} context and removed "
                f"lines are found {where}, and must be found exactly once. The reference changed under the patch: "
                f"write it again as a diff of {target} as it is now.\n{hunk}")
        lines[starts[0]:starts[0] + len(old)] = hunk.new
    return "\n".join(lines) + "\n"
