"""Where the lab's training runs go: worker processes, one per idle core, or this process on a busy machine."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from kata.concepts.platforms import start_method, worker_context
from kata.lab.outcome import Outcome, error_text, guarded

# What a forkserver imports once, before it forks the workers: torch and the lab's training code. A worker then starts
# in milliseconds; spawned, each spends seconds importing torch.
PRELOAD = ("torch", "numpy", "kata.lab.sections", "kata.lab.outcome", "kata.rl.ppo", "kata.rl.rloo")


def _worker_setup() -> None:
    # One intra-op thread per worker: the networks are tiny, and the workers already fill the cores.
    import torch

    torch.set_num_threads(1)


class Runner:
    """Runs the training jobs: in ``jobs`` worker processes, or lazily in this process when ``jobs == 1``."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None
        self.start_method: str | None = None
        if jobs > 1:
            # Forked only from a process that holds one thread. Any other (NumPy's OpenBLAS starts its pool at import,
            # so in practice every lab; a pytest-xdist worker; a notebook that ran backward() on a CUDA build, whose
            # autograd device threads make a forked child's backward() fail) gets its workers from a forkserver that
            # imported torch once: docs/benchmarks.md has what each way costs.
            self.start_method = start_method()
            context = worker_context(PRELOAD, self.start_method)
            self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_setup)
            if self.start_method == "fork":
                # Fork every worker now, while this process still holds its one thread (the pool's own threads
                # start after its workers).
                self.pool.submit(int).result()

    def submit(self, function: Callable[..., Any], *args: Any) -> Callable[[], Outcome]:
        """Start ``function(*args)``; returns a callable that waits for its :class:`Outcome`."""
        if self.pool is None:
            cache: list[Outcome] = []

            def compute() -> Outcome:
                if not cache:
                    cache.append(guarded(function, *args))
                return cache[0]

            return compute
        future: Future[Outcome] = self.pool.submit(guarded, function, *args)
        return lambda: _future_outcome(future)

    def close(self, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)
            self.pool = None


def _future_outcome(future: Future[Outcome]) -> Outcome:
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - the worker died (killed, out of memory) or its result did not pickle
        return Outcome(error=error_text(error))


def default_jobs(training_runs: int) -> int:
    """Worker processes for the training runs: one per idle core, no more than there are runs; 1 means in-process.

    Idle cores are the available cores minus the 1-minute load average (all of them where there is none). On a busy
    core two workers are slower than one process: they share one core's time and each pays its own start-up
    (benchmarks/lab.py --compare-jobs measures both).
    """
    cores = available_cores()
    load = load_average()
    idle = cores - load[0] if load else cores
    return max(1, min(cores, training_runs, round(idle)))


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None
