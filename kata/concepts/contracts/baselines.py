"""Input checks for the `baselines` concept."""

from __future__ import annotations

import torch

from kata.concepts.arrays import ArrayLike, as_float_tensor, check_ndim


def group_rewards(rewards: ArrayLike, minimum_group_size: int = 1) -> torch.Tensor:
    """``rewards`` as a floating tensor shaped ``[groups, G]`` with ``G >= minimum_group_size``."""
    tensor = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", tensor, (2,))
    if tensor.shape[0] < 1:
        raise ValueError(f"rewards must hold at least one group (shape [groups, G]); got shape {tuple(tensor.shape)}")
    if tensor.shape[1] < minimum_group_size:
        raise ValueError(
            f"rewards must have G >= {minimum_group_size} samples per group (shape [groups, G]); "
            f"got G = {tensor.shape[1]}: a leave-one-out baseline needs at least one other sample"
        )
    return tensor
