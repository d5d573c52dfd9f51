"""7. token_objectives: the strategies its tests draw from, and its probes (drawn batches with extreme values
at masked positions and mixed containers and dtypes; log-ratios whose running product overflows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kata.testing.battery import Contract, Edge, in_float_dtypes
from kata.testing.drawing import draw
from kata.testing.strategies import IGNORED_VALUES, Probes, clip_epsilons, extreme_log_probs, seeds

# ---- strategies ---------------------------------------------------------------------------------------------------

@st.composite
def token_objective_batches(
    draw, max_rows: int = 5, max_length: int = 8, equal_lengths: bool = False, allow_empty: bool = True,
    dtype=np.float64,
) -> dict:
    """Keyword arguments for masked_token_ppo_terms: [B, L] log-probs, [B] advantages, a 0/1 int64 mask.

    Each row's mask is one run of ones (as response_token_mask gives) at a drawn offset; rows have different
    lengths unless ``equal_lengths``, and may be empty when ``allow_empty``. Log-probs at response positions are
    a row's base plus uniform in [-4, 0] (ratios up to e^4 from 1: both the clipped and the unclipped branch bind);
    the base is 0 or one of :func:`extreme_log_probs` of ``dtype`` (where ``exp`` of a log-prob underflows, so a
    ratio taken as ``exp(new) / exp(old)`` is 0 / 0). Advantages in [-5, 5]; masked positions hold moderate junk
    here, and the tests overwrite them with IGNORED_VALUES. Arrays are in ``dtype``; clip_epsilon from 1e-6 to 5.
    """
    rows, length = draw(st.integers(1, max_rows)), draw(st.integers(1, max_length))
    minimum = 0 if allow_empty and not equal_lengths else 1
    shared = draw(st.integers(minimum, length))
    mask = np.zeros((rows, length), dtype=np.int64)
    for i in range(rows):
        size = shared if equal_lengths else draw(st.integers(minimum, length))
        start = draw(st.integers(0, length - size))
        mask[i, start:start + size] = 1
    bases = np.array(draw(st.lists(st.sampled_from([0.0, *extreme_log_probs(dtype)]), min_size=rows,
                                   max_size=rows)))[:, None]
    random = np.random.default_rng(draw(seeds))
    response = mask == 1
    new, old = (np.where(response, bases + random.uniform(-4.0, 0.0, mask.shape),
                         random.uniform(-100.0, 100.0, mask.shape)).astype(dtype) for _ in range(2))
    return dict(
        new_log_probs=new,
        old_log_probs=old,
        advantages=random.uniform(-5.0, 5.0, rows).astype(dtype),
        mask=mask,
        clip_epsilon=draw(st.one_of(clip_epsilons, st.sampled_from([1e-6, 1.0, 5.0]))),  # any eps > 0
    )

# ---- probes -------------------------------------------------------------------------------------------------------

def _with_masked_extremes(case: dict, seed: int) -> dict:
    """The case with extreme log-probs (far beyond exp's range, infinite, NaN) at every masked position."""
    extremes = np.array(IGNORED_VALUES)
    masked = case["mask"] == 0
    random = np.random.default_rng(seed)
    for key in ("new_log_probs", "old_log_probs"):
        case[key] = np.where(masked, random.choice(extremes, size=masked.shape), case[key])
    return case


def _mixed(case: dict, index: int) -> dict:
    """The case with its containers and dtypes mixed by ``index``: one argument a tensor while the log-probs stay
    NumPy, float32 new log-probs beside float64 old ones, or a tensor bool mask; every fourth case left as drawn."""
    import torch

    case = dict(case)
    if index % 4 == 1:
        case["advantages" if "advantages" in case else "mask"] = torch.as_tensor(case.get("advantages", case["mask"]))
    elif index % 4 == 2:
        case["new_log_probs"] = case["new_log_probs"].astype(np.float32)
    elif index % 4 == 3:
        case["mask"] = torch.as_tensor(case["mask"] != 0)
    return case


def _token_cases(with_reduction: bool) -> Callable[[], list[Any]]:
    def cases() -> list[Any]:
        drawn = draw(token_objective_batches(), 36, "token_objective_batches")
        result = []
        for index, case in enumerate(drawn):
            if index % 2:
                case = _with_masked_extremes(dict(case), index)
            case = _mixed(case, index // 2)
            if with_reduction:
                case = {**case, "reduction": ("token_mean", "sequence_mean", "sequence_sum_mean")[index % 3]}
            result.append(case)
        return result

    return cases


def _overflowing_log_ratios() -> list[Any]:
    """Token log-ratios whose running product overflows though their sum does not, and one beyond float64."""
    new = np.array([[400.0, 400.0, -400.0, -400.0], [250.0, 250.0, 250.0, 250.0]])
    steps = np.array([[-400.0, -400.0, 400.0, 399.0, 1.0], [720.0, -360.0, -360.0, 0.5, 0.0]])
    return [dict(new_log_probs=new, old_log_probs=np.zeros_like(new), mask=np.ones_like(new, dtype=np.int64)),
            dict(new_log_probs=new[:, ::-1].copy(), old_log_probs=np.zeros_like(new),
                 mask=np.array([[0, 1, 1, 1], [1, 1, 0, 0]])),
            dict(new_log_probs=steps - 1.0, old_log_probs=np.full_like(steps, -1.0),
                 mask=np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]))]


def _ratio_cases() -> list[Any]:
    drawn = _token_cases(False)()
    keys = ("new_log_probs", "old_log_probs", "mask")
    return [{key: case[key] for key in keys} for case in drawn] + _overflowing_log_ratios()


PROBES = (
    Probes("masked_token_ppo_terms", _token_cases(False), kinds=True),
    Probes("masked_token_ppo_objective", _token_cases(True), kinds=True),
    *(Probes(name, _ratio_cases, gradients=("new_log_probs", "old_log_probs"), kinds=True)
      for name in ("sequence_log_probability_ratio", "sequence_probability_ratio")),
)
UNPROBED: dict[str, str] = {}

# ---- contracts (kata.testing.battery) -----------------------------------------------------------------------------

@st.composite
def _token_samples(draw, reduction: bool = False, keys: tuple[str, ...] | None = None) -> dict:
    """token_objective_batches in float32 and float64, with extreme values at masked positions half the time."""
    case = dict(draw(token_objective_batches()))
    if draw(st.booleans()):
        case = _with_masked_extremes(case, draw(seeds))
    if reduction:
        case["reduction"] = draw(st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_mean"]))
    if keys is not None:
        case = {key: case[key] for key in keys}
    return draw(in_float_dtypes(st.just(case), tuple(key for key in ("new_log_probs", "old_log_probs", "advantages")
                                                      if key in case)))


def _long_responses() -> list[Edge]:
    """A response of 2049 tokens beside one of 1, the policy unchanged (every ratio 1): each token's term is its
    row's advantage, so the reductions are ``(2049 A_0 + A_1) / 2050``, ``(A_0 + A_1) / 2`` and
    ``(2049 A_0 + A_1) / 2``."""
    mask = np.zeros((2, 2049), dtype=np.int64)
    mask[0], mask[1, 0] = 1, 1
    log_probs = np.full((2, 2049), -0.5)
    advantages = np.array([1.5, -0.25])
    sums = 2049 * advantages[0] + advantages[1]
    expected = {"token_mean": sums / 2050, "sequence_mean": advantages.mean(), "sequence_sum_mean": sums / 2}
    return [Edge(f"a response of 2049 tokens, {reduction}",
                 dict(new_log_probs=log_probs, old_log_probs=log_probs.copy(), advantages=advantages, mask=mask,
                      clip_epsilon=0.2, reduction=reduction),
                 lambda function, arguments, value=value: [np.array(value)]) for reduction, value in expected.items()]


_RATIO_KEYS = ("new_log_probs", "old_log_probs", "mask")
CONTRACTS = (
    Contract("masked_token_ppo_terms", _token_samples, differentiable=("new_log_probs",),
             data=("old_log_probs", "advantages")),
    Contract("masked_token_ppo_objective", lambda: _token_samples(reduction=True), differentiable=("new_log_probs",),
             data=("old_log_probs", "advantages"), edges=_long_responses),
    *(Contract(name, lambda: _token_samples(keys=_RATIO_KEYS), differentiable=("new_log_probs",),
               data=("old_log_probs",)) for name in ("sequence_log_probability_ratio", "sequence_probability_ratio")),
)
