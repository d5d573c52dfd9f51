"""The ``kata`` command: one parser, whose subcommands each tool package adds (``add_parsers``).

    kata list | hint | status | check | watch        the student's tools (kata.student.commands)
    kata lab                                         the lab end to end (kata.lab.commands)
    kata stubs | diagnose | mistakes | variants | selfcheck     the catalogue (kata.catalogue.commands)
    kata grade | autograder | release                grading (kata.grading.commands)

The catalogue and grading need the answers, so only the instructor's repository has them: where their package is
missing (the student edition), their commands say so in one line and exit 2. ``kata status`` imports nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from kata.concepts.manifest import CONCEPTS
from kata.lab import commands as lab_commands
from kata.student import commands as student_commands

# The instructor's tool packages and the commands each adds: listed here so that a repository without them can name
# its commands (tests/frame/test_cli.py keeps the lists equal to what the packages add).
INSTRUCTOR_TOOLS = {
    "kata.catalogue.commands": ("stubs", "diagnose", "mistakes", "variants", "selfcheck"),
    "kata.grading.commands": ("grade", "autograder", "release"),
}
INSTRUCTOR_ONLY = ("belongs to the instructor's repository (it needs the reference solutions and the catalogues, "
                   "which a student edition does not hold)")


def instructor_tools() -> dict[str, ModuleType | None]:
    """Each instructor tool package's commands module, or None where it is not installed."""
    found: dict[str, ModuleType | None] = {}
    for name in INSTRUCTOR_TOOLS:
        try:
            found[name] = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is None or not name.startswith(error.name):
                raise  # the package is there but imports something missing: that is a real error
            found[name] = None
    return found


def build_parser(tools: dict[str, ModuleType | None] | None = None) -> argparse.ArgumentParser:
    tools = instructor_tools() if tools is None else tools
    names = ", ".join(c.name for c in CONCEPTS)
    parser = argparse.ArgumentParser(
        prog="kata",
        description="Policy gradients from REINFORCE to PPO, test by test. A student works concept by concept "
        "(status, hint, check, watch); an instructor grades folders laid out like exercises/ (grade).",
        epilog=f"Concepts, in teaching order: {names}.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    student_commands.add_parsers(sub)
    lab_commands.add_parsers(sub)
    for name, module in tools.items():
        if module is not None:
            module.add_parsers(sub)
        else:
            for command in INSTRUCTOR_TOOLS[name]:
                sub.add_parser(command, help=f"(instructor) {INSTRUCTOR_ONLY}", add_help=False)
    return parser


def quiet_on_closed_pipe() -> None:
    """End quietly, as ``ls | head`` does, when the reader of the output closes it (``kata status | head``).

    The default action of SIGPIPE kills the process without a traceback; Python ignores the signal and raises
    BrokenPipeError instead. Only the command run from a shell asks for it: a test that calls :func:`main` in its own
    process keeps Python's behaviour."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        quiet_on_closed_pipe()
    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # where there is no SIGPIPE (Windows): Python's own advice, stdout to devnull, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def run(arguments: list[str]) -> int:
    tools = instructor_tools()
    command = arguments[0] if arguments else None
    for name, module in tools.items():
        if command in INSTRUCTOR_TOOLS[name] and module is None:
            print(f"kata {command}: {INSTRUCTOR_ONLY}", file=sys.stderr)
            return 2
        if module is not None and command in getattr(module, "DELEGATED", {}):  # they parse their own options
            delegate = importlib.import_module(module.DELEGATED[command][0])
            return int(delegate.main(arguments[1:]) or 0)
    parser = build_parser(tools)
    args = parser.parse_args(arguments)
    if args.command == "grade" and args.gradescope and len(args.submissions) > 1:
        parser.error("--gradescope writes one submission's results.json: give exactly one SUBMISSION")
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
