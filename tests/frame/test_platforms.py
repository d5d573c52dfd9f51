"""kata.concepts.platforms: the paths the tools take on Linux, macOS and Windows, each forced by its switch.

CI runs on Linux; the switches ($KATA_START_METHOD, $KATA_NO_FORK, $KATA_NO_SIGALRM) make it take the others' paths:
the lab's workers under spawn and forkserver (tests/frame/test_lab.py), watch without fork (tests/frame/test_watch.py),
the deadlines without SIGALRM (here and tests/frame/test_cli.py).
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from kata.concepts import platforms

pytestmark = pytest.mark.frame
on_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the switches force Linux onto the others' "
                              "paths; elsewhere the platform's own path runs")


@on_linux
def test_each_switch_forces_its_path(monkeypatch):
    for name in ("KATA_START_METHOD", "KATA_NO_FORK", "KATA_NO_SIGALRM"):
        monkeypatch.delenv(name, raising=False)
    assert platforms.can_fork() and platforms.has_sigalrm(), "Linux has fork and SIGALRM"
    monkeypatch.setenv("KATA_NO_FORK", "1")
    monkeypatch.setenv("KATA_NO_SIGALRM", "1")
    assert not platforms.can_fork() and not platforms.has_sigalrm(), "the switches take fork and SIGALRM away"
    assert platforms.start_method() == "spawn", "without fork, workers spawn"
    monkeypatch.setenv("KATA_START_METHOD", "forkserver")
    assert platforms.start_method() == "spawn", "without fork, a forkserver cannot be had either: spawn"
    monkeypatch.setenv("KATA_NO_FORK", "0")
    assert platforms.start_method() == "forkserver", "$KATA_START_METHOD chooses among what the platform has"
    monkeypatch.setenv("KATA_START_METHOD", "thread")
    with pytest.raises(ValueError, match="KATA_START_METHOD must be one of fork, forkserver, spawn"):
        platforms.start_method()


@on_linux
def test_a_process_holding_another_thread_is_never_forked(monkeypatch):
    monkeypatch.delenv("KATA_START_METHOD", raising=False)
    monkeypatch.delenv("KATA_NO_FORK", raising=False)
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert platforms.thread_count() >= 2, f"the other thread is counted: {platforms.thread_count()}"
        assert platforms.start_method() == "forkserver", (
            "while this process holds another thread (autograd's device threads, a listener), its workers come from "
            f"a forkserver, never a fork of it: {platforms.start_method()}")
    finally:
        release.set()
        other.join()


class Late(BaseException):
    pass


def test_without_sigalrm_a_timer_thread_interrupts_hanging_code_and_nothing_after():
    started = time.monotonic()
    with pytest.raises(Late):
        with platforms.interrupt_after(0.2, Late):
            while True:
                pass
    assert time.monotonic() - started < 5, "the interruption comes about when it is due"
    with platforms.interrupt_after(0.1, Late):
        pass  # over before it is due
    time.sleep(0.3)  # no interruption may arrive once the block is over
    caught = 0
    with pytest.raises(Late):
        with platforms.interrupt_after(0.1, Late, repeat=0.1):
            while True:
                try:
                    while True:
                        pass
                except Late:  # code that swallows one interruption gets another
                    caught += 1
                    if caught == 2:
                        raise
    assert caught == 2, f"the interruption repeats until the code gives up: {caught}"


def test_a_ctrl_c_during_a_deadline_is_still_a_ctrl_c():
    import _thread

    with pytest.raises(KeyboardInterrupt):
        with platforms.interrupt_after(30, Late):
            _thread.interrupt_main()  # the user's Ctrl-C, long before the deadline
            time.sleep(1)
