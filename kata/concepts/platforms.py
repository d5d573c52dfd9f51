"""What the platform offers the tools (fork, SIGALRM, a start method for worker processes), with one switch each.

The tools take one path on Linux and another on macOS or Windows. So that CI on Linux runs every path, each choice is
read here, from the platform unless an environment variable forces it (CONTRIBUTING.md, "Platform paths"):

    KATA_START_METHOD=fork|forkserver|spawn   how worker processes start (default: start_method() below)
    KATA_NO_FORK=1      as on Windows: no os.fork (kata watch checks in a fresh pytest each time, the catalogue's
                        runs are new interpreters, worker processes spawn)
    KATA_NO_SIGALRM=1   as on Windows: no SIGALRM (the per-test deadline of kata.testing.progress and the catalogue's
                        diagnosis deadline come from a timer thread instead: interrupt_after)

Forking a process that holds other threads is unsafe: a lock another thread held stays held in the child, and torch
refuses autograd in a child forked after autograd's device threads started (CUDA builds, "Autograd and Fork"). So a
worker is forked only from a process that holds one thread at that moment; otherwise it comes from a forkserver (a
fresh, single-threaded interpreter that imported the heavy modules once) or is spawned. NumPy's OpenBLAS starts its
thread pool when NumPy is imported, so on Linux a tool that imported NumPy gets a forkserver.
"""

from __future__ import annotations

import _thread
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

START_METHOD_VARIABLE = "KATA_START_METHOD"
NO_FORK_VARIABLE = "KATA_NO_FORK"
NO_SIGALRM_VARIABLE = "KATA_NO_SIGALRM"
START_METHODS = ("fork", "forkserver", "spawn")


def _set(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


def can_fork() -> bool:
    """Whether ``os.fork`` may be used: it exists (not on Windows) and ``$KATA_NO_FORK`` is not set."""
    return hasattr(os, "fork") and not _set(NO_FORK_VARIABLE)


def has_sigalrm() -> bool:
    """Whether ``signal.SIGALRM`` may be used: it exists (not on Windows) and ``$KATA_NO_SIGALRM`` is not set."""
    return hasattr(signal, "SIGALRM") and not _set(NO_SIGALRM_VARIABLE)


def thread_count() -> int:
    """The threads of this process, native ones included (torch's, a library's), where the system says (Linux:
    /proc/self/task); elsewhere Python's own threads only."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def single_threaded() -> bool:
    """Whether this process holds no thread but the one asking (what makes a fork safe)."""
    return sys.platform.startswith("linux") and thread_count() == 1


def start_method(elsewhere: str = "spawn") -> str:
    """How worker processes start here: ``$KATA_START_METHOD`` if set; else ``fork`` on Linux from a process that
    holds one thread now, ``forkserver`` on Linux otherwise, and ``elsewhere`` on other systems that can fork (macOS,
    whose system libraries may start threads that a fork leaves broken: ``spawn`` by default, or ``forkserver`` where
    an interpreter per child would cost too much). Without fork, always ``spawn``."""
    forced = os.environ.get(START_METHOD_VARIABLE, "").strip()
    if forced:
        if forced not in START_METHODS:
            raise ValueError(f"${START_METHOD_VARIABLE} must be one of {', '.join(START_METHODS)}: {forced!r}")
        if forced == "spawn" or (can_fork() and forced in multiprocessing.get_all_start_methods()):
            return forced
        return "spawn"
    if not can_fork():
        return "spawn"
    if not sys.platform.startswith("linux"):
        return elsewhere
    return "fork" if single_threaded() else "forkserver"


def worker_context(preload: Sequence[str] = (), method: str | None = None) -> multiprocessing.context.BaseContext:
    """The multiprocessing context worker processes start from (``method``, default :func:`start_method`). Under
    ``forkserver`` the server imports ``preload`` once, before it forks any worker; it is one per process, so the
    first caller's ``preload`` is the one it keeps."""
    context = multiprocessing.get_context(method or start_method())
    if context.get_start_method() == "forkserver" and preload:
        context.set_forkserver_preload(list(preload))
    return context


@contextmanager
def interrupt_after(seconds: float, error: Callable[[], BaseException], repeat: float | None = 1.0) -> Iterator[None]:
    """Where there is no SIGALRM (Windows): raise ``error()`` in the main thread once ``seconds`` have passed (and
    again every ``repeat`` seconds, for code that swallows one), from a timer thread through SIGINT's handler
    (``_thread.interrupt_main``). Code stuck inside one C call is interrupted when it returns. A Ctrl-C of the user's
    own still stops the run as before. Call it from the main thread."""
    expired = threading.Event()
    settled = threading.Event()  # the body is over: a late interrupt of the timer's is ignored
    done = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if settled.is_set():
            return
        if expired.is_set():
            raise error()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    def fire() -> None:
        delay = seconds
        while not done.wait(delay):
            expired.set()
            _thread.interrupt_main(signal.SIGINT)
            if repeat is None:
                return
            delay = repeat

    signal.signal(signal.SIGINT, handler)
    timer = threading.Thread(target=fire, name="kata-deadline", daemon=True)
    timer.start()
    try:
        yield
    finally:
        settled.set()
        done.set()
        timer.join()
        _let_pending_signals_run()  # under this handler, which ignores them, not under the one restored next
        signal.signal(signal.SIGINT, previous)


def _let_pending_signals_run() -> None:
    for _ in range(2):  # a Python call and a loop's jump: the interpreter runs pending signal handlers there
        pass
