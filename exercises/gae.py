"""Exercise 3 — GAE with two masks: bootstrap and trace cuts (GUIDE.md §3).

Two different questions decide how a record's advantage is built:

- ``terminated[t]``: did the task end at this step? Then there is no next state to value: the TD residual does not
  bootstrap, ``δ_t = r_t - V(s_t)``. Otherwise ``δ_t = r_t + γ V(s_{t+1}) - V(s_t)``, with ``V(s_{t+1})`` taken from
  ``next_values[t]`` (the value of the observation this step produced, even when a time limit or the rollout's end
  cut the record: that is exactly when it is needed).
- ``trace_cuts[t]``: may the backward recursion carry the next record's advantage into this one? Not when the next
  record belongs to another episode or another rollout: ``A_t = δ_t + γλ (1 - cut_t) A_{t+1}``.

Termination always cuts the trace; a cut (time limit, rollout end) does not always terminate.
"""

from __future__ import annotations

from functools import reduce

import torch

from kata.arrays import (
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_ndim,
    check_probability,
    check_same_shape,
    like_inputs,
)
from kata.concepts.stub import not_implemented


def gae_advantages(
    rewards: ArrayLike,
    values: ArrayLike,
    next_values: ArrayLike,
    terminated: ArrayLike,
    trace_cuts: ArrayLike,
    gamma: float,
    gae_lambda: float,
) -> ArrayLike:
    """Generalised advantage estimates, with separate bootstrap and trace masks.

    Args:
        rewards: ``[T]`` or time-major ``[T, N]`` rewards ``r_t``.
        values: ``V(s_t)``, the same shape.
        next_values: ``V(s_{t+1})`` for the observation step t produced, the same shape. Ignored where
            ``terminated``: any value there, NaN and ±inf included, leaves every advantage unchanged (select the
            bootstrap, e.g. with ``torch.where``: a mask multiplied in gives ``0 · inf = NaN``).
        terminated: bool or 0/1, the same shape: the task ended at step t (no bootstrap).
        trace_cuts: bool or 0/1, the same shape: the recursion must not continue from t into t + 1 (episode end,
            time limit, rollout end). Must be True wherever ``terminated`` is. Nothing at or after t + 1 reaches
            the advantages up to t, whatever it holds (NaN and ±inf included): at a cut, ``A_t = δ_t``.
        gamma: discount in [0, 1].
        gae_lambda: trace decay λ in [0, 1]: the TD residual at 0, the bootstrapped discounted return minus V at 1.

    Returns:
        Advantages of the same shape, in the promoted floating dtype of the three value arrays (float32 with
        float64 gives float64). NumPy when every argument is NumPy; a tensor if any of the five arrays is a tensor,
        with autograd kept into each of ``rewards``, ``values`` and ``next_values`` that requires grad (the masks
        carry none). The inputs are never changed.

    Raises:
        ValueError: shapes differ or are not 1-D/2-D, masks are not 0/1, a terminated record is not cut, gamma or
            gae_lambda is outside [0, 1].

    Example (the lab's two records: a rollout-buffer cut that still bootstraps, then a terminal):
        >>> import numpy as np
        >>> gae_advantages(np.array([1.0, 100.0]), np.array([2.0, 0.0]), np.array([10.0, 0.0]),
        ...                np.array([False, True]), np.array([True, True]), gamma=0.9, gae_lambda=1.0)
        array([  8., 100.])
    """
    rewards_t = as_float_tensor(rewards, "rewards")
    values_t = as_float_tensor(values, "values")
    next_values_t = as_float_tensor(next_values, "next_values")
    check_ndim("rewards", rewards_t, (1, 2))
    check_same_shape("rewards", rewards_t, values=values_t, next_values=next_values_t)
    terminated_t = check_binary_mask("terminated", terminated)
    trace_cuts_t = check_binary_mask("trace_cuts", trace_cuts)
    check_same_shape("rewards", rewards_t, terminated=terminated_t, trace_cuts=trace_cuts_t)
    not_cut = terminated_t & ~trace_cuts_t
    if not_cut.any():
        where = tuple(int(i) for i in not_cut.nonzero()[0])
        raise ValueError(
            "trace_cuts must be True wherever terminated is True (a terminal record ends its trace); "
            f"record {where if len(where) > 1 else where[0]} is terminated but not cut"
        )
    dtype = reduce(torch.promote_types, (rewards_t.dtype, values_t.dtype, next_values_t.dtype))
    rewards_t, values_t, next_values_t = rewards_t.to(dtype), values_t.to(dtype), next_values_t.to(dtype)
    gamma = check_probability("gamma", gamma)
    gae_lambda = check_probability("gae_lambda", gae_lambda)
    # rewards_t, values_t, next_values_t: checked floating tensors of one shape; terminated_t, trace_cuts_t: bool
    # tensors; gamma, gae_lambda: floats. Compute in torch, then return like_inputs(result, rewards, values,
    # next_values, terminated, trace_cuts) so NumPy callers get NumPy back. Build the result without in-place
    # writes (keep autograd).
    raise not_implemented("gae_advantages")
