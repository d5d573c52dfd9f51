"""The Hypothesis strategies the tests use, and the probes `kata diagnose` runs each public function on, one module
per concept in teaching order (``kata/testing/strategies/<concept>.py``: its tests' strategies, its probe cases,
``PROBES`` and ``UNPROBED``). A concept module may import an earlier one's strategies, never a later one's.

This package holds what several concepts share: the building blocks below (bounded floats and arrays, the domain
every contract admits, shapes, seeds, typed batches) and :class:`Probes`, which describes one function's probe set
as data (kata.catalogue.probes collects them; the testing layer never imports the catalogue). Bounds are part of the
contract a test checks: magnitudes stay where float arithmetic is exact enough for the tolerances the tests state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# ---- shared building blocks ------------------------------------------------------------------------------------

MAX_MAGNITUDE = 100.0


def floats(low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[float]:
    """Finite float64 values in [low, high] (no NaN, no infinity, no subnormals)."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def float_arrays(shape, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=floats(low, high))


def bool_arrays(shape) -> st.SearchStrategy[np.ndarray]:
    """Boolean arrays drawn as one integer's bits: one choice per array, not one per element (drawing is most of a
    concept test's time); a failing mask still shrinks towards all False."""
    size = int(np.prod(shape, dtype=np.int64))
    return st.integers(0, 2**size - 1).map(
        lambda bits: np.array([(bits >> i) & 1 for i in range(size)], dtype=bool).reshape(shape))


unit_interval, clip_epsilons = st.floats(0.0, 1.0, allow_nan=False), st.floats(0.01, 0.5, allow_nan=False)

# ---- the domain every contract admits: dtypes, containers, values at ignored positions ---------------------------
# A function documented "NumPy in, NumPy out; a tensor if any input is a tensor" is called with every mixture; one that
# keeps "the promoted floating dtype" sees float32 and float64, mixed too. Positions the contract ignores (masked,
# padded, after a cut) may hold anything finite or not: IGNORED_VALUES are the values that break an implementation
# which computes there and masks afterwards (0 * inf is NaN, exp(800) is inf).

float_dtypes = st.sampled_from([np.float32, np.float64])
IGNORED_VALUES = (np.inf, -np.inf, np.nan, 1e4, -1e4, 800.0, -800.0, 88.0, -104.0)


def extreme_log_probs(dtype) -> list[float]:
    """Log-probabilities that are valid yet far from 0: where ``exp`` underflows to 0 in ``dtype`` (below about
    -104 in float32, -745 in float64) and just above, so that a ratio computed as ``exp(new) / exp(old)`` gives
    0 / 0 while ``exp(new - old)`` stays exact."""
    if np.dtype(dtype) == np.float32:
        return [-90.0, -104.0, -120.0, -200.0]
    return [-700.0, -745.0, -800.0, -1000.0]


@st.composite
def containers(draw, arrays: dict, *, tensors: bool | None = None) -> dict:
    """``arrays`` (name -> NumPy array; other values pass through unchanged), each drawn as NumPy or as a CPU
    tensor independently: all NumPy, all tensors and every mixture. ``tensors`` forces all (True) or none (False)."""
    import torch

    chosen = {}
    for name, value in arrays.items():
        as_tensor = isinstance(value, np.ndarray) and (draw(st.booleans()) if tensors is None else tensors)
        chosen[name] = torch.from_numpy(value.copy()) if as_tensor else value
    return chosen


@st.composite
def typed_batches(draw, batches: st.SearchStrategy[dict], names: tuple[str, ...], log_probs: bool = False,
                  masks: tuple[str, ...] = ()) -> dict:
    """A batch as a caller may pass it: each of ``names`` float32 or float64, each of ``masks`` bool, 0/1 int64 or
    0/1 float32, and every array NumPy or a tensor, independently (:func:`containers`). With ``log_probs``, half
    the batches move both log-probabilities by one of :func:`extreme_log_probs` of their promoted dtype: the ratio
    is unchanged, ``exp`` of either underflows."""
    batch = draw(batches)
    for name in masks:
        batch[name] = batch[name].astype(draw(st.sampled_from([np.bool_, np.int64, np.float32])))
    dtypes = {name: draw(float_dtypes) for name in names}
    if log_probs and draw(st.booleans()):
        offset = draw(st.sampled_from(extreme_log_probs(np.result_type(dtypes["new_log_probs"],
                                                                       dtypes["old_log_probs"]))))
        for name in ("new_log_probs", "old_log_probs"):
            batch[name] = batch[name] + offset
    for name in names:
        batch[name] = batch[name].astype(dtypes[name])
    return draw(containers(batch))

# ---- shapes and seeds several concepts draw -----------------------------------------------------------------------

def sample_shapes(max_samples: int = 12) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch of samples [N], or [B, N] (sequences of per-step samples)."""
    return st.one_of(st.tuples(st.integers(1, max_samples)), st.tuples(st.integers(1, 3), st.integers(1, 4)))


seeds = st.integers(0, 2**32 - 1)

# ---- the probes ---------------------------------------------------------------------------------------------------
# Each concept module ends with PROBES, one Probes per public function, and UNPROBED, what has none and why. They are
# data: kata.catalogue.probes collects them by the course's concept names, turns each observer's name into one of
# kata.catalogue.observations' observers, and draws each function's cases once (kata.testing.drawing: a fixed seed).

UPDATE_PROBES = 8  # ppo_update and rloo_iteration train small networks: fewer, dearer probes


@dataclass(frozen=True)
class Probes:
    """The probes of one public function: the cases ``cases()`` returns, each observed by the observer named
    ``observer`` (``"values"``, ``"result_containers"``, ``"one_tensor_at_a_time"``, or one of a kind of function:
    ``"minibatch_partition"``, ``"sampled_responses"``, ``"updated_networks"``, ``"iterated_policy"``; the
    module kata.catalogue.observations says what each observes), with the gradients of the float arguments
    ``gradients`` and, with ``kinds``, each output's container and dtype. ``training``: the function trains float32
    networks, and observations agree to the looser tolerance summation order leaves."""

    function: str
    cases: Callable[[], list[Any]] = field(repr=False)
    observer: str = "values"
    gradients: tuple[str, ...] = ()
    kinds: bool = False
    training: bool = False
