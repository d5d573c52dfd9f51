"""What a lab run computes: the plan a profile fixes, the sections' titles and figures, and the seed's examples."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata import PROFILES

DEFAULT_OUTPUT_ROOT = Path("lab-output")

SECTION_TITLES = {
    "baselines": "1. Baselines: variance and the finite-group scale",
    "gae": "2. GAE: two masks for two questions",
    "ppo": "3. PPO on CartPole",
    "masks": "4. Response tokens: shift, mask, ratios and reductions",
    "rloo": "5. A tiny autoregressive policy trained with RLOO and token-level PPO",
}
# What each section draws: skipped with the reason when its section cannot run.
SECTION_FIGURES = {
    "baselines": ("baseline_spread.png",),
    "gae": (),
    "ppo": ("ppo_learning_curve.png", "ppo_diagnostics.png"),
    "masks": (),
    "rloo": ("rloo_reward.png", "rloo_success.png"),
}


@dataclass(frozen=True)
class LabPlan:
    """Everything a lab run computes, fixed by the profile (tests shrink it with ``dataclasses.replace``).

    ``ppo_overrides`` are fields of the PPO config replaced after ``profile_config(profile, seed)``;
    ``sequence_overrides`` update ``sequence_profile_config(profile)``.
    """

    profile: str
    baseline_groups: int
    ppo_seeds: tuple[int, ...]
    ppo_overrides: Mapping[str, Any] = field(default_factory=dict)
    sequence_overrides: Mapping[str, Any] = field(default_factory=dict)
    baseline_group_size: int = 8
    baseline_seed: int = 2026
    sequence_seed: int = 5
    rows_shown: int = 6


def plan_for(profile: str) -> LabPlan:
    """The seed notebook's plan for ``profile``: smoke (seeds 11, 37; evaluation every second update) or full."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    if profile == "smoke":
        return LabPlan("smoke", baseline_groups=80_000, ppo_seeds=(11, 37), ppo_overrides={"evaluation_every": 2})
    return LabPlan("full", baseline_groups=400_000, ppo_seeds=(11, 37, 71, 101, 131))


# The seed's GAE example, the one place it is written (the lab, the notebook and the tests read it; the docstring
# of gae_advantages shows it, which a frame test checks): record 0 is cut by the rollout buffer but not terminal, so
# it bootstraps and nothing of record 1 reaches it; record 1 is a terminal.
GAE_EXAMPLE = {
    "rewards": [1.0, 100.0],
    "values": [2.0, 0.0],
    "next_values": [10.0, 0.0],
    "terminated": [False, True],
    "trace_cuts": [True, True],
    "gamma": 0.9,
    "gae_lambda": 1.0,
}
GAE_EXPECTED = [8.0, 100.0]


def gae_example_arrays() -> dict[str, Any]:
    """``GAE_EXAMPLE`` as keyword arguments of ``gae_advantages``: its lists as new NumPy arrays."""
    import numpy as np  # here, not at the top: `kata status` reads this module and must not wait for NumPy

    return {key: np.array(value) if isinstance(value, list) else value for key, value in GAE_EXAMPLE.items()}


MASK_EXAMPLE = {
    # Token positions: BOS, prompt_1, prompt_2, response_1, response_2, EOS, PAD.
    "input_ids": [[1, 10, 11, 20, 21, 2, 0], [1, 12, 30, 2, 0, 0, 0]],
    "prompt_lengths": [3, 2],
    "pad_token_id": 0,
    "eos_token_id": 2,
    # Aligned with the labels input_ids[:, 1:]; extreme values where the mask must remove them.
    "old_log_probs": [[-9.0, -8.0, -1.0, -1.2, -0.8, -20.0], [-7.0, -0.7, -0.9, -30.0, -40.0, -50.0]],
    "new_log_probs": [[9.0, 8.0, -0.7, -1.5, -0.9, 20.0], [7.0, -0.5, -1.2, 30.0, 40.0, 50.0]],
    "advantages": [1.5, -0.8],
    "clip_epsilon": 0.2,
}
