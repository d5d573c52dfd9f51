"""Confine one grading run to its scratch folder with bubblewrap (``bwrap``, Linux): files, network, processes.

    prefix = command(scratch, hidden=[repository])  # then: [*prefix, python, "-m", "kata.grading.limits", ...]
    reason = unavailable()                           # None where bwrap works here, else one line saying why

Inside, a run sees:

- its scratch folder read-write, at the same path (the paths in its reports stay valid);
- read-only: ``/usr`` (and ``/bin``, ``/lib``, ... as the host has them, symlinks into ``/usr`` on a merged system),
  ``/etc/ld.so.cache`` (the loader's index of libraries outside its built-in paths, e.g. ``/usr/local/lib``), and
  each interpreter's own folders (its executable, ``sys.prefix``, ``sys.base_prefix`` and every ``sys.path`` entry
  it has when started without PYTHONPATH);
- a fresh ``/proc`` (of its own PID namespace) and ``/dev``, and size-capped private tmpfs on ``/tmp`` and
  ``/dev/shm``; an empty ``HOME`` (``/tmp/home``); ``TMPDIR=/tmp``;
- and nothing else: the root is a read-only tmpfs, so no home, no other submission, no ``/work`` or ``/var``.

It has no network (a loopback of its own, so not even the host's 127.0.0.1), its own IPC, UTS and user namespaces
where the kernel offers them, no capabilities (bwrap keeps them for root unless told), a new terminal session (no
TIOCSTI into the grader's terminal) and its own PID namespace: when the command ends, or bwrap or its parent dies,
the kernel kills every process left in it, however it was started.

``hidden`` paths (the grader's repository; the grader's home is always added) are never bound, nor any folder that
holds one: an interpreter path equal to or above one is left out, while one below (a virtual environment inside the
repository, ``.venv``) is bound on its own. One inside a folder bound whole (a repository in ``/usr/src``) is
covered by an empty read-only tmpfs, a virtual environment inside it still bound on its own. The interpreter's
site-packages may hold an editable install whose finder maps ``kata`` into the grader's repository; that finder
comes after the path finder on ``sys.meta_path``, so ``python -m`` run in the copy imports the copy's ``kata``
first, and the repository it maps to does not exist inside.

Standard library only: the grader imports it, and nothing of it depends on the kata.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

HOME = "/tmp/home"  # the run's HOME: empty, inside its private /tmp
TMP_BYTES = 512 * 2**20  # the private /tmp and /dev/shm live in memory, which the address-space limit does not cap
SYSTEM = ("/usr",)  # bound read-only whole
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # folders or, on a merged /usr, symlinks into it
SYSTEM_FILES = ("/etc/ld.so.cache",)
CHECK_SECONDS = 30.0
INSTALL = "install it with `sudo apt-get install bubblewrap`"
UNSANDBOXED = "or grade unsandboxed, with your rights (your files, the network), with --no-sandbox"


PASSED_VARIABLES = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "SYSTEMROOT", "MPLBACKEND")


def run_environment(passed: Iterable[str] = ()) -> dict[str, str]:
    """The environment a run of submitted code starts from: of the grader's, only PATH, HOME, the locale (``LANG``,
    ``LC_*``), the terminal and time zone, and the names in ``passed``. Whatever else the grader's shell exports (an
    API token, credentials) never reaches the submission, sandboxed or not."""
    keep = {*PASSED_VARIABLES, *passed}
    return {name: value for name, value in os.environ.items() if name in keep or name.startswith("LC_")}


def command(scratch: str | os.PathLike[str], *, python: str = sys.executable,
            hidden: Iterable[str | os.PathLike[str]] = (), bwrap: str | None = None) -> list[str]:
    """The ``bwrap ... --`` prefix that runs a command confined to ``scratch`` (read-write), with the interpreter
    ``python``, this process's own (``sys.executable``, which a diagnosis runs) and the system's libraries
    read-only; see the module's docstring for everything it sees and does not. ``bwrap`` is the executable
    (default: the one on PATH)."""
    scratch = Path(scratch).resolve()
    private = [Path.home().resolve(), *(Path(path).resolve() for path in hidden)]
    args = [bwrap or shutil.which("bwrap") or "bwrap",
            "--unshare-all",  # network, PID, IPC, UTS and (where the kernel allows) user and cgroup namespaces
            "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(TMP_BYTES), "--tmpfs", "/dev/shm", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
            "--dir", HOME]
    args += [argument for path in SYSTEM for argument in ("--ro-bind", path, path)]
    for name in TOP_LEVEL:
        top = Path("/", name)
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    args += [argument for path in SYSTEM_FILES if Path(path).exists() for argument in ("--ro-bind", path, path)]
    bound = [*map(Path, SYSTEM), *(Path("/", n) for n in TOP_LEVEL)]
    covered: list[Path] = []  # hidden folders inside a bound one (/usr/src/app): an empty tmpfs over each
    pythons = dict.fromkeys((python, sys.executable))
    mounts = {(p, "bind") for one in pythons for p in interpreter_paths(one)} | {(p, "hide") for p in private}
    for path, kind in sorted(mounts, key=lambda mount: len(mount[0].parts)):  # outer folders first
        if kind == "hide":
            if _shown(path, bound, covered) and path.is_dir():
                args += ["--tmpfs", str(path)]
                covered.append(path)
            continue
        if _shown(path, bound, covered) or _within(path, [scratch]) or _within(scratch, [path]):
            continue  # already visible, or the scratch's own (bound read-write below)
        if any(_within(secret, [path]) for secret in private):
            continue  # binding it would show the grader's home or repository
        args += ["--ro-bind", str(path), str(path)]
        bound.append(path)
    args += ["--bind", str(scratch), str(scratch),
             "--remount-ro", "/",  # the root tmpfs holds only mount points: nothing may be written there
             *(argument for path in covered for argument in ("--remount-ro", str(path))),  # nor in a cover
             "--setenv", "HOME", HOME, "--setenv", "TMPDIR", "/tmp", "--"]
    return args


@lru_cache(maxsize=None)
def interpreter_paths(python: str) -> tuple[Path, ...]:
    """The folders ``python`` runs from: its executable's (as named and resolved), ``sys.prefix``,
    ``sys.base_prefix``, the exec prefixes and each existing ``sys.path`` entry, as it has them when started outside
    any project (working directory ``/``, no PYTHONPATH). Each as named and, if different, resolved."""
    probe = ("import json, sys; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, "
             "sys.base_exec_prefix, *sys.path]))")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PYTHONPATH")}
    output = subprocess.run([python, "-c", probe], cwd="/", env=environment, capture_output=True, text=True,
                            check=True, timeout=CHECK_SECONDS, stdin=subprocess.DEVNULL).stdout
    executable, *folders = json.loads(output)
    found: set[Path] = set()
    for given in [python, executable]:
        found |= {Path(os.path.abspath(given)).parent, Path(os.path.realpath(given)).parent}
    for folder in folders:
        if folder and os.path.exists(folder):  # '' is the working directory; a missing zip of the stdlib is common
            found |= {Path(os.path.abspath(folder)), Path(os.path.realpath(folder))}
    return tuple(sorted(found))


def unavailable(python: str = sys.executable) -> str | None:
    """None if bwrap runs ``python`` confined here; otherwise one line saying why and what to do (the command that
    installs it, or the flag that grades unsandboxed). Tried once per bwrap on PATH and interpreter (about 0.1 s),
    then remembered: cheap to ask per batch."""
    return _unavailable(shutil.which("bwrap"), python)


@lru_cache(maxsize=None)
def _unavailable(bwrap: str | None, python: str) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"no sandbox: bubblewrap needs Linux; grade in a Linux container, {UNSANDBOXED}"
    if bwrap is None:
        return f"no sandbox: bwrap (bubblewrap), which confines every run of submitted code, is not installed: " \
               f"{INSTALL}, {UNSANDBOXED}"
    with tempfile.TemporaryDirectory(prefix="kata-sandbox-") as scratch:
        try:
            for one in dict.fromkeys((python, sys.executable)):  # the real prefix: what fails here fails every run
                completed = subprocess.run([*command(scratch, python=python, bwrap=bwrap), one, "-c", "pass"],
                                           capture_output=True, text=True, timeout=CHECK_SECONDS,
                                           stdin=subprocess.DEVNULL)
                if completed.returncode != 0:
                    lines = [line.strip() for line in completed.stderr.splitlines() if line.strip()]
                    raise OSError(lines[-1] if lines else f"exit status {completed.returncode}")
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            return (f"no sandbox: {bwrap} cannot start here ({error}): it needs user namespaces (in a container: a "
                    f"policy that allows them), {UNSANDBOXED}")
    return None


def stop(process: subprocess.Popen[Any], grace: float) -> bool:
    """End a run started through :func:`command`: SIGKILL to bwrap's child, its PID namespace's first process (the
    kernel then kills every process of the namespace), and wait up to ``grace`` seconds for bwrap to collect it and
    exit. True if it did; False at once if ``process`` is not bwrap or has no child yet. (A signal to bwrap itself
    would end it before it collects its child: on a machine whose PID 1 never reaps orphans, e.g. some containers,
    that child would stay a zombie.)"""
    args = process.args if isinstance(process.args, (list, tuple)) else [process.args]
    if not args or Path(os.fsdecode(args[0])).name != "bwrap" or process.poll() is not None:
        return False
    below = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_text().rpartition(")")[2].split()[1] == str(process.pid):
                below.append(int(entry.name))
        except (OSError, IndexError):
            continue
    if not below:
        return False
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        return False
    return True


def _shown(path: Path, bound: list[Path], covered: list[Path]) -> bool:
    """Whether ``path`` is visible already: the innermost of ``bound`` and ``covered`` that holds it is bound."""
    holding = [folder for folder in [*bound, *covered] if _within(path, [folder])]
    return bool(holding) and max(holding, key=lambda folder: len(folder.parts)) in bound


def _within(path: Path, folders: Iterable[Path]) -> bool:
    """Whether ``path`` is one of ``folders`` or inside one."""
    return any(path == folder or folder in path.parents for folder in folders)
