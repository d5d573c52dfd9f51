"""The reference for PPO's clipped objectives and diagnostics.

PPO reuses one batch for several gradient steps. The data were sampled by the old policy, so each sample is
reweighted by the probability ratio ``r = π_new(a|s) / π_old(a|s) = exp(new_log_prob - old_log_prob)``. To keep
the new policy from exploiting that reweighting too far, the objective takes, per sample, the pessimistic
(smaller) of

- ``unclipped = r · A`` and
- ``clipped = clip(r, 1 - ε, 1 + ε) · A``.

Where the clipped branch is the smaller one and differs from the unclipped (A > 0 with r > 1 + ε, or A < 0 with
r < 1 - ε), it is a constant: the sample's gradient is exactly zero. The value function gets the same treatment
around its old prediction, and an entropy bonus (:func:`categorical_entropy` of the policy's logits) keeps the
policy from collapsing early. The diagnostics say how far one update moved the policy: a non-negative KL estimate,
the fraction of samples whose clip binds, and the fraction whose ratio left ``[1 - ε, 1 + ε]`` at all.

Every function accepts NumPy arrays or torch tensors, in any mixture. A result is a tensor if any array argument
is a tensor (autograd kept for the losses), else NumPy; a scalar result is 0-d. The terms, the losses and the KL
estimate come back in the promoted floating dtype of the array arguments (float32 with float64 gives float64); a
fraction in any floating dtype. Old log-probabilities, advantages, old values and returns are data: no gradient
ever reaches them, whichever of them is a tensor that requires grad.
"""

from __future__ import annotations

from functools import reduce

import torch

from kata.arrays import (
    ArrayLike,
    as_float_tensor,
    check_non_negative,
    check_positive,
    check_same_shape,
    like_inputs,
)
# BEGIN STUB
# from kata.concepts.stub import not_implemented
# END STUB


def clipped_surrogate_terms(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, clip_epsilon: float
) -> tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike]:
    """Per-sample terms of PPO's clipped surrogate: ``(ratio, unclipped, clipped, pessimistic)``.

    ``ratio = exp(new - old)``, ``unclipped = ratio · A``, ``clipped = clip(ratio, 1 - ε, 1 + ε) · A``,
    ``pessimistic = min(unclipped, clipped)``. Old log-probs and advantages are data: they are detached, so
    gradient reaches ``new_log_probs`` only. The ratio is exact for any finite log-probabilities, however far below
    0 (-800 in float64, -120 in float32, where ``exp`` of each underflows to 0 and ``exp(new) / exp(old)`` is
    ``0 / 0``).

    Args:
        new_log_probs: ``log π_new(a|s)``, any shape, floating (carries the gradient).
        old_log_probs: ``log π_old(a|s)`` recorded when the data were sampled, the same shape.
        advantages: ``A``, the same shape (no broadcasting: expand per-sequence advantages yourself), used as
            given: no normalisation here (a caller that standardises does so before the call).
        clip_epsilon: ε > 0.

    Returns:
        Four arrays of ``new_log_probs``'s shape, in the promoted floating dtype, the same kind as the inputs.

    Raises:
        ValueError: shapes differ, inputs are empty, or ``clip_epsilon <= 0``.

    Example:
        >>> import numpy as np
        >>> ratio, unclipped, clipped, pessimistic = clipped_surrogate_terms(
        ...     np.log([1.5, 0.5]), np.zeros(2), np.array([1.0, 1.0]), clip_epsilon=0.2)
        >>> pessimistic
        array([1.2, 0.5])
    """
    new, old, adv, epsilon = _surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    # BEGIN SOLUTION
    adv = adv.detach()
    ratio = torch.exp(new - old.detach())
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon) * adv
    pessimistic = torch.minimum(unclipped, clipped)
    return like_inputs((ratio, unclipped, clipped, pessimistic), new_log_probs, old_log_probs, advantages)
    # END SOLUTION
    # BEGIN STUB
    # # new, old, adv: floating tensors of one shape and dtype; epsilon: a float > 0. Old log-probs and advantages
    # # are data, not parameters. Return like_inputs((ratio, unclipped, clipped, pessimistic), new_log_probs,
    # # old_log_probs, advantages).
    # raise not_implemented("clipped_surrogate_terms")
    # END STUB


def clipped_policy_loss(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, clip_epsilon: float
) -> ArrayLike:
    """PPO's policy loss ``-mean(min(r · A, clip(r, 1 - ε, 1 + ε) · A))``: minimise it to raise the objective.

    Arguments and errors as :func:`clipped_surrogate_terms`. Returns a scalar (see the module docstring).

    Example:
        >>> import numpy as np
        >>> clipped_policy_loss(np.log([1.5, 0.5]), np.zeros(2), np.array([1.0, 1.0]), clip_epsilon=0.2)
        array(-0.85)
    """
    new, old, adv, epsilon = _surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    # BEGIN SOLUTION
    *_, pessimistic = clipped_surrogate_terms(new, old, adv, epsilon)
    return like_inputs(-pessimistic.mean(), new_log_probs, old_log_probs, advantages)
    # END SOLUTION
    # BEGIN STUB
    # # Reuse clipped_surrogate_terms(new, old, adv, epsilon); a loss is what an optimiser minimises.
    # raise not_implemented("clipped_policy_loss")
    # END STUB


def clipped_value_loss(
    values: ArrayLike, old_values: ArrayLike, returns: ArrayLike, clip_epsilon: float
) -> ArrayLike:
    """PPO's clipped value loss ``0.5 · mean(max((V - R)², (V_old + clip(V - V_old, -ε, ε) - R)²))``.

    The clipped prediction moves at most ε away from the OLD value; taking the max of the two squared errors makes
    the loss pessimistic, as for the policy: it is never below the plain ``0.5 · mean((V - R)²)``, and equals it
    wherever ``|V - V_old| <= ε``. Old values and returns are detached; gradient reaches ``values`` only.

    Args:
        values: the critic's current predictions ``V``, any shape, floating.
        old_values: ``V_old`` recorded with the data, the same shape.
        returns: regression targets ``R``, the same shape.
        clip_epsilon: ε > 0, in the units of the values.

    Returns:
        A scalar (see the module docstring).

    Raises:
        ValueError: shapes differ, inputs are empty, or ``clip_epsilon <= 0``.

    Example:
        >>> import numpy as np
        >>> clipped_value_loss(np.array([3.0]), np.array([1.0]), np.array([3.0]), clip_epsilon=0.5)
        array(1.125)
    """
    new, old, target = _same_shape_floats(("values", values), ("old_values", old_values), ("returns", returns))
    epsilon = check_positive("clip_epsilon", clip_epsilon)
    # BEGIN SOLUTION
    old, target = old.detach(), target.detach()
    unclipped = (new - target) ** 2
    clipped_prediction = old + torch.clamp(new - old, -epsilon, epsilon)
    clipped = (clipped_prediction - target) ** 2
    loss = 0.5 * torch.maximum(unclipped, clipped).mean()
    return like_inputs(loss, values, old_values, returns)
    # END SOLUTION
    # BEGIN STUB
    # # new, old, target: floating tensors of one shape and dtype; epsilon: a float > 0. Around which value is the
    # # prediction clipped? Which of the two squared errors is kept?
    # raise not_implemented("clipped_value_loss")
    # END STUB


def categorical_entropy(logits: ArrayLike) -> ArrayLike:
    """Entropy ``H = -Σ_k p_k log p_k`` of the categorical ``p = softmax(logits)`` over the last axis.

    Computed from ``log_softmax`` (never ``log(softmax)``), with the log-probability made finite before it is
    multiplied by p, so that the entropy and its gradient stay finite for logits of any size: an action whose
    probability is 0 (underflowed, or a logit of -inf: an action that cannot be taken) contributes exactly 0.

    Args:
        logits: ``[..., K]`` floating (float32 or float64) unnormalised log-probabilities, any finite size up to
            the dtype's limits; -inf anywhere (an action that cannot be taken), but no NaN or +inf, and at least
            one finite logit per row.

    Returns:
        ``logits.shape[:-1]`` entropies in ``[0, log K]``, the same kind of array and dtype as ``logits``
        (autograd kept: the gradient ``-p_j (log p_j + H)``, exactly 0 at a logit of -inf).

    Raises:
        ValueError: no last axis, an empty action axis, NaN or +inf, or a row with every logit -inf.

    Example:
        >>> import numpy as np
        >>> categorical_entropy(np.array([[0.0, 0.0], [0.0, -1e9]]))
        array([0.69314718, 0.        ])
    """
    logits_t = as_float_tensor(logits, "logits")
    if logits_t.ndim < 1 or logits_t.shape[-1] < 1:
        raise ValueError(f"logits must have a last axis of K >= 1 actions; got shape {tuple(logits_t.shape)}")
    plain = logits_t.detach()
    # One reduction on the common path (every logit finite): the training loops call this every minibatch.
    if not bool(torch.isfinite(plain).all()):
        if torch.isnan(plain).any() or (plain == float("inf")).any():
            raise ValueError(
                "logits must not hold NaN or +inf (use -inf, or a large negative number, to mask an action)"
            )
        if not torch.isfinite(plain).any(dim=-1).all():
            raise ValueError("logits must have at least one finite logit per distribution; got a row of -inf only")
    # BEGIN SOLUTION
    log_p = torch.log_softmax(logits_t, dim=-1)
    # A -inf log-probability (p = 0) would give 0 · -inf = NaN; clamping it to the lowest finite number keeps its
    # term, and its gradient, exactly 0.
    log_p = log_p.clamp_min(torch.finfo(log_p.dtype).min)
    entropy = (log_p.exp() * -log_p).sum(dim=-1)
    return like_inputs(entropy, logits)
    # END SOLUTION
    # BEGIN STUB
    # # logits_t: [..., K] floats. Work with log-probabilities from a numerically stable function, and make sure an
    # # action of probability 0 adds exactly 0 (not NaN). Return like_inputs(entropy, logits).
    # raise not_implemented("categorical_entropy")
    # END STUB


def ppo_loss(
    policy_loss: ArrayLike,
    value_loss: ArrayLike,
    entropy: ArrayLike,
    value_coefficient: float,
    entropy_coefficient: float,
) -> ArrayLike:
    """The total PPO loss ``policy_loss + c_v · value_loss - c_e · mean(entropy)``.

    The entropy is a bonus: more entropy lowers the loss, so minimising the loss keeps the policy exploring.

    Args:
        policy_loss: a scalar (one number), e.g. :func:`clipped_policy_loss`.
        value_loss: a scalar, e.g. :func:`clipped_value_loss`.
        entropy: per-sample entropies, any non-empty shape (averaged here).
        value_coefficient: ``c_v >= 0``.
        entropy_coefficient: ``c_e >= 0``.

    Returns:
        A scalar (see the module docstring), autograd kept through all three terms.

    Raises:
        ValueError: a loss is not a single number, ``entropy`` is empty, or a coefficient is negative.

    Example:
        >>> import numpy as np
        >>> ppo_loss(np.array(1.0), np.array(2.0), np.array([0.5, 1.5]), value_coefficient=0.5,
        ...          entropy_coefficient=0.1)
        array(1.9)
    """
    policy = _scalar_tensor("policy_loss", policy_loss)
    value = _scalar_tensor("value_loss", value_loss)
    entropy_t = as_float_tensor(entropy, "entropy")
    if entropy_t.numel() == 0:
        raise ValueError(f"entropy must hold at least one value; got shape {tuple(entropy_t.shape)}")
    dtype = reduce(torch.promote_types, (policy.dtype, value.dtype, entropy_t.dtype))
    policy, value, entropy_t = policy.to(dtype), value.to(dtype), entropy_t.to(dtype)
    c_value = check_non_negative("value_coefficient", value_coefficient)
    c_entropy = check_non_negative("entropy_coefficient", entropy_coefficient)
    # BEGIN SOLUTION
    total = policy + c_value * value - c_entropy * entropy_t.mean()
    return like_inputs(total, policy_loss, value_loss, entropy)
    # END SOLUTION
    # BEGIN STUB
    # # policy, value: 0-d tensors; entropy_t: a tensor; c_value, c_entropy: floats >= 0. Which way must the
    # # entropy term push the loss? Return like_inputs(total, policy_loss, value_loss, entropy).
    # raise not_implemented("ppo_loss")
    # END STUB


def approximate_kl(new_log_probs: ArrayLike, old_log_probs: ArrayLike) -> ArrayLike:
    """The non-negative estimate ``mean((r - 1) - log r)`` of ``KL(π_old ‖ π_new)``, ``r = exp(new - old)``.

    With samples drawn from the old policy, ``E_old[r - 1] = 0``, so this has the same expectation as the plain
    ``mean(-log r)`` (k1), but every term is ``>= 0`` (since ``log r <= r - 1``) and 0 only where ``r = 1``: it
    cannot report a negative divergence, and it has lower variance when the policies are close.

    ``old_log_probs`` is detached: gradient reaches ``new_log_probs`` only. So ``approximate_kl(ref_log_probs,
    log_probs)`` has the value of the k3 estimate of ``KL(π ‖ π_ref)`` but sends no gradient to ``log_probs``: it is
    a diagnostic, and cannot serve as a KL loss.

    Args:
        new_log_probs: ``log π_new(a|s)``, any shape, floating.
        old_log_probs: ``log π_old(a|s)`` for the same samples, the same shape (detached: data, never trained).

    Returns:
        A scalar ``>= 0`` up to the rounding of ``r - 1`` (about 1e-16 in float64; see the module docstring),
        with gradient into ``new_log_probs``; call ``.item()`` or ``float()`` on it to log it.

    Raises:
        ValueError: shapes differ, or inputs are empty.

    Example:
        >>> import numpy as np
        >>> approximate_kl(np.log([2.0, 0.5]), np.zeros(2))
        array(0.25)
    """
    new, old = _same_shape_floats(("new_log_probs", new_log_probs), ("old_log_probs", old_log_probs))
    # BEGIN SOLUTION
    log_ratio = new - old.detach()
    # expm1(x) - x is (r - 1) - log r without cancellation for r near 1, where every useful value lies.
    per_sample = torch.expm1(log_ratio) - log_ratio
    return like_inputs(per_sample.mean(), new_log_probs, old_log_probs)
    # END SOLUTION
    # BEGIN STUB
    # # new, old: floating tensors of one shape and dtype. Every per-sample term must be >= 0.
    # raise not_implemented("approximate_kl")
    # END STUB


def active_clip_fraction(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, clip_epsilon: float
) -> ArrayLike:
    """Fraction of samples whose clip binds: ``A > 0 and r > 1 + ε``, or ``A < 0 and r < 1 - ε``.

    The advantages are the ones passed, as given: only their signs count, and they are never standardised here
    (standardising subtracts the mean, which flips some signs). Pass the advantages the policy loss saw: then
    exactly these samples contribute zero gradient to :func:`clipped_policy_loss`. A ratio outside the interval on
    the other side (``A > 0 and r < 1 - ε``) is not clipped: the min picks the unclipped branch. The inequalities
    are strict: at ``r = 1 ± ε`` exactly the two branches are equal and the gradient is ``-r · A / N``, not zero, so
    such a sample is not counted (``r = 1.5`` with ``ε = 0.5`` and ``A > 0`` is not clipped).

    Arguments and errors as :func:`clipped_surrogate_terms`. Returns a scalar in [0, 1] (see the module docstring),
    without gradient, in any floating dtype (a fraction k/N needs no more than float32).

    Example:
        >>> import numpy as np
        >>> active_clip_fraction(np.log([1.5, 0.5, 1.5, 1.0]), np.zeros(4), np.array([1.0, 1.0, -1.0, 1.0]),
        ...                      clip_epsilon=0.2)
        array(0.25)
    """
    new, old, adv, epsilon = _surrogate_inputs(new_log_probs, old_log_probs, advantages, clip_epsilon)
    # BEGIN SOLUTION
    ratio = torch.exp(new.detach() - old.detach())
    adv = adv.detach()
    binds = ((adv > 0) & (ratio > 1.0 + epsilon)) | ((adv < 0) & (ratio < 1.0 - epsilon))
    return like_inputs(binds.to(new.dtype).mean(), new_log_probs, old_log_probs, advantages)
    # END SOLUTION
    # BEGIN STUB
    # # Count the samples where the clipped branch is the one min() picks AND differs from the unclipped one.
    # raise not_implemented("active_clip_fraction")
    # END STUB


def ratio_outside_fraction(new_log_probs: ArrayLike, old_log_probs: ArrayLike, clip_epsilon: float) -> ArrayLike:
    """Fraction of samples whose ratio left the trust interval: ``|r - 1| > ε``, whatever the advantage.

    Always at least :func:`active_clip_fraction`: it also counts ratios outside on the side the clip ignores. The
    inequality is strict: a ratio at exactly ``1 ± ε`` (``r = 0.5`` with ``ε = 0.5``) is on the interval's edge,
    inside it, and not counted.

    Args:
        new_log_probs: ``log π_new(a|s)``, any shape, floating.
        old_log_probs: ``log π_old(a|s)``, the same shape.
        clip_epsilon: ε > 0.

    Returns:
        A scalar in [0, 1] (see the module docstring), without gradient, in any floating dtype (a fraction k/N
        needs no more than float32: CleanRL's ``((ratio - 1).abs() > eps).float().mean()`` is fine).

    Raises:
        ValueError: shapes differ, inputs are empty, or ``clip_epsilon <= 0``.

    Example:
        >>> import numpy as np
        >>> ratio_outside_fraction(np.log([1.5, 0.5, 1.1, 1.0]), np.zeros(4), clip_epsilon=0.2)
        array(0.5)
    """
    new, old = _same_shape_floats(("new_log_probs", new_log_probs), ("old_log_probs", old_log_probs))
    epsilon = check_positive("clip_epsilon", clip_epsilon)
    # BEGIN SOLUTION
    ratio = torch.exp(new.detach() - old.detach())
    outside = (ratio - 1.0).abs() > epsilon
    return like_inputs(outside.to(new.dtype).mean(), new_log_probs, old_log_probs)
    # END SOLUTION
    # BEGIN STUB
    # # Count |r - 1| > epsilon, whatever the advantage.
    # raise not_implemented("ratio_outside_fraction")
    # END STUB


def _surrogate_inputs(
    new_log_probs: ArrayLike, old_log_probs: ArrayLike, advantages: ArrayLike, clip_epsilon: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """The checks clipped_surrogate_terms, clipped_policy_loss and active_clip_fraction share: three arrays of one
    shape (``_same_shape_floats``) and ``clip_epsilon > 0``."""
    new, old, adv = _same_shape_floats(
        ("new_log_probs", new_log_probs), ("old_log_probs", old_log_probs), ("advantages", advantages)
    )
    return new, old, adv, check_positive("clip_epsilon", clip_epsilon)


def _same_shape_floats(reference: tuple[str, ArrayLike], *others: tuple[str, ArrayLike]) -> list[torch.Tensor]:
    """Floating tensors of ``reference``'s shape (no broadcasting), non-empty, promoted to one dtype (autograd
    kept); each pair is (argument name, value)."""
    given = [reference[1], *(value for _, value in others)]
    # The training loops' case, every minibatch: tensors that already agree pass through untouched.
    if all(isinstance(value, torch.Tensor) for value in given) and _agree(given):
        return given
    first = as_float_tensor(reference[1], reference[0])
    if first.numel() == 0:
        raise ValueError(f"{reference[0]} must hold at least one value; got shape {tuple(first.shape)}")
    rest = [as_float_tensor(value, name, like=first) for name, value in others]
    check_same_shape(reference[0], first, **{name: tensor for (name, _), tensor in zip(others, rest, strict=True)})
    tensors = [first, *rest]
    dtype = reduce(torch.promote_types, (t.dtype for t in tensors))
    return [t.to(dtype) for t in tensors]


def _agree(tensors: list[torch.Tensor]) -> bool:
    first = tensors[0]
    return (first.is_floating_point() and first.numel() > 0
            and all(t.dtype == first.dtype and t.shape == first.shape for t in tensors[1:]))


def _scalar_tensor(name: str, value: ArrayLike) -> torch.Tensor:
    tensor = as_float_tensor(value, name)
    if tensor.ndim == 0:
        return tensor
    if tensor.numel() != 1:
        raise ValueError(f"{name} must be a scalar (one number); got shape {tuple(tensor.shape)}")
    return tensor.reshape(())
