"""2. baselines: the strategies its tests draw from, and its probes (cases drawn from them with a fixed seed;
the simulation's settings, which its tests build inline)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, Edge, in_float_dtypes
from kata.testing.drawing import drawn
from kata.testing.strategies import Probes, floats, seeds

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def group_rewards(draw, min_group_size: int = 2, max_group_size: int = 6, max_groups: int = 5) -> np.ndarray:
    """Rewards shaped [groups, G]; groups and G differ often, so a mean over the wrong axis shows. Values in
    [-10, 10], or a verifier's 0/1 (groups whose rewards are all equal included), each row sometimes on an offset of
    ±1e6 or 1e9, where a sum loses the small differences' last digits."""
    groups = draw(st.integers(1, max_groups))
    group_size = draw(st.integers(min_group_size, max_group_size))
    elements = st.sampled_from([0.0, 1.0]) if draw(st.booleans()) else floats(-10.0, 10.0)
    rewards = draw(hnp.arrays(np.float64, (groups, group_size), elements=elements))
    offsets = draw(hnp.arrays(np.float64, (groups, 1), elements=st.sampled_from([0.0, 0.0, 0.0, 1e6, -1e6, 1e9])))
    return rewards + offsets


simulation_cases = st.fixed_dictionaries(dict(group_size=st.integers(2, 6), groups=st.integers(2, 64), seed=seeds))

# ---- probes -------------------------------------------------------------------------------------------------------

PROBES = (
    *(Probes(name, drawn(group_rewards, "group_rewards", build=lambda rewards: dict(rewards=rewards)))
      for name in ("no_baseline_advantages", "group_mean_advantages", "rloo_advantages")),
    Probes("simulate_group_baseline_bias", drawn(simulation_cases, "simulation_cases", count=8)),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

def _large_groups() -> list[Edge]:
    """Groups of 64 (and 2 groups of 40): each advantage is its reward less the baseline the docstring defines."""
    random = np.random.default_rng(5)
    rewards = [random.uniform(-1.0, 1.0, (3, 64)), random.integers(0, 2, (2, 40)).astype(np.float64)]

    def expected(baseline):
        return lambda function, arguments: [arguments["rewards"] - baseline(arguments["rewards"])]

    size = lambda r: r.shape[1]  # noqa: E731 - the group size G
    baselines = {
        "no_baseline_advantages": lambda r: np.zeros_like(r),
        "group_mean_advantages": lambda r: r.mean(axis=1, keepdims=True),
        "rloo_advantages": lambda r: (r.sum(axis=1, keepdims=True) - r) / (size(r) - 1),
    }
    return {name: [Edge(f"G = {r.shape[1]}", dict(rewards=r), expected(baseline)) for r in rewards]
            for name, baseline in baselines.items()}


CONTRACTS = tuple(
    Contract(name, lambda: in_float_dtypes(group_rewards().map(lambda rewards: dict(rewards=rewards)), ("rewards",)),
             differentiable=("rewards",), edges=lambda name=name: _large_groups()[name])
    for name in ("no_baseline_advantages", "group_mean_advantages", "rloo_advantages"))
