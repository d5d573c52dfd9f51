"""The lab's PPO learning curve says what its band is, keeps its last marker whole, and never draws a seed in the
median's colour."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from kata.lab import plots

pytestmark = pytest.mark.frame


def _curve(seeds: int) -> dict:
    steps = np.arange(1, 6) * 1000.0
    runs = np.array([np.linspace(50 + 40 * i, 500, steps.size) for i in range(seeds)])
    return {"environment_steps": steps, "median": np.median(runs, axis=0), "q25": np.quantile(runs, 0.25, axis=0),
            "q75": np.quantile(runs, 0.75, axis=0), "all_curves": runs}


def _labels(figure) -> list[str]:
    return [text.get_text() for text in figure.axes[0].get_legend().get_texts()]


@pytest.mark.parametrize("seeds, band", [(2, "range over the 2 seeds (lowest to highest)"),
                                         (3, "range over the 3 seeds (lowest to highest)"),
                                         (5, "interquartile range over the 5 seeds")])
def test_the_band_is_what_its_label_says(seeds, band):
    curve = _curve(seeds)
    figure = plots.learning_curve(curve, list(range(seeds)), "smoke")
    assert band in _labels(figure), f"with {seeds} seeds the band is the {band}: {_labels(figure)}"
    [filled] = figure.axes[0].collections
    top = filled.get_paths()[0].vertices[:, 1].max()
    expected = curve["all_curves"].max() if seeds < 4 else curve["q75"].max()
    assert top == pytest.approx(expected), f"the band reaches {top}, its {band} reaches {expected}"


def test_one_seed_draws_no_band():
    figure = plots.learning_curve(_curve(1), [11], "smoke")
    assert not figure.axes[0].collections, "one seed has no spread to show"


def test_the_last_marker_is_whole_and_no_seed_shares_the_medians_colour():
    curve = _curve(7)
    figure = plots.learning_curve(curve, list(range(7)), "smoke")
    axis = figure.axes[0]
    assert axis.get_xlim()[1] > curve["environment_steps"].max(), (
        f"the x axis ends past the last evaluation, so its marker is drawn whole: {axis.get_xlim()}")
    lines = {line.get_label(): to_rgba(line.get_color()) for line in axis.get_lines()}
    median = lines.pop("median evaluation return")
    seeds = [colour for label, colour in lines.items() if label.startswith("seed")]
    assert len(seeds) == 7 and median not in seeds, f"a seed's line is drawn in the median's colour {median}"
