"""Run one grading command under resource limits and leave no process of it behind.

    python -m kata.grading.limits --memory BYTES --cpu SECONDS --processes N -- COMMAND ...

Started by the grader in a process group of its own. It sets the limits (address space, CPU seconds and, for a user
other than root, processes), makes itself the reaper of every orphan below it (Linux), starts COMMAND in a process
group of its own and waits. When COMMAND ends, or this process gets SIGTERM (the grader's time limit, Ctrl-C or
SIGTERM to the grader) or its parent dies, it kills COMMAND's group, then every process left below it (a background
process the submission started in a new session included), and exits with COMMAND's exit status (128 + the signal's
number if a signal ended it).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
REAP_SECONDS = 5.0


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def user_tasks() -> int:
    """Processes and threads of this user now: RLIMIT_NPROC counts them all."""
    uid, count = os.getuid(), 0
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += len(os.listdir(entry / "task"))
        except OSError:
            continue
    return count


def set_limits(memory: int, cpu: int, processes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))  # SIGXCPU at the soft limit, SIGKILL 5 s later
    if processes:
        allowed = user_tasks() + processes  # the limit is per user: count what runs already
        resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))


def children() -> list[int]:
    """Processes whose parent is this one (orphans below it are re-parented here)."""
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[1] == me:
                found.append(int(entry.name))
    return found


def reap_everything() -> None:
    """Kill and collect every process below this one, until none is left (or REAP_SECONDS passed)."""
    deadline = time.monotonic() + REAP_SECONDS
    while time.monotonic() < deadline:
        pids = children() if Path("/proc").is_dir() else []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not pids:
                return
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", type=int, required=True, help="address-space limit in bytes")
    parser.add_argument("--cpu", type=int, required=True, help="CPU-time limit in seconds")
    parser.add_argument("--processes", type=int, default=0, help="processes it may add (0: no limit)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the grader died: clean up all the same
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    set_limits(args.memory, args.cpu, args.processes)
    process = subprocess.Popen(command, start_new_session=True)
    while process.poll() is None and not stop:
        time.sleep(0.05)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()
    reap_everything()
    code = process.returncode
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
