"""The catalogue's commands: ``kata stubs``, ``diagnose``, ``mistakes``, ``variants`` and ``selfcheck``.

``stubs`` is parsed here; the other four parse their own options (``DELEGATED``): kata.cli hands them the rest of
the command line unchanged. They need the answers (solutions/, mistakes/, variants/), which only the instructor's
repository holds.
"""

from __future__ import annotations

import argparse

from kata.catalogue import stubs

DELEGATED = {
    "diagnose": ("kata.catalogue.diagnose", "name the catalogued mistake each of your functions behaves like, by "
                 "running it beside the reference and the mistakes on fixed probes (`kata diagnose --help`)"),
    "mistakes": ("kata.catalogue.mistakes", "run each concept's tests against every wrong implementation in "
                 "mistakes/ and fail if one survives (`kata mistakes --help`)"),
    "variants": ("kata.catalogue.variants", "run each concept's tests, slow ones included, against every valid "
                 "variant in variants/ and fail if one is rejected (`kata variants --help`)"),
    "selfcheck": ("kata.catalogue.selfcheck", "check that every concept test fails on the untouched stubs of "
                  "exercises/ with the one-line message (`kata selfcheck --help`)"),
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``stubs`` and the delegated commands to the subcommands of kata.cli's parser."""
    p = sub.add_parser("stubs", help="write exercises/ from solutions/ (--check: only compare)",
                       description=stubs.DESCRIPTION)
    stubs.add_arguments(p)
    p.set_defaults(handler=stubs.command)
    for command, (_, text) in DELEGATED.items():
        sub.add_parser(command, help=text, add_help=False)
