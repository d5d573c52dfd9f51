"""The reference for REINFORCE: the score-function estimator and the detach contract.

The policy gradient is ``∇θ E[R] = E[∇θ log πθ(a|s) · A]``: the reward is never differentiated, only the
log-probability of the action that was taken. An autograd framework gets there through a *surrogate loss*, a
scalar whose gradient equals (minus) that estimate: ``L = -mean(log π(a|s) · A)``. The advantage ``A`` must enter
as a constant: if gradient flowed into it, the loss would also train whatever computed it (a critic, a reward
model) in the direction that makes the policy's loss small, which is not what either of them is for.
"""

from __future__ import annotations

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
# BEGIN STUB
# from kata.concepts.stub import not_implemented
# END STUB


def reinforce_surrogate_loss(log_probs: ArrayLike, advantages: ArrayLike) -> ArrayLike:
    """The REINFORCE surrogate loss ``-mean(log_probs · advantages)``, with the advantages held constant.

    Minimising it follows the policy gradient: its gradient with respect to the policy's parameters is
    ``-mean(A · ∇ log π)``. The advantages are detached even when they require grad, so no gradient ever
    reaches them (or whatever computed them).

    Args:
        log_probs: log-probabilities ``log π(a_i|s_i)`` of the actions taken, any non-empty shape (usually
            ``[N]``), floating, float32 or float64; any value <= 0, however far below (the loss never leaves log
            space).
        advantages: ``A_i``, the same shape (no broadcasting), floating; a tensor that requires grad is used as
            a constant and left as it was (never detached in place).

    Returns:
        A scalar in the promoted floating dtype of the two inputs: a 0-d tensor (autograd to ``log_probs`` kept,
        none to ``advantages``) if either input is a tensor, else a 0-d NumPy array (or NumPy scalar).

    Raises:
        ValueError: the shapes differ, or the inputs are empty.

    Example:
        >>> import numpy as np
        >>> reinforce_surrogate_loss(np.array([-0.5, -2.0]), np.array([2.0, -1.0]))
        array(-0.5)
    """
    log_probs_t = as_float_tensor(log_probs, "log_probs")
    advantages_t = as_float_tensor(advantages, "advantages", like=log_probs_t)
    if log_probs_t.numel() == 0:
        raise ValueError(f"log_probs must hold at least one value; got shape {tuple(log_probs_t.shape)}")
    check_same_shape("log_probs", log_probs_t, advantages=advantages_t)
    dtype = torch.promote_types(log_probs_t.dtype, advantages_t.dtype)
    log_probs_t, advantages_t = log_probs_t.to(dtype), advantages_t.to(dtype)
    # BEGIN SOLUTION
    loss = -(log_probs_t * advantages_t.detach()).mean()
    return like_inputs(loss, log_probs, advantages)
    # END SOLUTION
    # BEGIN STUB
    # # log_probs_t, advantages_t: floating tensors of one shape and dtype. Which of the two may carry gradient?
    # # Return like_inputs(loss, log_probs, advantages) so NumPy callers get NumPy back.
    # raise not_implemented("reinforce_surrogate_loss")
    # END STUB


def discounted_reward_to_go(rewards: ArrayLike, episode_ends: ArrayLike, gamma: float) -> ArrayLike:
    """Discounted returns from each step to the end of its episode: ``G_t = r_t + γ (1 - end_t) G_{t+1}``.

    A step that ends an episode starts a fresh sum: nothing after it is credited to it or to anything before it.
    A trace that runs off the end of the array stops there (``G_T = 0``).

    Args:
        rewards: ``[T]`` or time-major ``[T, N]`` (N independent streams) floating rewards.
        episode_ends: bool or 0/1 (any numeric dtype), the same shape, NumPy or tensor whatever ``rewards`` is:
            step t is the last step of its episode.
        gamma: discount in [0, 1], both ends included.

    Returns:
        Returns of the same shape and floating dtype as ``rewards``, the same kind of array as ``rewards``
        (``episode_ends`` does not decide it); for tensor rewards autograd is kept, every ``r_s`` reaching each
        ``G_t`` it is summed into.

    Raises:
        ValueError: ``rewards`` is not 1-D or 2-D, shapes differ, the mask is not 0/1, gamma is outside [0, 1].

    Example:
        >>> import numpy as np
        >>> discounted_reward_to_go(np.array([1.0, 1.0, 1.0]), np.array([0, 1, 0]), gamma=0.5)
        array([1.5, 1. , 1. ])
    """
    rewards_t = as_float_tensor(rewards, "rewards")
    check_ndim("rewards", rewards_t, (1, 2))
    ends = check_binary_mask("episode_ends", episode_ends)
    check_same_shape("rewards", rewards_t, episode_ends=ends)
    gamma_value = check_probability("gamma", gamma)
    # BEGIN SOLUTION
    carries = (~ends).to(rewards_t.dtype)
    # Backwards over time, out of place, so autograd through tensor rewards stays intact.
    returns = [rewards_t[0]] * rewards_t.shape[0]
    following = torch.zeros_like(rewards_t[0])
    for t in range(rewards_t.shape[0] - 1, -1, -1):
        following = rewards_t[t] + gamma_value * carries[t] * following
        returns[t] = following
    return like_inputs(torch.stack(returns), rewards)
    # END SOLUTION
    # BEGIN STUB
    # # rewards_t: [T] or [T, N] floats; ends: a bool tensor of that shape; gamma_value: a float. Walk t backwards
    # # over axis 0 and build the result without in-place writes (keep autograd), then like_inputs(result, rewards).
    # raise not_implemented("discounted_reward_to_go")
    # END STUB
