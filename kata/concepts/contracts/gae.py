"""Input checks for the `gae` concept."""

from __future__ import annotations

from functools import reduce
from typing import NamedTuple

import torch

from kata.concepts.arrays import (
    ArrayLike,
    as_float_tensor,
    check_binary_mask,
    check_ndim,
    check_probability,
    check_same_shape,
)


class GAEInputs(NamedTuple):
    """Checked GAE inputs: floating tensors of one dtype, masks as bool tensors, all of one shape [T] or [T, N]."""

    rewards: torch.Tensor
    values: torch.Tensor
    next_values: torch.Tensor
    terminated: torch.Tensor
    trace_cuts: torch.Tensor
    gamma: float
    gae_lambda: float


def gae_inputs(
    rewards: ArrayLike,
    values: ArrayLike,
    next_values: ArrayLike,
    terminated: ArrayLike,
    trace_cuts: ArrayLike,
    gamma: float,
    gae_lambda: float,
) -> GAEInputs:
    """Check every GAE argument and return them as tensors (no copies, no broadcasting, inputs untouched)."""
    floats = [as_float_tensor(x, name) for x, name in
              ((rewards, "rewards"), (values, "values"), (next_values, "next_values"))]
    check_ndim("rewards", floats[0], (1, 2))
    check_same_shape("rewards", floats[0], values=floats[1], next_values=floats[2])
    masks = [check_binary_mask(name, x) for x, name in ((terminated, "terminated"), (trace_cuts, "trace_cuts"))]
    check_same_shape("rewards", floats[0], terminated=masks[0], trace_cuts=masks[1])
    bad = masks[0] & ~masks[1]
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            "trace_cuts must be True wherever terminated is True (a terminal record ends its trace); "
            f"record {where if len(where) > 1 else where[0]} is terminated but not cut"
        )
    dtype = reduce(torch.promote_types, (x.dtype for x in floats))
    rewards_t, values_t, next_values_t = (x.to(dtype) for x in floats)
    return GAEInputs(
        rewards_t,
        values_t,
        next_values_t,
        masks[0],
        masks[1],
        check_probability("gamma", gamma),
        check_probability("gae_lambda", gae_lambda),
    )
