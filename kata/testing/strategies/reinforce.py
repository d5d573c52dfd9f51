"""1. reinforce: the strategies its tests draw from, and its probes (what `kata diagnose` runs each public
function on: cases drawn from those strategies with a fixed seed)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, Edge, plain_array, in_float_dtypes, piecewise
from kata.testing.drawing import drawn
from kata.testing.strategies import (
    Probes,
    bool_arrays,
    extreme_log_probs,
    float_arrays,
    floats,
    sample_shapes,
    unit_interval,
)

# ---- strategies ---------------------------------------------------------------------------------------------------

def any_shapes(max_samples: int = 12) -> st.SearchStrategy[tuple[int, ...]]:
    """Non-empty shapes of 0 to 3 axes: [N] and [B, N] most often, a 0-d scalar and [B, T, N] too."""
    return st.one_of(sample_shapes(max_samples), st.just(()), st.tuples(*[st.integers(1, 3)] * 3))


EXTREME_LOG_PROBS = tuple(extreme_log_probs(np.float32) + extreme_log_probs(np.float64))  # exact in both dtypes


@st.composite
def surrogate_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for reinforce_surrogate_loss: log-probabilities <= 0 (in [-10, 0], and far out where exp
    underflows: EXTREME_LOG_PROBS) and advantages in [-10, 10] (zeros drawn often), of one non-empty shape with 0 to
    3 axes."""
    shape = draw(any_shapes(max_samples))
    log_probs = draw(hnp.arrays(np.float64, shape, elements=st.one_of(floats(-10.0, 0.0),
                                                                      st.sampled_from(EXTREME_LOG_PROBS))))
    advantages = draw(hnp.arrays(np.float64, shape, elements=st.one_of(st.just(0.0), floats(-10.0, 10.0))))
    return dict(log_probs=log_probs, advantages=advantages)


@st.composite
def softmax_policies(draw, max_actions: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A one-state softmax policy's logits [K] (2 <= K <= 6, |logit| <= 3) and each action's reward [K]."""
    actions = draw(st.integers(2, max_actions))
    return draw(float_arrays((actions,), -3.0, 3.0)), draw(float_arrays((actions,), -10.0, 10.0))


@st.composite
def reward_streams(
    draw, time_major: bool | None = None, min_steps: int = 1, max_steps: int = 10, max_envs: int = 3
) -> dict:
    """Keyword arguments for discounted_reward_to_go: [T] or time-major [T, N] rewards in [-10, 10], episode ends at
    random, at every step or at none, and gamma with the endpoints 0 and 1 drawn often."""
    batched = draw(st.booleans()) if time_major is None else time_major
    steps = draw(st.integers(min_steps, max_steps))
    shape = (steps, draw(st.integers(1, max_envs))) if batched else (steps,)
    return dict(
        rewards=draw(float_arrays(shape, -10.0, 10.0)),
        episode_ends=draw(st.one_of(bool_arrays(shape), st.builds(np.full, st.just(shape), st.booleans()))),
        gamma=draw(st.one_of(st.just(1.0), st.just(0.0), unit_interval)),
    )

# ---- probes -------------------------------------------------------------------------------------------------------

PROBES = (
    Probes("reinforce_surrogate_loss", drawn(surrogate_batches, "surrogate_batches"), "one_tensor_at_a_time",
           gradients=("log_probs", "advantages")),
    Probes("discounted_reward_to_go", drawn(reward_streams, "reward_streams"), gradients=("rewards",)),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

def _its_last_ten_steps_alone(function, arguments: dict) -> list[np.ndarray]:
    """The whole result, its last 10 steps computed from those steps alone (nothing before them reaches them)."""
    whole = plain_array(function(**arguments))
    tail = {**arguments, "rewards": arguments["rewards"][-10:], "episode_ends": arguments["episode_ends"][-10:]}
    return [np.concatenate([whole[:-10], plain_array(function(**tail))])]


def _reward_to_go_edges() -> list[Edge]:
    """Thousands of steps: episodes of 10 (each computed on its own must give the same), one long episode with
    γ = 0.5, where γ^t underflows long before its end (its last 10 steps depend on nothing before them), and a
    time-major batch with fewer steps than streams (each stream computed on its own)."""
    random = np.random.default_rng(11)
    long = random.uniform(-1.0, 1.0, 3000)
    ends = np.zeros(3000, bool)
    ends[9::10] = True
    wide = dict(rewards=random.uniform(-1.0, 1.0, (3, 50)), episode_ends=random.random((3, 50)) < 0.3, gamma=0.9)
    episodes = [slice(start, start + 10) for start in range(0, 3000, 10)]
    return [
        Edge("3000 steps in episodes of 10, γ = 0.99", dict(rewards=long, episode_ends=ends, gamma=0.99),
             lambda f, a: piecewise(f, a, episodes, arrays=("rewards", "episode_ends"))),
        Edge("one episode of 3000 steps, γ = 0.5", dict(rewards=long, episode_ends=np.zeros(3000, bool), gamma=0.5),
             _its_last_ten_steps_alone),
        Edge("[T, N] with T = 3 < N = 50", wide,
             lambda f, a: piecewise(f, a, [slice(n, n + 1) for n in range(50)], axis=1,
                                    arrays=("rewards", "episode_ends"))),
    ]


CONTRACTS = (
    Contract("reinforce_surrogate_loss", lambda: in_float_dtypes(surrogate_batches(), ("log_probs", "advantages")),
             differentiable=("log_probs",), data=("advantages",)),
    Contract("discounted_reward_to_go", lambda: in_float_dtypes(reward_streams(), ("rewards",)),
             differentiable=("rewards",), edges=_reward_to_go_edges),
)
