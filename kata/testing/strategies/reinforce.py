"""1. reinforce: the strategies its tests draw from, and its probes (what `kata diagnose` runs each public
function on: cases drawn from those strategies with a fixed seed, and logits whose probabilities underflow)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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


@st.composite
def logits_arrays(draw, low: float = -20.0, high: float = 20.0, max_dims: int = 3) -> np.ndarray:
    """Logits [..., K]: 1 to ``max_dims`` axes, K from 1 to 5 actions, values in [low, high]."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, min_side=1, max_side=5))
    return draw(float_arrays(shape, low, high))


def limit_logits(dtype) -> list[float]:
    """Finite logits near ``dtype``'s limits (a difference of two overflows: log_softmax gives -inf) and between."""
    top = float(np.finfo(dtype).max)
    return [top, -top, top / 2, -top / 2, 1e4, -1e4, 0.0, 1.0]


@st.composite
def masked_logits(draw) -> np.ndarray:
    """Logits [..., K] in [-20, 20] with -inf (an action that cannot be taken) at drawn positions, every row keeping
    at least one finite logit."""
    logits = draw(logits_arrays(max_dims=2))
    masked = draw(bool_arrays(logits.shape))
    masked[..., draw(st.integers(0, logits.shape[-1] - 1))] = False
    return np.where(masked, -np.inf, logits)

# ---- probes -------------------------------------------------------------------------------------------------------

def _huge_logits() -> list[Any]:
    """Probabilities that underflow to exactly 0 in float64, with rows and actions of different counts; logits of
    -inf (an action that cannot be taken); finite logits whose difference overflows (no ties at the top, where a
    valid logsumexp route loses a tie's log 2)."""
    top = float(np.finfo(np.float64).max)
    return [dict(logits=np.array([1000.0, 0.0])),
            dict(logits=np.array([[1e4, -1e4, 0.0], [0.0, 1.0, 2.0]])),
            dict(logits=np.array([[-800.0, 0.0, 3.0, 1.0]])),
            dict(logits=np.array([[0.0, 1.0, -np.inf], [-np.inf, 2.0, 2.0]])),
            dict(logits=np.array([0.5, -np.inf, -1.0, 0.0])),
            dict(logits=np.array([top, -top, 0.0]))]


PROBES = (
    Probes("reinforce_surrogate_loss", drawn(surrogate_batches, "surrogate_batches"), "one_tensor_at_a_time",
           gradients=("log_probs", "advantages")),
    Probes("discounted_reward_to_go", drawn(reward_streams, "reward_streams"), gradients=("rewards",)),
    Probes("categorical_entropy",
           drawn(logits_arrays, "logits_arrays", build=lambda logits: dict(logits=logits), extra=_huge_logits),
           gradients=("logits",)),
)
UNPROBED: dict[str, str] = {}
