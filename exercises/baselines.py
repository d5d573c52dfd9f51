"""Exercise 2 — Baselines: no baseline, the same-group mean, and RLOO (GUIDE.md §2).

For a prompt we sample a group of G responses with rewards ``r_1..r_G``. The REINFORCE estimate from the group is
``(1/G) Σ_i ∇log π(y_i) · A_i``. The advantage ``A_i`` may subtract a baseline ``b_i`` without changing the expected
gradient only if ``b_i`` does not depend on ``y_i``:

- no baseline: ``A_i = r_i`` (unbiased, high variance when rewards sit far from zero);
- same-group mean: ``A_i = r_i - mean(r)`` — the mean contains ``r_i`` itself, which scales the expected gradient by
  ``(G - 1) / G``;
- RLOO (leave-one-out): ``A_i = r_i - mean_{j≠i}(r_j)`` — unbiased, and equal to ``G/(G-1)`` times the same-group
  centred advantage.
"""

from __future__ import annotations

import numpy as np
import torch

from kata.arrays import ArrayLike, as_float_tensor, check_integer, check_ndim, like_inputs
from kata.concepts.stub import not_implemented


def no_baseline_advantages(rewards: ArrayLike) -> ArrayLike:
    """Advantages without a baseline: the rewards themselves (a new array, never the input or a view of it).

    Args:
        rewards: ``[groups, G]`` floating rewards, one row per prompt.

    Returns:
        ``[groups, G]``, the same kind of array and dtype as ``rewards`` (NumPy or torch, autograd kept).

    Raises:
        ValueError: ``rewards`` is not 2-D, or has no group or no sample.
    """
    tensor = _group_rewards(rewards)  # a checked floating tensor [groups, G]; return like_inputs(result, rewards)
    raise not_implemented("no_baseline_advantages")


def group_mean_advantages(rewards: ArrayLike) -> ArrayLike:
    """Same-group centring: ``A_i = r_i - mean_j r_j`` within each row.

    The baseline includes ``r_i``, so in expectation the gradient is ``(G - 1) / G`` of the true one.

    Args:
        rewards: ``[groups, G]`` floating rewards, one row per prompt, ``G >= 1``.

    Returns:
        ``[groups, G]``, the same kind of array and dtype as ``rewards`` (autograd kept); each row sums to zero.

    Raises:
        ValueError: ``rewards`` is not 2-D, or has no group or no sample.

    Example:
        >>> import numpy as np
        >>> group_mean_advantages(np.array([[1.0, 2.0, 6.0]]))
        array([[-2., -1.,  3.]])
    """
    tensor = _group_rewards(rewards)
    raise not_implemented("group_mean_advantages")


def rloo_advantages(rewards: ArrayLike) -> ArrayLike:
    """Leave-one-out (RLOO) advantages: ``A_i = r_i - (Σ_j r_j - r_i) / (G - 1)`` within each row.

    Sample i's baseline is the mean of the other G - 1 rewards of its group, so it does not depend on ``r_i`` and
    the estimate stays unbiased. Each row sums to zero, and ``A = G / (G - 1) · group_mean_advantages``.

    Args:
        rewards: ``[groups, G]`` floating rewards, one row per prompt, ``G >= 2``.

    Returns:
        ``[groups, G]``, the same kind of array and dtype as ``rewards`` (autograd kept).

    Raises:
        ValueError: ``rewards`` is not 2-D, has no group, or ``G < 2`` (no other sample to leave one out for).

    Example:
        >>> import numpy as np
        >>> rloo_advantages(np.array([[1.0, 2.0, 6.0]]))
        array([[-3. , -1.5,  4.5]])
    """
    tensor = _group_rewards(rewards, minimum_group_size=2)
    raise not_implemented("rloo_advantages")


# The simulated policy: one parameter θ = 0, actions a ~ N(θ, 1), so the score ∇θ log π(a) = a - θ = a.
# The reward r(a) = REWARD_OFFSET + a - a²/2 has E[r] = REWARD_OFFSET + θ - (θ² + 1)/2, whose derivative at θ = 0
# is exactly 1: the true gradient every estimator is compared with. The offset keeps rewards far from zero, which is
# where a baseline pays.
REWARD_OFFSET = 5.0
TRUE_GRADIENT = 1.0


def simulate_group_baseline_bias(group_size: int, groups: int, seed: int) -> dict[str, float]:
    """Simulate many groups and compare the three estimators' mean and spread.

    Each group draws ``group_size`` actions from the policy above and forms the group gradient estimate
    ``g = (1/G) Σ_i a_i · A_i`` with each baseline. Over ``groups`` independent groups:

    Returns:
        A dict of finite Python floats: ``true_gradient`` (1.0); ``plain_mean``, ``plain_std`` (no baseline);
        ``same_group_mean``, ``same_group_std``; ``rloo_mean``, ``rloo_std``; ``predicted_scale = (G-1)/G``;
        ``observed_scale = same_group_mean / true_gradient``, to compare with the prediction. A ``*_mean`` is the
        mean of the ``groups`` per-group estimates g; a ``*_std`` is their standard deviation, the spread of ONE
        group's estimate (not the standard error of the mean, which is std / sqrt(groups)); with Bessel's
        correction (ddof = 1) or without (ddof = 0), both accepted; 0.0 when ``groups = 1``.
        The same seed gives the same numbers, bit for bit; another seed draws other actions.

    Raises:
        ValueError: ``group_size < 2`` or ``groups < 1``.
    """
    group_size = check_integer("group_size", group_size, minimum=2)
    groups = check_integer("groups", groups, minimum=1)
    # Draw the actions with np.random.default_rng(seed), build the rewards, then use your three advantage
    # functions above: one vectorised pass over all groups, no Python loop over groups.
    raise not_implemented("simulate_group_baseline_bias")


def _group_rewards(rewards: ArrayLike, minimum_group_size: int = 1) -> torch.Tensor:
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
