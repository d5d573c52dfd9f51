"""4. clipped_surrogate: the strategies its tests draw from, and its probes (drawn batches, ratios at the clip
range's ends and beyond, log-probabilities where exp underflows, logits whose probabilities underflow; the PPO loss's
terms, which its tests build inline)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kata.testing.battery import Contract, Edge, in_float_dtypes, plain_array
from kata.testing.drawing import drawn
from kata.testing.strategies import Probes, bool_arrays, clip_epsilons, float_arrays, floats, sample_shapes

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def ppo_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for clipped_surrogate_terms: clip_epsilon in [0.01, 0.5], old log-probs in [-5, 0], new =
    old + a shift in [-1, 1] (so ratios fall on both sides of [1 - eps, 1 + eps]) or one of
    :func:`boundary_log_ratios`, advantages in [-10, 10] with zeros and both signs drawn, of one shape [N] or
    [B, N]."""
    shape = draw(sample_shapes(max_samples))
    epsilon = draw(clip_epsilons)
    old = draw(float_arrays(shape, -5.0, 0.0))
    shift = draw(hnp.arrays(np.float64, shape, elements=st.one_of(floats(-1.0, 1.0),
                                                                 st.sampled_from(boundary_log_ratios(epsilon)))))
    advantages = draw(hnp.arrays(np.float64, shape, elements=st.one_of(st.just(0.0), floats(-10.0, 10.0))))
    return dict(new_log_probs=old + shift, old_log_probs=old, advantages=advantages, clip_epsilon=epsilon)


def boundary_log_ratios(epsilon: float) -> list[float]:
    """Log-ratios where a random draw rarely lands and a wrong interval shows: r = e^±ε and the midpoints of the
    gaps between [1 - ε, 1 + ε] and [e^-ε, e^ε]. Each is at least ε²/4 away from 1 ± ε, so rounding never decides
    which side of the clip it falls on."""
    upper, lower = (1.0 + epsilon + np.exp(epsilon)) / 2, (1.0 - epsilon + np.exp(-epsilon)) / 2
    return [epsilon, -epsilon, float(np.log(upper)), float(np.log(lower))]


@st.composite
def value_batches(draw, max_samples: int = 12) -> dict:
    """Keyword arguments for clipped_value_loss: old values and returns in [-10, 10], new values within 3 of the old
    (inside and outside the clip range), one shape [N] or [B, N], clip_epsilon in [0.01, 0.5]."""
    shape = draw(sample_shapes(max_samples))
    old = draw(float_arrays(shape, -10.0, 10.0))
    return dict(values=old + draw(float_arrays(shape, -3.0, 3.0)), old_values=old,
                returns=draw(float_arrays(shape, -10.0, 10.0)), clip_epsilon=draw(clip_epsilons))


SURROGATE_ARRAYS, VALUE_ARRAYS = ("new_log_probs", "old_log_probs", "advantages"), ("values", "old_values", "returns")


@st.composite
def entropy_batches(draw, max_samples: int = 12) -> np.ndarray:
    """Per-sample entropies in [0, 2], of shape [N] or [B, N]."""
    return draw(float_arrays(draw(sample_shapes(max_samples)), 0.0, 2.0))


@st.composite
def categorical_pairs(draw, max_actions: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Two categorical distributions over the same K actions (2 <= K <= 6), as logits in [-3, 3]."""
    actions = draw(st.integers(2, max_actions))
    return draw(float_arrays((actions,), -3.0, 3.0)), draw(float_arrays((actions,), -3.0, 3.0))


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


ppo_loss_cases = st.fixed_dictionaries(
    dict(policy_loss=floats(-10.0, 10.0), value_loss=floats(0.0, 10.0), entropy=entropy_batches(),
         value_coefficient=floats(0.0, 2.0), entropy_coefficient=floats(0.001, 0.1))
)

# ---- probes -------------------------------------------------------------------------------------------------------

def _surrogate_cases() -> list[Any]:
    """Drawn batches; every third with only the advantages as a tensor (the terms must be tensors then); and the
    first eight again with both log-probabilities moved far below 0 (-800), where exp of either underflows."""
    import torch

    examples = drawn(ppo_batches, "ppo_batches")()
    mixed = [dict(case, advantages=torch.from_numpy(case["advantages"].copy())) if index % 3 == 0 else case
             for index, case in enumerate(examples)]
    far = [dict(case, new_log_probs=case["new_log_probs"] - 800.0, old_log_probs=case["old_log_probs"] - 800.0)
           for case in examples[:8]]
    return mixed + far


def _clip_boundaries() -> list[Any]:
    """Ratios at exactly 1 ± ε (exp(log r) == r for these r and ε in float64): neither clipped nor outside, since
    both branches are equal there; and ratios beyond, on both sides of the interval, with advantages of both signs."""
    cases = []
    for epsilon, ratios, advantages in ((0.5, [1.5, 0.5, 2.0, 0.25, 1.0, 1.5, 0.5], [1, -1, 1, -1, 1, -1, 1]),
                                        (0.25, [1.25, 0.75, 1.25, 0.75, 1.5, 0.5], [1, -1, -1, 1, 1, -1]),
                                        (0.5, [[1.5, 1.5, 0.5], [0.5, 2.0, 1.0]], [[1, 2, -2], [-1, 3, -1]])):
        new = np.log(np.array(ratios))
        cases.append(dict(new_log_probs=new, old_log_probs=np.zeros_like(new),
                          advantages=np.array(advantages, dtype=np.float64), clip_epsilon=epsilon))
    return cases


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


def _pick(*keys: str) -> Callable[[dict], dict]:
    return lambda case: {key: case[key] for key in keys}


PROBES = (
    Probes("clipped_surrogate_terms", _surrogate_cases, "result_containers", gradients=SURROGATE_ARRAYS),
    Probes("clipped_policy_loss", drawn(ppo_batches, "ppo_batches"), gradients=SURROGATE_ARRAYS),
    Probes("clipped_value_loss", drawn(value_batches, "value_batches")),
    Probes("categorical_entropy",
           drawn(logits_arrays, "logits_arrays", build=lambda logits: dict(logits=logits), extra=_huge_logits),
           gradients=("logits",)),
    Probes("ppo_loss", drawn(ppo_loss_cases, "ppo_loss_cases")),
    Probes("approximate_kl", drawn(ppo_batches, "ppo_batches", build=_pick("new_log_probs", "old_log_probs")),
           gradients=("new_log_probs", "old_log_probs")),
    Probes("active_clip_fraction", drawn(ppo_batches, "ppo_batches", extra=_clip_boundaries)),
    Probes("ratio_outside_fraction",
           drawn(ppo_batches, "ppo_batches", build=_pick("new_log_probs", "old_log_probs", "clip_epsilon"),
                 extra=lambda: [_pick("new_log_probs", "old_log_probs", "clip_epsilon")(case)
                                for case in _clip_boundaries()])),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

def _far_ratios(epsilon: float) -> dict:
    """Log-ratios from -50 to 50 (ratios from 2e-22 to 5e21) with advantages of both signs, for ``epsilon``."""
    random = np.random.default_rng(17)
    old = random.uniform(-5.0, 0.0, 41)
    return dict(new_log_probs=old + np.linspace(-50.0, 50.0, 41), old_log_probs=old,
                advantages=random.uniform(-2.0, 2.0, 41), clip_epsilon=epsilon)


def _policy_loss_as_written(function, arguments: dict) -> list[np.ndarray]:
    """The docstring's ``-mean(min(r · A, clip(r, 1 - ε, 1 + ε) · A))``, in float64."""
    epsilon, advantages = arguments["clip_epsilon"], arguments["advantages"]
    ratio = np.exp(arguments["new_log_probs"] - arguments["old_log_probs"])
    return [np.array(-np.minimum(ratio * advantages, np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantages).mean())]


def _kl_as_written(function, arguments: dict) -> list[np.ndarray]:
    """The docstring's ``mean((r - 1) - log r)``."""
    log_ratio = arguments["new_log_probs"] - arguments["old_log_probs"]
    return [np.array((np.expm1(log_ratio) - log_ratio).mean())]


def _shifted(function, arguments: dict) -> list[np.ndarray]:
    """The entropy of the logits less their row's largest: softmax, so the entropy, is unchanged by the shift."""
    logits = arguments["logits"]
    return [plain_array(function(logits=logits - logits.max(axis=-1, keepdims=True)))]


def _edges(function: str) -> Callable[[], list[Edge]]:
    def edges() -> list[Edge]:
        cases = [_far_ratios(epsilon) for epsilon in (1.5, 10.0)]
        if function == "clipped_value_loss":
            random = np.random.default_rng(19)
            return [Edge(f"ε = {epsilon}", dict(values=random.uniform(-50, 50, 9), old_values=random.uniform(-5, 5, 9),
                                                returns=random.uniform(-5, 5, 9), clip_epsilon=epsilon))
                    for epsilon in (1.5, 10.0)]
        if function == "categorical_entropy":
            logits = [np.array([[1e5, 2e4], [3e5, -3e5]]), np.array([[4e37, 0.0, -4e37]], dtype=np.float32),
                      np.array([[4e307, -4e307, 0.0]])]
            return [Edge(f"logits of magnitude {np.abs(z).max():.0e} ({z.dtype})", dict(logits=z), _shifted)
                    for z in logits]
        expected = {"clipped_policy_loss": _policy_loss_as_written, "approximate_kl": _kl_as_written}.get(function)
        keys = {"approximate_kl": ("new_log_probs", "old_log_probs"),
                "ratio_outside_fraction": ("new_log_probs", "old_log_probs", "clip_epsilon")}.get(function)
        return [Edge(f"log-ratios from -50 to 50, ε = {case['clip_epsilon']}",
                     {key: case[key] for key in keys} if keys else case, expected) for case in cases]

    return edges


_LOG_PROBS = ("new_log_probs", "old_log_probs")
CONTRACTS = (
    Contract("clipped_surrogate_terms", lambda: in_float_dtypes(ppo_batches(), SURROGATE_ARRAYS),
             differentiable=("new_log_probs",), data=("old_log_probs", "advantages"),
             edges=_edges("clipped_surrogate_terms")),
    Contract("clipped_policy_loss", lambda: in_float_dtypes(ppo_batches(), SURROGATE_ARRAYS),
             differentiable=("new_log_probs",), data=("old_log_probs", "advantages"),
             edges=_edges("clipped_policy_loss")),
    Contract("clipped_value_loss", lambda: in_float_dtypes(value_batches(), VALUE_ARRAYS),
             differentiable=("values",), data=("old_values", "returns"), edges=_edges("clipped_value_loss")),
    Contract("categorical_entropy", lambda: in_float_dtypes(logits_arrays().map(lambda z: dict(logits=z)), ("logits",)),
             differentiable=("logits",), edges=_edges("categorical_entropy")),
    Contract("ppo_loss", lambda: in_float_dtypes(ppo_loss_cases, ("entropy",)), differentiable=("entropy",)),
    Contract("approximate_kl", lambda: in_float_dtypes(ppo_batches().map(_pick(*_LOG_PROBS)), _LOG_PROBS),
             differentiable=("new_log_probs",), data=("old_log_probs",), edges=_edges("approximate_kl")),
    Contract("active_clip_fraction", lambda: in_float_dtypes(ppo_batches(), SURROGATE_ARRAYS),
             data=SURROGATE_ARRAYS, edges=_edges("active_clip_fraction")),
    Contract("ratio_outside_fraction",
             lambda: in_float_dtypes(ppo_batches().map(_pick(*_LOG_PROBS, "clip_epsilon")), _LOG_PROBS),
             data=_LOG_PROBS, edges=_edges("ratio_outside_fraction")),
)
