"""The student's loop against the start-up floor: `kata check` on right and on wrong code, `kata watch` from a save to
the verdict, and README's test command, each beside `python -c "import torch, hypothesis, pytest"` measured in the
same run.

    python benchmarks/student_loop.py [--concept gae] [--repeats 3] [--skip-suite]
    python benchmarks/student_loop.py --repository PATH --python PATH/.venv/bin/python   # another checkout

Targets (issue "the student's loop at the speed of thought"): `kata check` on right code <= 2.0 x the floor, on wrong
code (its diagnosis line included) <= 2.5 x; `kata watch` from the save to the verdict <= 1.0 x; README's test command
(`pytest --impl solutions -n auto`) <= 15 x on 2 cores.

Each figure is the median of --repeats fresh runs, in a throwaway copy of the repository whose exercises/ holds the
concept's reference (right code) or a catalogued mistake of it (wrong code), with its own progress file. The watch
figure is the time from writing the file to the line that closes the check's verdict. README's test command runs
under the `ci` profile, as CI runs it; where the checkout has the tooling's end-to-end tests (`--e2e`), which that
command leaves out, the whole suite with them is a row of its own (no target: both of CI's steps in one run). The
commands run without PYTHONDONTWRITEBYTECODE, as on a student's machine and in .ci/run, so compiled modules are
cached between runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("kata", "exercises", "solutions", "tests", "mistakes", "variants", "conftest.py", "pyproject.toml")
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".kata", "parity")
WRONG = {"gae": "truncation_as_termination", "baselines": "rloo_includes_self", "reinforce": "loss_sign_flipped"}
VERDICT = re.compile(r"^(\w+): (failing|done|passes|fast tests green)|passes every test")


def copy_of(repository: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    for name in COPIED:
        source = repository / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=LEFT_OUT)
        elif source.is_file():
            shutil.copy2(source, destination / name)
    return destination


def module_for(repository: Path, concept: str, wrong: bool) -> str:
    """The text of exercises/<concept>.py: the reference's module, or a catalogued mistake's patch of it (a checkout
    from before the patches holds the mistake's functions in a module of their own, bound over the reference's)."""
    text = (repository / "solutions" / f"{concept}.py").read_text()
    if not wrong:
        return text
    entry = repository / "mistakes" / concept / WRONG[concept]
    if entry.with_suffix(".diff").is_file():
        sys.path.insert(0, str(ROOT))
        from kata.concepts.patches import apply

        return apply(text, entry.with_suffix(".diff").read_text(), str(entry), f"solutions/{concept}.py")
    mistake = entry.with_suffix(".py").read_text()
    mistake = "\n".join(line for line in mistake.splitlines() if not line.startswith("from __future__"))
    return text + "\n\n# a catalogued mistake, bound over the reference's function\n" + mistake


def ordinary(environ: dict[str, str]) -> dict[str, str]:
    """The environment of a student's machine: bytecode cached (some machines export PYTHONDONTWRITEBYTECODE=1,
    which stops pytest from ever caching its assertion rewriting of Hypothesis, about 0.5 s of every pytest run)."""
    return {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def environment(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in ordinary(dict(os.environ)).items() if not k.startswith(("KATA_", "PYTEST_", "PYTHONPATH"))}
    return dict(env, KATA_PROGRESS=str(copy / ".kata" / "progress.json"), MPLBACKEND="Agg")


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    return time.perf_counter() - started, completed.stdout + completed.stderr


def has_end_to_end_option(repository: Path) -> bool:
    """Whether the checkout's pytest knows --e2e (README's test command leaves the tooling's e2e tests out)."""
    options = repository / "kata" / "testing" / "options.py"
    return options.is_file() and '"--e2e"' in options.read_text()


def watch_latency(python: str, copy: Path, concept: str, text: str, saves: int) -> list[float]:
    """Seconds from writing exercises/<concept>.py to the verdict line of the check it starts, ``saves`` times."""
    process = subprocess.Popen([python, "-m", "kata", "watch", concept], cwd=copy, env=environment(copy),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    verdicts: list[float] = []
    seen = threading.Event()

    def read() -> None:
        for line in process.stdout:
            if VERDICT.search(line.strip()):
                verdicts.append(time.perf_counter())
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    latencies = []
    try:
        if not seen.wait(180):  # the first check, started by the watch itself
            raise SystemExit("kata watch gave no verdict within 180 s")
        for index in range(saves):
            time.sleep(1.5)  # the watcher is waiting again
            seen.clear()
            saved = time.perf_counter()
            (copy / "exercises" / f"{concept}.py").write_text(text + f"\n# save {index}\n")
            if not seen.wait(180):
                raise SystemExit("kata watch gave no verdict within 180 s of a save")
            latencies.append(verdicts[-1] - saved)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repository", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--python", default=sys.executable, help="its interpreter (with the checkout installed)")
    parser.add_argument("--concept", default="gae", choices=sorted(WRONG))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-suite", action="store_true", help="leave out README's test command")
    args = parser.parse_args()
    repository, python, concept = args.repository.resolve(), args.python, args.concept
    print(f"machine: {describe_machine()}; load average {os.getloadavg()[0]:.1f} at start")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repository, capture_output=True, text=True)
    print(f"repository: {repository} ({commit.stdout.strip()})")
    floor = statistics.median(timed([python, "-c", "import torch, hypothesis, pytest"], repository)[0]
                              for _ in range(args.repeats))
    print(f"floor, python -c 'import torch, hypothesis, pytest': {floor:.2f} s (median of {args.repeats})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kata-student-loop-") as scratch:
        for wrong in (False, True):
            copy = copy_of(repository, Path(scratch) / ("wrong" if wrong else "right"))
            text = module_for(repository, concept, wrong)
            (copy / "exercises" / f"{concept}.py").write_text(text)
            walls, output = [], ""
            for _ in range(args.repeats):
                wall, output = timed([python, "-m", "kata", "check", concept], copy, environment(copy))
                walls.append(wall)
            what = f"kata check {concept}, {'wrong' if wrong else 'right'} code"
            last = [line for line in output.splitlines() if line.strip()][-1][:110]
            rows.append((what, statistics.median(walls), last))
            if not wrong:
                latencies = watch_latency(python, copy, concept, text, args.repeats)
                rows.append((f"kata watch {concept}: save to verdict", statistics.median(latencies),
                             f"{len(latencies)} saves, {min(latencies):.2f}-{max(latencies):.2f} s"))
    if not args.skip_suite:
        command = [python, "-m", "pytest", "--impl", "solutions", "-n", "auto", "-q"]
        suites = [("README's test command (-n auto)", command)]
        if has_end_to_end_option(repository):  # where the tooling's e2e tests exist, the whole suite beside it
            suites.append(("the whole suite, --e2e (both CI steps)", [*command, "--e2e"]))
        for what, arguments in suites:
            runs = [timed(arguments, repository, dict(ordinary(dict(os.environ)), KATA_HYPOTHESIS_PROFILE="ci"))
                    for _ in range(args.repeats)]
            walls = [wall for wall, _ in runs]
            rows.append((what, statistics.median(walls), f"{runs[-1][1].strip().splitlines()[-1].strip('= ')}; "
                                                         f"{min(walls):.1f}-{max(walls):.1f} s"))
    for what, seconds, note in rows:
        print(f"{what:<42} {seconds:7.2f} s  {seconds / floor:5.1f} x the floor  [{note}]")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
