"""The parity suite's configuration: the reference it proves, and one skip line when the libraries are missing.

The suite compares ``solutions/`` (the reference) with the libraries' own code; it needs the ``parity`` extra
(``pip install -e ".[parity]"``, see docs/parity.md). Without it, only ``test_libraries.py`` is collected, and it
skips with one line that names the command.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from .libraries import MISSING

if MISSING:
    # The comparison modules import the libraries at their top: without them, only the module that says so runs.
    collect_ignore = sorted(path.name for path in Path(__file__).parent.glob("test_*.py")
                            if path.name != "test_libraries.py")


@pytest.fixture(scope="session")
def reference() -> ModuleType:
    """The reference implementation, ``solutions``: this suite is the one place that proves the reference itself."""
    import solutions

    return solutions


class Ledger:
    """What each comparison measured, for the table printed after the run (docs/parity.md shows one)."""

    def __init__(self):
        self.rows: list[tuple[str, int, float, str]] = []

    def add(self, comparison: str, cases: int, largest_difference: float, verdict: str) -> None:
        self.rows.append((comparison, cases, largest_difference, verdict))


_LEDGER = Ledger()


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    """Each comparison adds a row: what was compared, the number of cases, the largest difference, the verdict."""
    return _LEDGER


def pytest_terminal_summary(terminalreporter) -> None:
    if not _LEDGER.rows:
        return
    terminalreporter.section("parity: comparisons")
    width = max(len(row[0]) for row in _LEDGER.rows)
    for comparison, count, difference, verdict in _LEDGER.rows:
        terminalreporter.write_line(f"{comparison:<{width}}  {count:>6}  {difference:9.2e}  {verdict}")
