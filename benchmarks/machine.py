"""The machine a benchmark ran on, in one line, for the figures docs/benchmarks.md reports."""

from __future__ import annotations

import os
import platform


def describe_machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import numpy
    import torch

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), numpy {numpy.__version__}, {platform.system()}")


if __name__ == "__main__":
    print(describe_machine())
