"""Re-run a check whenever a Python file in a folder changes (polling: no extra dependency, works everywhere)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

Snapshot = dict[str, tuple[int, int]]


def snapshot(folder: Path) -> Snapshot:
    """Modification time and size of every ``.py`` file under ``folder`` (a file that vanishes is skipped)."""
    seen: Snapshot = {}
    for path in sorted(folder.rglob("*.py")):
        try:
            info = path.stat()
        except OSError:
            continue
        seen[str(path)] = (info.st_mtime_ns, info.st_size)
    return seen


def watch(
    check: Callable[[], object],
    folder: Path,
    *,
    interval: float = 0.5,
    max_runs: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    say: Callable[[str], None] = print,
) -> int:
    """Run ``check``, then again after every change under ``folder``, until Ctrl-C (or ``max_runs`` checks).

    A change is acted on once the folder has been still for one ``interval``, so an editor that writes a file in
    several steps triggers one run, not three.
    """
    runs = 0
    try:
        while True:
            before = snapshot(folder)
            check()
            runs += 1
            if max_runs is not None and runs >= max_runs:
                return 0
            say(f"\nwatching {folder} for changes (Ctrl-C to stop)")
            current = before
            while current == before:
                sleep(interval)
                current = snapshot(folder)
            while True:  # wait until the writes settle
                sleep(interval)
                settled = snapshot(folder)
                if settled == current:
                    break
                current = settled
    except KeyboardInterrupt:
        say("\nstopped watching")
        return 0
