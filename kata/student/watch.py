"""`kata watch`: the check again after every change, from a warm process.

What every check needs (torch, NumPy, pytest, Hypothesis, the frame, and the catalogue's diagnosis where it is
installed) is imported once, by a forkserver, never with the student's modules. Each check runs in a child forked
from that server, where pytest imports ``exercises/`` afresh: the verdict, the messages, the Hypothesis profile and
the diagnosis are those of ``kata check``, without its start-up. The server, not the watching process, forks: the
watcher holds the thread that listens for file events, and a process holding threads is not forked
(kata.concepts.platforms). Changes are seen with watchfiles (the operating system's file events) where it is
installed, else by polling. Where there is no fork (Windows), each check is a fresh ``kata check`` process, and watch
says so once.
"""

from __future__ import annotations

import multiprocessing.context
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

Snapshot = dict[str, tuple[int, int]]
Runner = Callable[[list[str]], int]  # pytest's arguments -> its exit code
SETTLE_MILLISECONDS = 50  # writes this close together are one save (an editor may write a file in several steps)
WARM_IMPORTS = ("numpy", "torch", "hypothesis", "hypothesis.extra.numpy", "pytest", "_pytest.doctest", "xdist",
                "pytest_timeout", "kata.concepts.impl", "kata.rl.ppo", "kata.rl.rloo", "kata.testing.options",
                "kata.testing.progress", "kata.testing.strategies", "kata.testing.training")


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


def polled_changes(folder: Path, interval: float, sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
    """Yield once per change under ``folder`` since this call, found by polling every ``interval`` seconds; a change
    is acted on once the folder has been still for one interval, so a file written in several steps is one change."""
    return _polled(folder, interval, sleep, snapshot(folder))


def _polled(folder: Path, interval: float, sleep: Callable[[float], None], current: Snapshot) -> Iterator[None]:
    while True:
        before = current
        while current == before:
            sleep(interval)
            current = snapshot(folder)
        while True:
            sleep(interval)
            settled = snapshot(folder)
            if settled == current:
                break
            current = settled
        yield


def file_events(folder: Path) -> Iterator[None] | None:
    """Yield once per change of a ``.py`` file under ``folder`` since this call, from the operating system's events
    (watchfiles, on a thread of its own, so that a save made while a check runs is not lost); None where watchfiles
    is not installed. Several saves made while a check runs start one more check."""
    try:
        from watchfiles import PythonFilter
        from watchfiles import watch as watch_files
    except ImportError:
        return None
    events: queue.Queue[None] = queue.Queue()

    def listen() -> None:
        for _ in watch_files(folder, watch_filter=PythonFilter(), debounce=SETTLE_MILLISECONDS, step=10,
                             raise_interrupt=False):
            events.put(None)

    threading.Thread(target=listen, name="kata-watch-files", daemon=True).start()

    def changes() -> Iterator[None]:
        while True:
            while True:
                try:  # short waits: Ctrl-C reaches this thread at once
                    events.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            while not events.empty():
                events.get_nowait()
            yield

    return changes()


def watch(check: Callable[[], object], folder: Path, *, interval: float = 0.5, max_runs: int | None = None,
          sleep: Callable[[float], None] = time.sleep, say: Callable[[str], None] = print,
          changes: Iterator[None] | None = None) -> int:
    """Run ``check``, then again after every change under ``folder`` (``changes``: by default polled), until Ctrl-C
    (or ``max_runs`` checks). A change made while a check runs starts the next one."""
    changes = changes if changes is not None else polled_changes(folder, interval, sleep)
    runs = 0
    try:
        while True:
            check()
            runs += 1
            if max_runs is not None and runs >= max_runs:
                return 0
            say(f"\nwatching {folder} for changes (Ctrl-C to stop)")
            next(changes)
    except KeyboardInterrupt:
        say("\nstopped watching")
        return 0


def warm_imports(diagnosis: bool) -> list[str]:
    """Everything a check imports but the student's modules: the concepts' strategy modules included."""
    from kata.concepts.manifest import CONCEPTS

    strategies = tuple(f"kata.testing.strategies.{c.name}" for c in CONCEPTS)
    return list(WARM_IMPORTS + strategies + (("kata.catalogue.pytest_plugin", "kata.catalogue.probes") if diagnosis
                                             else ()))


def warm_server(diagnosis: bool) -> multiprocessing.context.BaseContext:
    """The forkserver's context: its server, started by the first check, imports :func:`warm_imports` once (a
    module that is not installed is skipped)."""
    from kata.concepts.platforms import worker_context

    return worker_context(warm_imports(diagnosis), "forkserver")


def _pytest_in_this_child(arguments: list[str], environment: dict[str, str]) -> None:
    code = 3
    try:
        import pytest

        from kata.concepts.impl import REPOSITORY_ROOT

        os.environ.clear()
        os.environ.update(environment)  # the watcher's now, not the server's when it started
        os.environ.pop("KATA_IMPL", None)  # the student's own exercises/, whatever the shell says
        os.chdir(REPOSITORY_ROOT)
        # The warm modules were imported before pytest could mark them for assertion rewriting: no test's
        # assertion is in them, and the warning is all the difference with kata check's output.
        code = int(pytest.main(["-W", "ignore::pytest.PytestAssertRewriteWarning", *arguments]))
    except BaseException:  # noqa: BLE001 - whatever happens, the watcher gets a status and the reason
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def in_a_warm_child(context: multiprocessing.context.BaseContext) -> Runner:
    """A runner: pytest on its arguments in a child forked from ``context``'s server (so the student's modules are
    imported anew); its exit code."""

    def run(arguments: list[str]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        child = context.Process(target=_pytest_in_this_child, args=(arguments, dict(os.environ)))
        child.start()
        child.join()
        return child.exitcode if child.exitcode is not None else 3

    return run


def choose_runner(diagnosis: bool, one_shot: Runner, say: Callable[[str], None] = print) -> Runner:
    """Each check's pytest run: in a child of the warm forkserver where there is fork, else ``one_shot`` (a fresh
    pytest each time), which watch says once."""
    from kata.concepts.platforms import can_fork

    if can_fork():
        return in_a_warm_child(warm_server(diagnosis))
    say("kata watch: this platform cannot fork a warm process; each check starts a fresh pytest")
    return one_shot


def watch_and_check(check: Callable[[Runner], object], folder: Path, *, interval: float, diagnosis: bool,
                    one_shot: Runner, say: Callable[[str], None] = print) -> int:
    """`kata watch`: ``check(runner)`` now and after every change, each check's pytest run by
    :func:`choose_runner`."""
    runner = choose_runner(diagnosis, one_shot, say)
    changes = file_events(folder) or polled_changes(folder, interval)
    return watch(lambda: check(runner), folder, interval=interval, say=say, changes=changes)
