"""The lab's figures, one function each, shared by ``kata lab`` and notebooks/lab.py.

Every function takes plain data (the dicts and arrays the seed API returns, or lists of numbers) and returns a
:class:`matplotlib.figure.Figure`. Figures are built without pyplot, so nothing here touches a global figure
manager or a GUI backend: :func:`save` writes a PNG on any machine, and a notebook displays a returned figure as
the value of its cell.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kata.lab.report import FEWEST_SEEDS_FOR_QUARTILES

CEILING = 500.0  # CartPole's time limit: the most a deterministic evaluation episode can return
DPI = 100
SEED_COLOURS = ("tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
MEDIAN_COLOUR = "tab:blue"  # no seed's line shares it


def save(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` as a PNG to ``path`` (parent folders are created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


def show(figure: Figure, path: str | Path) -> Path:
    """Save ``figure`` to ``path`` and, inside a Jupyter kernel, display the PNG (for notebooks/lab.py).

    A figure built without pyplot is not shown by a notebook on its own, and a plain Python run has nowhere to show
    it: saving and displaying the file works in both.
    """
    path = save(figure, path)
    if "ipykernel" in sys.modules:
        from IPython.display import Image, display

        display(Image(filename=str(path)))
    else:
        print(f"figure: {path}")
    return path


def baseline_spread(result: Mapping[str, float], group_size: int) -> Figure:
    """Bar chart of the three estimators' spread, from ``simulate_group_baseline_bias``'s dict.

    Each bar is annotated with that estimator's mean gradient; a box states the predicted ``(G-1)/G`` and the
    observed scale of the same-group estimator.
    """
    labels = ["no baseline", "same-group mean", "RLOO (leave one out)"]
    stds = [result["plain_std"], result["same_group_std"], result["rloo_std"]]
    means = [result["plain_mean"], result["same_group_mean"], result["rloo_mean"]]
    figure = Figure(figsize=(8.2, 4.8), layout="constrained")
    ax = figure.add_subplot()
    bars = ax.bar(labels, stds, color=["tab:gray", "tab:orange", "tab:blue"])
    for bar, std, mean in zip(bars, stds, means):
        ax.annotate(f"std {std:.3f}\nmean {mean:.3f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=9)
    ax.set_ylim(0, max(stds) * 1.3)
    ax.set_xlabel(f"advantage estimator (groups of G = {group_size})")
    ax.set_ylabel("std of group gradient estimates")
    ax.set_title("A baseline changes the spread; the same-group mean also shrinks the scale")
    ax.grid(axis="y", alpha=0.25)
    true_gradient = result.get("true_gradient", 1.0)
    ax.text(0.98, 0.97,
            f"true gradient {true_gradient:g}\n"
            f"(G-1)/G predicted {result['predicted_scale']:.4f}\n"
            f"same-group scale observed {result['observed_scale']:.4f}",
            transform=ax.transAxes, ha="right", va="top", fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"})
    return figure


def learning_curve(curve: Mapping[str, Any], seeds: Sequence[int], profile: str,
                   ceiling: float = CEILING) -> Figure:
    """PPO's deterministic evaluation return against environment steps, from ``aggregate_training_runs``.

    The median over seeds with a band (the interquartile range from four seeds on; with fewer, the range from the
    lowest to the highest seed, labelled so), every seed as a faint dashed line in a colour of its own, and the
    time-limit ceiling. Steps at which no run was evaluated are left out.
    """
    steps = np.asarray(curve["environment_steps"], dtype=np.float64)
    median = np.asarray(curve["median"], dtype=np.float64)
    finite = np.isfinite(median)
    figure = Figure(figsize=(9.0, 5.0), layout="constrained")
    ax = figure.add_subplot()
    runs = np.asarray(curve["all_curves"], dtype=np.float64).reshape(len(seeds), -1)
    if len(seeds) >= FEWEST_SEEDS_FOR_QUARTILES:
        low, high = np.asarray(curve["q25"])[finite], np.asarray(curve["q75"])[finite]
        band = f"interquartile range over the {len(seeds)} seeds"
    else:
        with np.errstate(invalid="ignore"):  # a step no seed reached is left out above
            low, high = np.nanmin(runs[:, finite], axis=0), np.nanmax(runs[:, finite], axis=0)
        band = f"range over the {len(seeds)} seeds (lowest to highest)"
    if len(seeds) > 1:
        ax.fill_between(steps[finite], low, high, alpha=0.2, color=MEDIAN_COLOUR, linewidth=0, label=band)
    for i, (seed, run) in enumerate(zip(seeds, runs)):
        evaluated = np.isfinite(run)
        ax.plot(steps[evaluated], run[evaluated], alpha=0.6, linewidth=0.9, linestyle="--",
                color=SEED_COLOURS[i % len(SEED_COLOURS)], label=f"seed {seed}")
    ax.plot(steps[finite], median[finite], marker="o", markersize=3.5, color=MEDIAN_COLOUR, linewidth=2.0,
            label="median evaluation return", clip_on=False, zorder=3)
    ax.axhline(ceiling, linestyle="--", linewidth=1.0, color="black", label=f"time-limit ceiling ({ceiling:g})")
    ax.set_xlim(0, steps.max() * 1.02 if steps.size else 1)  # the last marker whole, not cut at the frame
    ax.set_ylim(0, ceiling * 1.08)
    ax.set_xlabel("environment transitions")
    ax.set_ylabel("deterministic evaluation return")
    ax.set_title(f"PPO on CartPole — {profile} profile, {len(seeds)} seeds")
    ax.grid(alpha=0.25)
    ax.legend(loc="lower right", fontsize=9)
    return figure


def ppo_diagnostics(history: Mapping[str, Sequence[float]], seed: int) -> Figure:
    """One run's update diagnostics: approximate KL above, the two fractions below (they differ in scale)."""
    updates = np.asarray(history["update"])
    figure = Figure(figsize=(9.0, 5.6), layout="constrained")
    kl_ax, fraction_ax = figure.subplots(2, 1, sharex=True)
    kl_ax.plot(updates, history["approx_kl"], marker="o", markersize=3, color="tab:purple",
               label="approximate KL (non-negative estimator)")
    kl_ax.set_ylabel("approx. KL(old ‖ new)")
    kl_ax.set_ylim(bottom=0)
    kl_ax.grid(alpha=0.25)
    kl_ax.legend(loc="upper right", fontsize=9)
    fraction_ax.plot(updates, history["active_clip_fraction"], marker="s", markersize=3, color="tab:red",
                     label="active clip fraction (clip binds, no gradient)")
    fraction_ax.plot(updates, history["ratio_outside_fraction"], marker="^", markersize=3, color="tab:green",
                     label="ratio outside [1-ε, 1+ε]")
    fraction_ax.set_ylim(bottom=0)
    fraction_ax.set_xlabel("PPO update")
    fraction_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fraction_ax.set_ylabel("fraction of samples")
    fraction_ax.grid(alpha=0.25)
    fraction_ax.legend(loc="upper right", fontsize=9)
    figure.suptitle(f"Local optimisation diagnostics of one PPO run (seed {seed}), measured on each update's batch")
    return figure


def sequence_reward_curve(history: Mapping[str, Sequence[float]]) -> Figure:
    """The tiny sequence policy's mean evaluation reward against RLOO iterations."""
    return _rloo_curve(history, "evaluation_mean_reward", "mean evaluation reward (verifier, 0 to 1)",
                       "A tiny autoregressive policy learns from a verifiable reward")


def sequence_success_curve(history: Mapping[str, Sequence[float]]) -> Figure:
    """The share of sampled responses that are exactly right, against RLOO iterations."""
    return _rloo_curve(history, "success_rate", "exact-response success rate",
                       "Whole-response success during training (sampled responses)", color="tab:green")


def _rloo_curve(history: Mapping[str, Sequence[float]], key: str, ylabel: str, title: str, **style: str) -> Figure:
    """``history[key]``, a quantity between 0 and 1, against RLOO iterations."""
    figure = Figure(figsize=(9.0, 4.6), layout="constrained")
    ax = figure.add_subplot()
    ax.plot(history["iteration"], history[key], marker="o", markersize=3, **style)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("RLOO iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.25)
    return figure
