"""Reading training runs: one PPO run's evaluation curve, and several runs' curves on one step axis with their median
and quartiles (what the lab plots and the smoke verdict reads). The packages export aggregate_training_runs for the
seed notebook (course.toml's frame_exports)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def evaluation_curve(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(environment_steps, evaluation_mean)`` of one run's evaluated updates only."""
    history = run["history"]
    steps = np.asarray(history["environment_steps"], dtype=np.int64)
    means = np.asarray(history["evaluation_mean"], dtype=np.float64)
    evaluated = np.isfinite(means)
    return steps[evaluated], means[evaluated]


def aggregate_training_runs(runs: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Evaluation curves of several runs on one step axis, with their median and quartiles.

    ``environment_steps``: int64 ``[S]``, every step count at which some run was evaluated, ascending.
    ``all_curves``: float64 ``[R, S]``, run r's evaluation mean at that step, NaN where run r has no evaluation
    there. ``median``, ``q25``, ``q75``: float64 ``[S]`` over the runs evaluated at that step (NaN if none).
    ValueError if ``runs`` is empty or a run has no ``history``.
    """
    if len(runs) == 0:
        raise ValueError("runs must hold at least one training run (the dicts train_ppo returns)")
    curves = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or "history" not in run:
            raise ValueError(f"runs[{i}] must be a dict returned by train_ppo, with a 'history'")
        curves.append(evaluation_curve(run))
    steps = np.unique(np.concatenate([s for s, _ in curves])).astype(np.int64)
    all_curves = np.full((len(runs), steps.size), np.nan)
    for r, (run_steps, means) in enumerate(curves):
        all_curves[r, np.searchsorted(steps, run_steps)] = means
    quartiles = np.full((3, steps.size), np.nan)
    for s in range(steps.size):
        column = all_curves[:, s]
        column = column[np.isfinite(column)]
        if column.size:  # never an all-NaN slice: no RuntimeWarning for the lab to print
            quartiles[:, s] = np.quantile(column, [0.25, 0.5, 0.75])
    return {
        "environment_steps": steps,
        "median": quartiles[1],
        "q25": quartiles[0],
        "q75": quartiles[2],
        "all_curves": all_curves,
    }
