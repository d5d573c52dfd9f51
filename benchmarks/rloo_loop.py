"""The RLOO loop's tiny sequence policy: iterations and seconds to exact-response success 1.0, per seed.

    python benchmarks/rloo_loop.py                       # smoke profile, seeds 0-4
    python benchmarks/rloo_loop.py --profile full
    python benchmarks/rloo_loop.py --impl exercises      # the student's functions
    python benchmarks/rloo_loop.py --evaluation-every 1  # finer resolution of "iterations to success" (slower)

Target (docs/benchmarks.md, the target column): the smoke profile reaches exact-response success 1.0 within 10 s on
2 CPU cores. Success is measured on sampled responses (the profile's evaluation_samples per prompt, three prompts): an
evaluation in which every sampled response is exact. Seconds count from the start of the run, evaluations included;
CPU seconds are printed beside wall seconds because other work on a shared machine stretches the wall clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from machine import describe_machine  # noqa: E402

from kata.concepts import impl as implementations  # noqa: E402
from kata import PROFILES  # noqa: E402
from kata.rl.rloo import sequence_profile_config  # noqa: E402

TARGET_SECONDS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke", choices=PROFILES)
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--evaluation-every", type=int, default=None, help="override the profile's")
    args = parser.parse_args()

    package = implementations.load(args.impl)
    config = sequence_profile_config(args.profile)
    if args.evaluation_every is not None:
        config["evaluation_every"] = args.evaluation_every
    started = time.perf_counter()
    package.train_tiny_sequence_policy(seed=0, **dict(config, iterations=1))  # imports and first calls
    warm_up = time.perf_counter() - started

    print(f"machine: {describe_machine()} (load average {os.getloadavg()[0]:.1f})")
    print(f"profile {args.profile}: {config}")
    print(f"warm-up (imports, first calls): {warm_up:.2f} s, not counted below")
    print(f"{'seed':>4} {'wall s':>7} {'cpu s':>6} {'it->1.0':>8} {'s->1.0':>7} {'final':>6} {'held':>5} "
          f"{'greedy':>6} {'min P(exact)':>12}")
    rows = []
    for seed in args.seeds:
        wall, cpu = time.perf_counter(), time.process_time()
        run = package.train_tiny_sequence_policy(seed=seed, **config)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        history = run["history"]
        success = np.asarray(history["success_rate"])
        reached = np.flatnonzero(success >= 1.0)
        first = int(reached[0]) if reached.size else None
        greedy = package.evaluate_sequence_policy(run["model"], samples_per_prompt=1, deterministic=True)
        row = dict(
            seed=seed,
            wall=wall,
            cpu=cpu,
            iterations=history["iteration"][first] if first is not None else None,
            seconds=history["elapsed_seconds"][first] if first is not None else None,
            final=run["final_evaluation"]["success_rate"],
            held=float(np.mean(success[first:] >= 1.0)) if first is not None else 0.0,
            greedy=greedy["success_rate"],
            probability=history["min_exact_probability"][-1],
        )
        rows.append(row)
        iterations = "never" if row["iterations"] is None else str(row["iterations"])
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.2f}"
        print(f"{seed:>4} {wall:>7.2f} {cpu:>6.2f} {iterations:>8} {seconds:>7} {row['final']:>6.3f} "
              f"{row['held']:>5.2f} {row['greedy']:>6.2f} {row['probability']:>12.4f}", flush=True)

    reached = [row for row in rows if row["seconds"] is not None]
    print(f"reached sampled success 1.0: {len(reached)} of {len(rows)} seeds", end="")
    if reached:
        print(f"; iterations {min(r['iterations'] for r in reached)}-{max(r['iterations'] for r in reached)}, "
              f"seconds {min(r['seconds'] for r in reached):.2f}-{max(r['seconds'] for r in reached):.2f} "
              f"(evaluated every {config['evaluation_every']} iterations)")
    else:
        print()
    slowest = max(row["wall"] for row in rows)
    print(f"whole {args.profile} run: {min(row['wall'] for row in rows):.2f}-{slowest:.2f} s wall, "
          f"{min(row['cpu'] for row in rows):.2f}-{max(row['cpu'] for row in rows):.2f} s CPU per seed "
          f"(target: success 1.0 within {TARGET_SECONDS:.0f} s)")
    print("held: fraction of evaluations at success 1.0 from the first one on; greedy: greedy decoding's success "
          "after training; min P(exact): the least probability, over the prompts, of sampling the exact response")


if __name__ == "__main__":
    main()
