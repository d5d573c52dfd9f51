"""The whole lab end to end (`python -m kata.lab`, a fresh interpreter each time), beside its targets.

    python benchmarks/lab.py                  # smoke profile on the reference (target: 90 s or less)
    python benchmarks/lab.py --full           # and the full profile (target: 10 minutes or less)
    python benchmarks/lab.py --compare-jobs   # smoke in-process (--jobs 1) and in 2 workers, alternately
    python benchmarks/lab.py --impl exercises # the student's code
    python benchmarks/lab.py --start-methods  # smoke in 2 workers started by fork, forkserver and spawn, alternately

Each run prints its wall time (interpreter start included), the CPU time of the lab and its workers, the sections'
times and each PPO seed's, from the run's results.json. The load average is printed with them: on a shared machine
other work slows every wall time, and the CPU time is then the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"smoke": 90.0, "full": 600.0}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_lab(profile: str, impl: str, jobs: int | None, out: Path, start_method: str | None = None) -> dict:
    command = [sys.executable, "-m", "kata.lab", "--profile", profile, "--impl", impl, "--out", str(out)]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    load = os.getloadavg()
    cpu, started = children_cpu(), time.perf_counter()
    environment = {**os.environ, "MPLBACKEND": "Agg"}
    if start_method is not None:
        environment["KATA_START_METHOD"] = start_method  # kata.concepts.platforms: how the workers start
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=environment)
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    if completed.returncode != 0:
        print(completed.stdout + completed.stderr)
        raise SystemExit(f"the lab exited {completed.returncode}")
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {"wall": wall, "cpu": cpu, "load_before": load, "load_after": os.getloadavg(), "results": results}


def report(label: str, profile: str, run: dict) -> None:
    results = run["results"]
    lab = results["lab"]
    verdict = "within" if run["wall"] <= TARGETS[profile] else "OVER"
    print(f"\n{label}: {run['wall']:.1f} s wall end to end ({verdict} the {TARGETS[profile]:g} s target), "
          f"{run['cpu']:.1f} s CPU (lab and workers), training in "
          + ("this process" if lab["jobs"] == 1 else f"{lab['jobs']} worker processes")
          + (f" started by {lab['start_method']}" if lab.get("start_method") else ""))
    print("  load average before / after: " + " / ".join(
        ", ".join(f"{x:.2f}" for x in run[key]) for key in ("load_before", "load_after")))
    print("  sections: " + ", ".join(f"{key} {record['seconds']:.1f} s" for key, record in results["sections"].items()))
    ppo = results.get("ppo")
    if ppo:
        print("  PPO: " + "; ".join(
            f"seed {r['seed']} {r['final_evaluation_mean']:.1f} after {r['environment_steps']:,} steps "
            f"({r['wall_seconds']:.1f} s)" for r in ppo["runs"]) + f"; {ppo['solved_seeds']}/{len(ppo['runs'])} solved")
    rloo = results.get("rloo")
    if rloo:
        print(f"  RLOO: success {rloo['final_success_rate']:.3f}, reward {rloo['final_mean_reward']:.3f} "
              f"({rloo['wall_seconds']:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--full", action="store_true", help="also run the full profile")
    parser.add_argument("--compare-jobs", action="store_true",
                        help="also run the smoke lab with --jobs 1 and --jobs 2, alternately, and compare")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each way with --compare-jobs or --start-methods (default 2)")
    parser.add_argument("--start-methods", action="store_true",
                        help="also run the smoke lab in 2 workers started by fork, forkserver and spawn, alternately")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory(prefix="lab-benchmark-") as folder:
        smoke = run_lab("smoke", args.impl, None, Path(folder) / "smoke")
        report("lab, smoke profile", "smoke", smoke)
        if args.compare_jobs:
            # Alternate the two ways, so that a change in the machine's load does not favour one of them.
            walls: dict[int, list[float]] = {1: [], 2: []}
            for repeat in range(args.repeats):
                for jobs in (1, 2):
                    run = run_lab("smoke", args.impl, jobs, Path(folder) / f"smoke-{jobs}-{repeat}")
                    report(f"lab, smoke profile, --jobs {jobs} (repeat {repeat + 1})", "smoke", run)
                    walls[jobs].append(run["wall"])
            print("\nin-process (--jobs 1) vs two workers (--jobs 2), wall: " + "; ".join(
                f"{a:.1f} s vs {b:.1f} s" for a, b in zip(walls[1], walls[2]))
                  + f"; medians {sorted(walls[1])[len(walls[1]) // 2]:.1f} s vs "
                  f"{sorted(walls[2])[len(walls[2]) // 2]:.1f} s")
        if args.start_methods:
            methods = ("fork", "forkserver", "spawn")
            seconds: dict[str, list[float]] = {method: [] for method in methods}
            for repeat in range(args.repeats):
                for method in methods:
                    run = run_lab("smoke", args.impl, 2, Path(folder) / f"smoke-{method}-{repeat}", method)
                    report(f"lab, smoke profile, 2 workers started by {method} (repeat {repeat + 1})", "smoke", run)
                    seconds[method].append(run["wall"])
            print("\n2 workers, wall by start method: " + "; ".join(
                f"{method} {', '.join(f'{x:.1f}' for x in walls)} s (median {sorted(walls)[len(walls) // 2]:.1f} s)"
                for method, walls in seconds.items()))
        if args.full:
            full = run_lab("full", args.impl, None, Path(folder) / "full")
            report("lab, full profile", "full", full)


if __name__ == "__main__":
    main()
