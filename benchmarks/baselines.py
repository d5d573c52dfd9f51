"""Time simulate_group_baseline_bias(8, 400_000, seed) on the reference (target: 0.5 s or less).

    python benchmarks/baselines.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

from machine import describe_machine

from kata.concepts.impl import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--impl", default="solutions")
    args = parser.parse_args()
    simulate = load(args.impl).simulate_group_baseline_bias
    simulate(group_size=8, groups=1_000, seed=0)  # imports and first-call overheads out of the timing
    times = []
    for repeat in range(args.repeats):
        started = time.perf_counter()
        result = simulate(group_size=8, groups=400_000, seed=2026 + repeat)
        times.append(time.perf_counter() - started)
    print(f"machine: {describe_machine()}")
    print(f"simulate_group_baseline_bias(8, 400_000): best {min(times):.3f} s, median "
          f"{sorted(times)[len(times) // 2]:.3f} s over {args.repeats} runs (target <= 0.5 s)")
    print("last run: " + ", ".join(f"{key}={value:.4f}" for key, value in result.items()))


if __name__ == "__main__":
    main()
