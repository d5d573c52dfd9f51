"""The clipped_surrogate tests: PPO's clipped objectives and diagnostics.

Every property is checked against the formulas written out here in NumPy: r = exp(new - old), the clip binds
where A > 0 and r > 1 + ε or A < 0 and r < 1 - ε, and the per-sample gradient of the policy loss with respect to
the new log-probability is -r·A/N where the clip does not bind and exactly 0 where it does.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.assertions import (
    PRECISION,
    assert_differentiable,
    close,
    confirmed_readings,
    dtype_of,
    found_and_expected,
    gradient,
    mistake,
    plain,
    word,
)
from kata.testing.strategies import float_dtypes, floats, typed_batches
from kata.testing.strategies.clipped_surrogate import (
    SURROGATE_ARRAYS,
    VALUE_ARRAYS,
    categorical_pairs,
    entropy_batches,
    limit_logits,
    logits_arrays,
    masked_logits,
    ppo_batches,
    value_batches,
)
from kata.testing.battery import battery_tests
from kata.testing.strategies.clipped_surrogate import CONTRACTS

pytestmark = pytest.mark.clipped_surrogate

# Ratios this close to 1 ± ε are left out of the exact gradient checks: there the two branches meet and rounding
# decides which side of the boundary a sample falls on.
BOUNDARY = 1e-9


def reference_terms(new_log_probs, old_log_probs, advantages, clip_epsilon):
    ratio = np.exp(new_log_probs - old_log_probs)
    unclipped = ratio * advantages
    clipped = np.clip(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantages
    return ratio, unclipped, clipped, np.minimum(unclipped, clipped)


def clip_binds(ratio, advantages, clip_epsilon):
    return ((advantages > 0) & (ratio > 1.0 + clip_epsilon)) | ((advantages < 0) & (ratio < 1.0 - clip_epsilon))


def near_boundary(ratio, clip_epsilon):
    return (np.abs(ratio - (1.0 + clip_epsilon)) < BOUNDARY) | (np.abs(ratio - (1.0 - clip_epsilon)) < BOUNDARY)


def term_readings(new_log_probs, old_log_probs, advantages, clip_epsilon) -> tuple[dict, ...]:
    """Per term, the values each common misreading gives: named in a message only when they are the values found.
    The readings no catalogued mistake computes keep words of their own."""
    log_ratio = new_log_probs - old_log_probs
    ratio, unclipped, clipped, _ = reference_terms(new_log_probs, old_log_probs, advantages, clip_epsilon)
    return (
        {"exp(old - new): the ratio inverted": np.exp(-log_ratio), "new - old: the log-ratio, not exponentiated":
         log_ratio},
        {"the advantage alone, without the ratio": advantages},
        {mistake("clipped_surrogate/advantage_clipped_not_ratio"):
         ratio * np.clip(advantages, 1.0 - clip_epsilon, 1.0 + clip_epsilon),
         "exp(clip(log r, -ε, ε)) · A: the log-ratio clipped to [-ε, ε] instead of the ratio to [1 - ε, 1 + ε]":
         np.exp(np.clip(log_ratio, -clip_epsilon, clip_epsilon)) * advantages},
        {mistake("clipped_surrogate/max_instead_of_min"): np.maximum(unclipped, clipped)},
    )


def witness_batches() -> list[dict]:
    """Batches on which every reading gives its own value: ratios inside, above and below [1 - ε, 1 + ε], each with
    a positive and a negative advantage, and a zero advantage outside the interval."""
    ratios = np.array([1.5, 0.6, 1.1, 1.5, 0.6, 0.9, 1.4, 0.5, 2.0])
    advantages = np.array([2.0, 1.5, 0.7, -1.0, -0.5, -2.0, 0.0, 3.0, 0.5])
    old = np.linspace(-2.0, -0.5, ratios.size)
    return [dict(new_log_probs=np.log(ratios) + old, old_log_probs=old, advantages=advantages, clip_epsilon=0.2),
            dict(new_log_probs=(np.log(ratios) + old)[::-1].reshape(3, 3), old_log_probs=old[::-1].reshape(3, 3),
                 advantages=advantages[::-1].reshape(3, 3) * 0.5, clip_epsilon=0.3)]


WITNESSES = witness_batches()


def term_readings_of(index: int):
    return lambda batch: term_readings(**batch)[index]


def one_term(impl, index: int):
    return lambda **batch: impl.clipped_surrogate_terms(**batch)[index]


def fraction_readings(batch: dict) -> dict[str, float]:
    """The active clip fraction under each common misreading of which samples the clip binds."""
    ratio = np.exp(batch["new_log_probs"] - batch["old_log_probs"])
    advantages, epsilon = batch["advantages"], batch["clip_epsilon"]
    standardised = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    return {
        mistake("clipped_surrogate/clip_fraction_counts_ratio_outside"): (np.abs(ratio - 1.0) > epsilon).mean(),
        mistake("clipped_surrogate/clip_fraction_counts_zero_advantages"): (
            ((advantages >= 0) & (ratio > 1.0 + epsilon)) | ((advantages <= 0) & (ratio < 1.0 - epsilon))).mean(),
        mistake("clipped_surrogate/clip_fraction_standardises_advantages"):
            clip_binds(ratio, standardised, epsilon).mean(),
    }


def is_numpy_scalar(value):
    return isinstance(value, np.ndarray | np.floating | float) and np.ndim(value) == 0


# ---- the clipped policy objective ------------------------------------------------------------------------------


@given(batch=ppo_batches())
def test_terms_are_the_ratio_its_two_branches_and_their_minimum(impl, batch):
    originals = {key: value.copy() for key, value in batch.items() if isinstance(value, np.ndarray)}
    ratio, unclipped, clipped, pessimistic = impl.clipped_surrogate_terms(**batch)
    expected = reference_terms(**batch)
    for index, (name, actual, wanted, message) in enumerate(zip(
        ("ratio", "unclipped", "clipped", "pessimistic"), (ratio, unclipped, clipped, pessimistic), expected,
        ("the ratio is exp(new_log_probs - old_log_probs), per sample", "the unclipped term is ratio · advantage",
         "the clipped term is clip(ratio, 1 - ε, 1 + ε) · advantage", "the pessimistic term is min(unclipped, "
         "clipped)"),
    )):
        assert isinstance(actual, np.ndarray) and actual.shape == batch["new_log_probs"].shape, (
            f"{name} must be a NumPy array of new_log_probs' shape {batch['new_log_probs'].shape} for NumPy input; "
            f"got {type(actual).__name__} of shape {np.shape(actual)}"
        )
        close(actual, wanted, message, readings=lambda: confirmed_readings(
            one_term(impl, index), term_readings_of(index), batch, WITNESSES))
    above = (pessimistic > unclipped) | (pessimistic > clipped)
    assert not above.any(), (
        f"the pessimistic term {plain(pessimistic[above][0])} exceeds a branch (unclipped "
        f"{plain(unclipped[above][0])}, clipped {plain(clipped[above][0])}): it is the min of the two, never "
        "above either"
    )
    inside = np.abs(ratio - 1.0) <= batch["clip_epsilon"]
    np.testing.assert_array_equal(pessimistic[inside], unclipped[inside],
                                  err_msg="inside [1 - ε, 1 + ε] the clip changes nothing: pessimistic = r · A")
    close(impl.clipped_policy_loss(**batch), -expected[3].mean(),
          "the policy loss is -mean(pessimistic): minus, because the optimiser minimises and PPO maximises the "
          "surrogate", readings={mistake("clipped_surrogate/policy_loss_sign_flipped"): expected[3].mean()})
    for key, value in originals.items():
        assert np.array_equal(batch[key], value), (
            f"{key} was changed in place: clipped_surrogate_terms and clipped_policy_loss never change their inputs")

    tensors = {key: torch.tensor(value, dtype=torch.float32) if isinstance(value, np.ndarray) else value
               for key, value in batch.items()}
    terms = impl.clipped_surrogate_terms(**tensors)
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in terms), (
        "float32 tensors in must give float32 tensors out; got "
        + ", ".join(f"{type(t).__name__} {getattr(t, 'dtype', '')}" for t in terms)
    )
    close(terms[3].numpy(), pessimistic, "tensor and NumPy inputs must agree", rtol=1e-5)


@given(batch=ppo_batches())
def test_gradient_is_zero_exactly_where_the_clip_binds(impl, batch):
    ratio = np.exp(batch["new_log_probs"] - batch["old_log_probs"])
    assume(not near_boundary(ratio, batch["clip_epsilon"]).any())
    new = torch.tensor(batch["new_log_probs"], requires_grad=True)
    old = torch.tensor(batch["old_log_probs"], requires_grad=True)
    advantages = torch.tensor(batch["advantages"], requires_grad=True)
    loss = impl.clipped_policy_loss(new, old, advantages, batch["clip_epsilon"])
    assert isinstance(loss, torch.Tensor) and loss.ndim == 0, (
        f"a tensor in must give a 0-d tensor out; got {type(loss).__name__} of shape {tuple(np.shape(loss))}")
    assert_differentiable(loss, "the policy loss of tensor log-probabilities", "new_log_probs")
    loss.backward()
    binds = clip_binds(ratio, batch["advantages"], batch["clip_epsilon"])
    epsilon = batch["clip_epsilon"]
    grad = gradient(new, "new_log_probs")
    moving = binds & (grad != 0.0)
    assert not moving.any(), (
        f"ε = {epsilon:.6g}, A = {plain(batch['advantages'][moving][0])}, r = {plain(ratio[moving][0])}: the clip "
        f"binds there (A > 0 and r > 1 + ε, or A < 0 and r < 1 - ε), so the sample's gradient must be exactly 0 "
        f"(min picks the constant clipped branch); it is {plain(grad[moving][0])}"
    )
    outside_free = ~binds & (np.abs(ratio - 1.0) > epsilon) & (batch["advantages"] != 0)
    frozen = outside_free & (grad == 0.0)
    assert not frozen.any(), (
        f"ε = {epsilon:.6g}, A = {plain(batch['advantages'][frozen][0])}, r = {plain(ratio[frozen][0])}: outside "
        "[1 - ε, 1 + ε] on the side the clip does not guard (A > 0 and r < 1 - ε, or A < 0 and r > 1 + ε), so the "
        "sample keeps its gradient (min picks the unclipped branch there); it is exactly 0"
    )
    close(grad, np.where(binds, 0.0, -ratio * batch["advantages"] / ratio.size),
          "∂loss/∂new_log_prob must be -r·A/N where the clip does not bind and 0 where it does")
    for name, tensor in (("old_log_probs", old), ("advantages", advantages)):
        assert tensor.grad is None or not tensor.grad.any(), (
            f"gradient reached {name}: old log-probs and advantages are data recorded before the update; detach "
            "them"
        )

    # The diagnostics count the same events.
    active = impl.active_clip_fraction(**batch)
    outside = impl.ratio_outside_fraction(batch["new_log_probs"], batch["old_log_probs"], epsilon)
    assert is_numpy_scalar(active) and is_numpy_scalar(outside), (
        f"NumPy in must give NumPy scalars (0-d) out; got {type(active).__name__} of shape {np.shape(active)} and "
        f"{type(outside).__name__} of shape {np.shape(outside)}")
    outside_fraction = (np.abs(ratio - 1.0) > epsilon).mean()
    # A fraction k/N may come back in any floating dtype (CleanRL's `.float().mean()` gives float32).
    close(active, binds.mean(),
          "the active clip fraction counts samples where the clip binds: A > 0 and r > 1 + ε, or A < 0 and "
          "r < 1 - ε (their gradient is zero), with the advantages as given; a ratio outside on the other side is "
          "not clipped", any_float=True,
          readings=lambda: confirmed_readings(impl.active_clip_fraction, fraction_readings, batch, WITNESSES))
    close(active, ((grad == 0.0) & (batch["advantages"] != 0)).mean(),
          "the active clip fraction must be the fraction of samples (with A ≠ 0) whose gradient the clip zeroes",
          any_float=True)
    close(outside, outside_fraction, "the ratio-outside fraction counts |r - 1| > ε, whatever the advantage",
          any_float=True, readings={mistake("clipped_surrogate/ratio_outside_counts_log_ratio"): (
              np.abs(np.log(ratio)) > epsilon).mean()})
    # Two of the function's own results, each k/N in its own dtype: compared as counts, never as floats of two
    # precisions (2/3 in float32 is above 2/3 in float64).
    active_count, outside_count = (int(np.rint(float(value) * ratio.size)) for value in (active, outside))
    assert active_count <= outside_count, (
        f"the active clip fraction {plain(active)} ({active_count} of {ratio.size} samples) exceeds the "
        f"ratio-outside fraction {plain(outside)} ({outside_count} of {ratio.size}): every sample whose clip binds "
        "has its ratio outside [1 - ε, 1 + ε]")
    tensor_active = impl.active_clip_fraction(new, old, advantages, epsilon)
    assert isinstance(tensor_active, torch.Tensor) and tensor_active.ndim == 0, (
        f"tensor in, 0-d tensor out; got {type(tensor_active).__name__} of shape {tuple(np.shape(tensor_active))}")


# ---- the clipped value loss ------------------------------------------------------------------------------------


def value_readings(batch: dict) -> dict[str, float]:
    """The clipped value loss under each common misreading."""
    values, old_values, returns, epsilon = (batch[key] for key in (*VALUE_ARRAYS, "clip_epsilon"))
    errors = (values - returns) ** 2, (old_values + np.clip(values - old_values, -epsilon, epsilon) - returns) ** 2
    return {mistake("clipped_surrogate/value_loss_min_not_max"): 0.5 * np.minimum(*errors).mean(),
            # A prediction clipped around the returns never has the larger error, so that mistake gives the plain
            # loss too: both are named, since the value cannot tell them apart.
            "the plain 0.5 · mean((V - R)²), no clipped branch; equally, "
            + mistake("clipped_surrogate/value_clip_around_returns"): 0.5 * errors[0].mean(),
            mistake("clipped_surrogate/value_loss_max_of_means"): 0.5 * max(errors[0].mean(), errors[1].mean())}


# Samples where each error is the larger: V beyond the clip towards R (the clipped error is larger), V overshooting
# R (the unclipped one is), V within ε of V_old (both equal).
VALUE_WITNESSES = [dict(values=np.array([3.0, 5.0, 1.1, -2.0]), old_values=np.array([-1.0, 2.8, 1.0, 0.0]),
                        returns=np.array([3.0, 3.0, 2.0, -1.0]), clip_epsilon=0.5),
                   dict(values=np.array([[0.0, 4.0], [2.5, -1.0]]), old_values=np.array([[3.0, 1.0], [2.0, 0.0]]),
                        returns=np.array([[-2.0, 2.0], [0.0, 1.0]]), clip_epsilon=0.3)]


@given(batch=value_batches())
def test_value_loss_is_the_max_of_the_two_squared_errors(impl, batch):
    values, old_values, returns = batch["values"], batch["old_values"], batch["returns"]
    epsilon = batch["clip_epsilon"]
    loss = impl.clipped_value_loss(**batch)
    assert is_numpy_scalar(loss), (
        f"NumPy in must give a NumPy scalar (0-d) out; got {type(loss).__name__} of shape {np.shape(loss)}")
    clipped_prediction = old_values + np.clip(values - old_values, -epsilon, epsilon)
    errors = (values - returns) ** 2, (clipped_prediction - returns) ** 2
    expected = 0.5 * np.maximum(*errors).mean()
    close(loss, expected,
          "the value loss is 0.5 · mean(max((V - R)², (V_old + clip(V - V_old, -ε, ε) - R)²)): the prediction "
          "is clipped around the OLD value, and the larger of the two errors is kept, per sample",
          readings=lambda: confirmed_readings(impl.clipped_value_loss, value_readings, batch, VALUE_WITNESSES))
    plain_loss = 0.5 * errors[0].mean()
    assert loss >= plain_loss * (1 - 1e-12), (
        f"the clipped value loss {plain(loss)} is below the plain 0.5 · mean((V - R)²) = {plain(plain_loss)}: the "
        "max of the two squared errors is never below the unclipped one"
    )

    within = clipped_prediction  # every new value within ε of its old one
    if np.all(np.abs(within - old_values) <= epsilon):  # rounding may land just outside
        close(impl.clipped_value_loss(within, old_values, returns, epsilon),
              0.5 * ((within - returns) ** 2).mean(),
              "when every new value is within ε of its old value the clip does nothing: the loss is "
              "0.5 · mean((V - R)²)")

    values_t = torch.tensor(values, requires_grad=True)
    old_values_t = torch.tensor(old_values, requires_grad=True)
    returns_t = torch.tensor(returns, requires_grad=True)
    loss_t = impl.clipped_value_loss(values_t, old_values_t, returns_t, epsilon)
    assert isinstance(loss_t, torch.Tensor) and loss_t.ndim == 0, (
        f"a tensor in must give a 0-d tensor out; got {type(loss_t).__name__} of shape {tuple(np.shape(loss_t))}")
    assert_differentiable(loss_t, "the value loss of tensor values", "values")
    loss_t.backward()
    gradient(values_t, "values")  # a readable failure when no gradient reached the values
    for name, tensor in (("old_values", old_values_t), ("returns", returns_t)):
        assert tensor.grad is None or not tensor.grad.any(), (
            f"gradient reached {name}: they are targets, detach them"
        )


def test_value_loss_worked_examples(impl):
    # V moved 2 away from V_old = 1 towards R = 3: the clipped prediction 1.5 has the larger error, 1.5² / 2.
    close(impl.clipped_value_loss(np.array([3.0]), np.array([1.0]), np.array([3.0]), clip_epsilon=0.5), 1.125,
          "V = 3, V_old = 1, R = 3, ε = 0.5: the prediction clipped around V_old is 1.5, and its error is the larger, "
          "so the loss is 0.5 · (1.5 - 3)² = 1.125", readings={
              "0, the smaller error (V - R)² = 0; for example, a min of the two errors, or a prediction clipped "
              "around R, gives it": 0.0})
    # V overshot R: the unclipped error (V - R)² = 4 is the larger, and it is kept.
    close(impl.clipped_value_loss(np.array([5.0]), np.array([2.8]), np.array([3.0]), clip_epsilon=0.5), 2.0,
          "the larger error is the unclipped one here: 0.5 · (5 - 3)² = 2")


# ---- entropy ---------------------------------------------------------------------------------------------------


def explicit_entropy(logits):
    """-Σ p log p over the last axis in float64, an action of probability 0 (a logit of -inf) adding 0."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -(np.exp(log_p) * np.where(np.isneginf(log_p), 0.0, log_p)).sum(axis=-1)


def explicit_entropy_gradient(logits):
    """∂H/∂z_j = -p_j (log p_j + H); 0 where p_j = 0."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    p = np.exp(log_p)
    return -p * (np.where(p > 0, log_p, 0.0) + explicit_entropy(logits)[..., None])


# What a NaN or infinite entropy means, true for every route that got there: the message never names one route.
ZERO_TIMES_MINUS_INF = (
    "an action of probability 0 must add exactly 0, and that takes a finite log-probability before the product "
    "p · log p: log p is -inf wherever p is 0, whether it comes from log(softmax(z)) or from log_softmax(z) (a logit "
    "of -inf, or two logits so far apart that their difference overflows), and 0 · -inf is NaN, in the value or "
    "in the gradient")


@given(logits=logits_arrays(), shift=floats(-50.0, 50.0))
def test_entropy_of_the_softmax_over_the_last_axis(impl, logits, shift):
    entropy = impl.categorical_entropy(logits)
    assert isinstance(entropy, np.ndarray), f"NumPy in must give NumPy out; got {type(entropy).__name__}"
    assert entropy.shape == logits.shape[:-1], (
        f"one entropy per distribution: logits of shape {logits.shape} give {logits.shape[:-1]}, the last axis "
        f"summed away; got {entropy.shape}")
    with np.errstate(all="ignore"):
        readings = {mistake("clipped_surrogate/entropy_of_probabilities_not_logits"):
                    -(logits * np.log(logits)).sum(axis=-1)}
        if logits.ndim >= 2:
            across = logits - np.logaddexp.reduce(logits, axis=0, keepdims=True)
            readings[mistake("clipped_surrogate/entropy_over_wrong_axis")] = -(np.exp(across) * across).sum(axis=-1)
    close(entropy, explicit_entropy(logits), "entropy must be -Σ p log p with p = softmax(logits) over the last axis",
          rtol=1e-9, readings=readings)
    assert np.all(entropy >= 0.0) and np.all(entropy <= math.log(logits.shape[-1]) + 1e-12), (
        f"a categorical entropy lies in [0, log K] = [0, {math.log(logits.shape[-1]):.6g}]; got {plain(entropy)}"
    )
    close(impl.categorical_entropy(logits + shift), entropy,
          "softmax ignores a constant added to every logit, so the entropy must too", rtol=1e-8)


@given(logits=logits_arrays(-10.0, 10.0), dtype=float_dtypes, as_tensor=st.booleans())
def test_entropy_keeps_the_logits_kind_and_dtype_and_its_gradient(impl, logits, dtype, as_tensor):
    array = logits.astype(dtype)
    given_in = torch.tensor(array, requires_grad=True) if as_tensor else array
    entropy = impl.categorical_entropy(given_in)
    kind = "a tensor" if as_tensor else "NumPy"
    assert isinstance(entropy, torch.Tensor if as_tensor else np.ndarray), (
        f"{kind} logits must give {kind} entropies; got {type(entropy).__name__}")
    assert dtype_of(entropy) == np.dtype(dtype), (
        f"{np.dtype(dtype)} logits must give {np.dtype(dtype)} entropies; got {dtype_of(entropy)}")
    close(entropy, explicit_entropy(array), f"entropy of {np.dtype(dtype)} {kind} logits is -Σ p log p",
          rtol=PRECISION[dtype], expected_dtype=dtype)
    if not as_tensor:
        return
    assert_differentiable(entropy, "the entropy of tensor logits", "logits")
    weights = np.random.default_rng(logits.size).uniform(-2.0, 2.0, entropy.shape)
    (entropy * torch.as_tensor(weights, dtype=entropy.dtype)).sum().backward()
    expected = explicit_entropy_gradient(array) * weights[..., None]
    close(gradient(given_in, "logits"), expected,
          "∂H/∂z_j must be -p_j (log p_j + H): the gradient flows through both p and log p",
          rtol=10 * PRECISION[dtype], expected_dtype=dtype)


@given(logits=masked_logits())
def test_an_action_of_probability_zero_adds_exactly_zero(impl, logits):
    tensor = torch.tensor(logits, requires_grad=True)
    entropy = impl.categorical_entropy(tensor)
    expected = explicit_entropy(logits)
    assert isinstance(entropy, torch.Tensor) and torch.isfinite(entropy).all(), (
        f"the entropy is {plain(entropy)} for the logits {plain(logits)} (-inf: an action that cannot be taken): "
        f"expected {plain(expected)}, the entropy of the other actions; {ZERO_TIMES_MINUS_INF}")
    close(entropy.detach().numpy(), expected,
          "a logit of -inf is an action of probability 0: it adds exactly 0, so the entropy is that of the other "
          "actions")
    assert_differentiable(entropy, "the entropy of tensor logits", "logits")
    entropy.sum().backward()
    found = tensor.grad
    assert found is not None and torch.isfinite(found).all(), (
        f"the entropy's gradient is {plain(found)} for the logits {plain(logits)}: it must be finite, 0 at a logit "
        f"of -inf; {ZERO_TIMES_MINUS_INF}")
    close(found.numpy(), explicit_entropy_gradient(logits),
          "the gradient of the entropy is -p_j (log p_j + H), exactly 0 at a logit of -inf", rtol=1e-8)


@given(dtype=float_dtypes, data=st.data())
def test_entropy_stays_finite_for_logits_near_the_dtype_limits(impl, dtype, data):
    rows, actions = data.draw(st.integers(1, 3), label="rows"), data.draw(st.integers(1, 5), label="actions")
    logits = np.array(data.draw(st.lists(st.lists(st.sampled_from(limit_logits(dtype)), min_size=actions,
                                                  max_size=actions), min_size=rows, max_size=rows),
                                label="logits"), dtype=dtype)
    tensor = torch.tensor(logits, requires_grad=True)
    entropy = impl.categorical_entropy(tensor)
    assert isinstance(entropy, torch.Tensor) and torch.isfinite(entropy).all(), (
        f"the entropy is {plain(entropy)} for the finite {np.dtype(dtype)} logits {plain(logits)}: it must be "
        f"finite for logits of any size; {ZERO_TIMES_MINUS_INF}")
    slack = 4 * float(np.finfo(dtype).eps) * max(1.0, math.log(actions))
    values = entropy.detach().numpy()
    assert np.all(values >= -slack) and np.all(values <= math.log(actions) + slack), (
        f"a categorical entropy lies in [0, log K] = [0, {math.log(actions):.6g}]; got {plain(values)} for the "
        f"logits {plain(logits)}")
    assert_differentiable(entropy, "the entropy of tensor logits", "logits")
    entropy.sum().backward()
    assert tensor.grad is not None and torch.isfinite(tensor.grad).all(), (
        f"the entropy's gradient is {plain(tensor.grad)} for the finite {np.dtype(dtype)} logits {plain(logits)}: "
        f"it must stay finite; {ZERO_TIMES_MINUS_INF}")


def test_entropy_of_uniform_and_of_certain_policies(impl):
    close(impl.categorical_entropy(np.zeros((2, 4))), [math.log(4)] * 2, "equal logits: the entropy is log K")
    close(impl.categorical_entropy(np.array([0.0, -1e4, -1e4])), 0.0, "a near-certain policy has entropy ~0")


def test_bad_logits_are_a_clear_error(impl):
    # Each error must begin with the argument's name, and say what was expected.
    impl.categorical_entropy(np.zeros(3))
    for bad, message in [
        (np.array(1.0), r"^logits must have a last axis"),
        (np.zeros((2, 0)), r"^logits must have a last axis"),
        (np.array([0.0, np.nan]), r"^logits must not hold NaN or \+inf"),
        (np.array([0.0, np.inf]), r"^logits must not hold NaN or \+inf"),
        (np.array([-np.inf, -np.inf]), r"^logits must have at least one finite logit per distribution"),
        (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), r"^logits must have at least one finite logit per distribution"),
        (np.array(["a", "b"]), r"^logits must be an array of numbers"),
    ]:
        with pytest.raises(ValueError, match=message):
            impl.categorical_entropy(bad)


# ---- the total loss --------------------------------------------------------------------------------------------


@given(policy_loss=floats(-10, 10), value_loss=floats(0, 10), entropy=entropy_batches(),
       value_coefficient=floats(0, 2), entropy_coefficient=floats(0.001, 0.1))
def test_ppo_loss_adds_the_value_loss_and_subtracts_the_entropy_bonus(
    impl, policy_loss, value_loss, entropy, value_coefficient, entropy_coefficient
):
    arguments = dict(value_coefficient=value_coefficient, entropy_coefficient=entropy_coefficient)
    total = impl.ppo_loss(np.array(policy_loss), np.array(value_loss), entropy, **arguments)
    assert is_numpy_scalar(total), (
        f"NumPy in must give a NumPy scalar (0-d) out; got {type(total).__name__} of shape {np.shape(total)}")
    bonus = entropy_coefficient * entropy.mean()
    close(total, policy_loss + value_coefficient * value_loss - bonus,
          "the PPO loss is policy_loss + c_v · value_loss - c_e · mean(entropy)", readings={
              "policy_loss + c_v · value_loss + c_e · mean(entropy): the entropy term's sign is flipped":
                  policy_loss + value_coefficient * value_loss + bonus,
              "policy_loss + c_v · value_loss: the entropy bonus left out":
                  policy_loss + value_coefficient * value_loss,
              "c_v · policy_loss + value_loss - c_e · mean(entropy): c_v on the policy loss instead of the value loss":
                  value_coefficient * policy_loss + value_loss - bonus})
    more = impl.ppo_loss(np.array(policy_loss), np.array(value_loss), entropy + 1.0, **arguments)
    assert more != total, (
        f"the loss stayed {plain(total)} when every entropy rose by 1 (c_e = {entropy_coefficient:.3g}): the "
        "entropy bonus is not in the loss; more entropy must LOWER it"
    )
    assert more < total, (
        f"the loss rose from {plain(total)} to {plain(more)} when every entropy rose by 1 (c_e = "
        f"{entropy_coefficient:.3g}): the entropy term has the wrong sign; it is a bonus, subtracted"
    )
    policy = torch.tensor(policy_loss, dtype=torch.float64, requires_grad=True)
    value = torch.tensor(value_loss, dtype=torch.float64, requires_grad=True)
    entropy_t = torch.tensor(entropy, requires_grad=True)
    total_t = impl.ppo_loss(policy, value, entropy_t, **arguments)
    assert isinstance(total_t, torch.Tensor) and total_t.ndim == 0, (
        f"a tensor in must give a 0-d tensor out; got {type(total_t).__name__} of shape {tuple(np.shape(total_t))}")
    assert_differentiable(total_t, "the PPO loss of tensor losses and entropy", "policy_loss, value_loss and entropy")
    total_t.backward()
    close(gradient(entropy_t, "entropy"), np.full(entropy.shape, -entropy_coefficient / entropy.size),
          "∂loss/∂entropy_i must be -c_e / N: the entropy bonus must reach the gradient")
    close([gradient(policy, "policy_loss").item(), gradient(value, "value_loss").item()], [1.0, value_coefficient],
          "∂loss/∂policy_loss must be 1 and ∂loss/∂value_loss must be c_v",
          readings={"[c_v, 1]: c_v on the policy loss instead of the value loss": [value_coefficient, 1.0]})


# ---- diagnostics -----------------------------------------------------------------------------------------------


@given(batch=ppo_batches(), pair=categorical_pairs())
def test_approximate_kl_is_non_negative_and_unbiased_for_kl_old_new(impl, batch, pair):
    new, old = batch["new_log_probs"], batch["old_log_probs"]
    kl = impl.approximate_kl(new, old)
    assert is_numpy_scalar(kl), (
        f"NumPy in must give a NumPy scalar (0-d) out; got {type(kl).__name__} of shape {np.shape(kl)}")
    log_ratio = new - old
    close(kl, np.mean(np.expm1(log_ratio) - log_ratio),
          "the approximate KL is mean((r - 1) - log r) with r = exp(new - old)", rtol=1e-7, readings={
              "k1 = mean(old - new) = mean(-log r)": np.mean(-log_ratio),
              "mean((1/r - 1) + log r): the ratio inverted, old/new": np.mean(np.expm1(-log_ratio) + log_ratio)})
    for i in range(new.size):  # every single sample: a negative or zero estimate where policies differ is wrong
        one = float(impl.approximate_kl(new.flat[i:i + 1], old.flat[i:i + 1]))
        # r - 1 computed from r = exp(x) near 1 is exact only to the rounding of r (about 1e-16): an estimate
        # that far below 0 is rounding (CleanRL's exp(x) - 1 - x), not a negative divergence.
        assert one >= -4 * np.finfo(np.float64).eps, (
            f"approximate KL {one:.3g} < 0 for one sample of log-ratio {log_ratio.flat[i]:.3g}: every term of "
            "mean((r - 1) - log r) is >= 0 (for example, k1 = mean(old - new) goes negative where new > old)"
        )
        if abs(log_ratio.flat[i]) > 1e-6:
            assert one > 0.0, (
                f"approximate KL {one:.3g} for one sample of log-ratio {log_ratio.flat[i]:.3g}: the estimate must be "
                "positive where the two policies disagree")
    same = float(impl.approximate_kl(old, old))
    assert same == 0.0, f"the KL estimate must be exactly 0 when new == old; got {same:.3g}"


    # Its expectation under the old policy, by exact enumeration of a small categorical pair.
    old_logits, new_logits = pair
    old_log_p = old_logits - np.logaddexp.reduce(old_logits)
    new_log_p = new_logits - np.logaddexp.reduce(new_logits)
    old_p = np.exp(old_log_p)
    exact = float(np.sum(old_p * (old_log_p - new_log_p)))
    # E_{a ~ old}[estimate(a)] by exact enumeration of the actions, each weighted by its old probability.
    expectation = sum(old_p[a] * float(impl.approximate_kl(new_log_p[a:a + 1], old_log_p[a:a + 1]))
                      for a in range(len(old_p)))
    close(expectation, exact,
          "under samples from the old policy the estimator's expectation must be KL(old ‖ new) exactly, since "
          "(r - 1) with r = new/old has expectation 0 there", rtol=1e-9,
          readings={"KL(new ‖ old) weighted by the old policy's probabilities ... (the ratio inverted, old/new)":
                    sum(old_p[a] * (np.expm1(old_log_p[a] - new_log_p[a]) - (old_log_p[a] - new_log_p[a]))
                        for a in range(len(old_p)))})


def test_diagnostics_worked_examples(impl):
    new, old = np.log([1.5, 0.5, 1.5, 1.0]), np.zeros(4)
    advantages = np.array([1.0, 1.0, -1.0, 1.0])
    close(impl.active_clip_fraction(new, old, advantages, clip_epsilon=0.2), 0.25,
          "only sample 0 (A > 0, r = 1.5 > 1.2) is clipped; sample 1 (A > 0, r = 0.5) and sample 2 (A < 0, "
          "r = 1.5) are outside on the side the clip does not guard", any_float=True,
          readings={"0.75, the fraction with |r - 1| > ε, whatever the advantage's sign": 0.75})
    close(impl.ratio_outside_fraction(new, old, clip_epsilon=0.2), 0.75,
          "ratios 1.5, 0.5, 1.5, 1.0 with ε = 0.2: |r - 1| = 0.5, 0.5, 0.5, 0 → three of four are outside",
          any_float=True)
    # The interval is [1 - ε, 1 + ε] on r, not [e^-ε, e^ε]: r = 1.21 is outside (|r - 1| = 0.21 > 0.2) though
    # |log r| = 0.19 < 0.2, and r = 0.81 is inside (|r - 1| = 0.19) though |log r| = 0.21 > 0.2.
    close(impl.ratio_outside_fraction(np.log([1.21, 1.0]), np.zeros(2), clip_epsilon=0.2), 0.5,
          "ratios 1.21 and 1.0 with ε = 0.2: |r - 1| = 0.21 > 0.2 and 0 → one of two is outside (counting "
          "|log r| = 0.19 > 0.2 instead would say none)", any_float=True)
    close(impl.ratio_outside_fraction(np.log([0.81, 1.0]), np.zeros(2), clip_epsilon=0.2), 0.0,
          "ratios 0.81 and 1.0 with ε = 0.2: |r - 1| = 0.19 and 0, both ≤ 0.2 → none is outside (counting "
          "|log r| = 0.21 > 0.2 instead would say one)", any_float=True)
    close(impl.approximate_kl(np.log([2.0, 0.5]), np.zeros(2)), 0.25,
          "((2 - 1) - log 2 + (0.5 - 1) - log 0.5) / 2 = 0.25")


def test_a_ratio_at_exactly_one_plus_or_minus_epsilon_is_neither_clipped_nor_outside(impl):
    # With ε = 0.5 the ratios 1.5 and 0.5 are exact in floating point (exp(log 1.5) == 1.5 in float32 and float64),
    # so they sit exactly on 1 ± ε. There clip(r) = r, both branches are equal and the gradient is -r·A/N, not zero:
    # the clip does not bind (the docstrings' inequalities are strict), and the ratio has not left the interval.
    new, old = np.log([1.5, 0.5, 2.0, 0.25]), np.zeros(4)
    advantages = np.array([1.0, -1.0, 1.0, -1.0])
    close(impl.active_clip_fraction(new, old, advantages, clip_epsilon=0.5), 0.5,
          "ratios 1.5, 0.5, 2, 0.25 with ε = 0.5, A = 1, -1, 1, -1: the clip binds at 2 and 0.25 only; at r = 1 ± ε "
          "exactly the gradient is not zero, so 1.5 and 0.5 are not clipped", any_float=True,
          readings={"the fraction with r = 1 ± ε counted as clipped (>= and <= for the strict > and <)": 1.0})
    close(impl.ratio_outside_fraction(new, old, clip_epsilon=0.5), 0.5,
          "ratios 1.5, 0.5, 2, 0.25 with ε = 0.5: |r - 1| = 0.5, 0.5, 1, 0.75, and only |r - 1| > ε is outside, so "
          "two of four", any_float=True,
          readings={"the fraction with |r - 1| = ε counted as outside (>= for the strict >)": 1.0})


# ---- every function: containers, dtypes, gradients, log-probs far below 0 -----------------------------------------


def numpy_dtype(value) -> np.dtype:
    if isinstance(value, torch.Tensor):
        return torch.empty((), dtype=value.dtype).numpy().dtype
    return np.dtype(value.dtype)


def as_float64(value) -> np.ndarray:
    return value.detach().numpy().astype(np.float64) if isinstance(value, torch.Tensor) else np.asarray(
        value, dtype=np.float64)


def check_kind_and_dtype(what: str, result, batch: dict, names: tuple[str, ...], any_float: bool = False) -> None:
    """``result`` is a tensor iff any of ``names`` is one, in the promoted dtype of ``names`` (any float if
    ``any_float``)."""
    tensors = [name for name in names if isinstance(batch[name], torch.Tensor)]
    kinds = ", ".join(f"{name} {'tensor' if name in tensors else 'NumPy'} {numpy_dtype(batch[name])}"
                      for name in names)
    for part in result if isinstance(result, tuple) else (result,):
        if tensors:
            assert isinstance(part, torch.Tensor), (
                f"{what} with {kinds}: {type(part).__name__} came out; a result is a tensor if any array argument "
                "is one (NumPy only when every argument is NumPy)")
        else:
            assert isinstance(part, np.ndarray | np.floating), (
                f"{what} with {kinds}: NumPy in must give NumPy out; got {type(part).__name__}")
        promoted = np.result_type(*(numpy_dtype(batch[name]) for name in names))
        dtype = numpy_dtype(part)
        if any_float:
            assert np.issubdtype(dtype, np.floating), f"{what} with {kinds}: a fraction is floating; got {dtype}"
        else:
            assert dtype == promoted, (
                f"{what} with {kinds}: came back in {dtype}; the contract asks for the promoted floating dtype of "
                f"the array arguments, {promoted}")


def require_grad(batch: dict, names: tuple[str, ...]) -> dict:
    """A copy of ``batch`` whose tensors among ``names`` are fresh leaves that require grad."""
    return {key: value.detach().clone().requires_grad_(True) if key in names and isinstance(value, torch.Tensor)
            else value for key, value in batch.items()}


def no_gradient(batch: dict, names: tuple[str, ...], why: str) -> None:
    for name in names:
        value = batch[name]
        if isinstance(value, torch.Tensor) and value.grad is not None and value.grad.any():
            raise AssertionError(f"gradient reached {name}: {why}")


@given(batch=typed_batches(ppo_batches(), SURROGATE_ARRAYS, log_probs=True))
def test_surrogate_functions_keep_container_dtype_and_extreme_log_probs(impl, batch):
    plain64 = {key: as_float64(value) if key in SURROGATE_ARRAYS else value for key, value in batch.items()}
    promoted = np.result_type(*(numpy_dtype(batch[name]) for name in SURROGATE_ARRAYS))
    tolerance = 1e-9 if promoted == np.float64 else 2e-5
    # A gradient comes back in its leaf's dtype.
    new_tolerance = 1e-9 if numpy_dtype(batch["new_log_probs"]) == promoted == np.float64 else 2e-5
    ratio, unclipped, clipped, pessimistic = expected = reference_terms(**plain64)
    log_probs = ("new_log_probs", "old_log_probs")
    lowest = min(float(plain64[name].min()) for name in log_probs)

    graded = require_grad(batch, SURROGATE_ARRAYS)
    terms = impl.clipped_surrogate_terms(**graded)
    check_kind_and_dtype("clipped_surrogate_terms", terms, batch, SURROGATE_ARRAYS)
    found_ratio = as_float64(terms[0])
    if not np.isfinite(found_ratio).all():
        with np.errstate(all="ignore"):
            quotient = (np.exp(batch_arrays(batch, "new_log_probs")) / np.exp(batch_arrays(batch, "old_log_probs"))
                        ).astype(np.float64)
        reading = ("; it equals exp(new) / exp(old), which is 0 / 0 where exp underflows: compute exp(new - old)"
                   if np.array_equal(np.isfinite(found_ratio), np.isfinite(quotient)) else "")
        raise AssertionError(
            f"log-probs down to {lowest:.4g} in {promoted} gave a ratio that is not finite "
            f"({found_and_expected(found_ratio, ratio)}): the ratio is finite for any finite log-probabilities, "
            f"exp(new - old){reading}")
    for index, (name, part) in enumerate(zip(("ratio", "unclipped", "clipped", "pessimistic"), terms)):
        close(as_float64(part), expected[index],
              f"the {name} term (ratio = exp(new - old), unclipped = r·A, clipped = clip(r, 1 - ε, 1 + ε)·A, "
              f"pessimistic = their min) with log-probs down to {lowest:.4g}, in {promoted}", rtol=tolerance)
    if isinstance(graded["new_log_probs"], torch.Tensor):
        assert_differentiable(terms[0], "the ratio of tensor new_log_probs", "new_log_probs")
        terms[0].sum().backward()
        close(as_float64(gradient(graded["new_log_probs"], "new_log_probs")), ratio,
              "∂Σ ratio / ∂new_log_probs must be the ratio itself: gradient reaches new_log_probs through "
              "exp(new - old)", rtol=new_tolerance)
    else:
        for part in terms:
            assert not (isinstance(part, torch.Tensor) and part.requires_grad), (
                "new_log_probs went in as NumPy, yet the terms require grad: old log-probs and advantages are data, "
                "detached; no gradient may reach them")
    no_gradient(graded, ("old_log_probs", "advantages"), "old log-probs and advantages are data; detach them")

    graded = require_grad(batch, SURROGATE_ARRAYS)
    loss = impl.clipped_policy_loss(**graded)
    check_kind_and_dtype("clipped_policy_loss", loss, batch, SURROGATE_ARRAYS)
    close(as_float64(loss), -pessimistic.mean(),
          f"the policy loss -mean(pessimistic) with log-probs down to {lowest:.4g}, in {promoted}", rtol=tolerance)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
    no_gradient(graded, ("old_log_probs", "advantages"), "old log-probs and advantages are data; detach them")

    graded = require_grad(batch, log_probs)
    kl = impl.approximate_kl(graded["new_log_probs"], graded["old_log_probs"])
    check_kind_and_dtype("approximate_kl", kl, batch, log_probs)
    log_ratio = plain64["new_log_probs"] - plain64["old_log_probs"]
    close(as_float64(kl), np.mean(np.expm1(log_ratio) - log_ratio),
          f"the approximate KL mean((r - 1) - log r) with log-probs down to {lowest:.4g}, in {promoted}",
          rtol=max(tolerance, 1e-7))
    if isinstance(graded["new_log_probs"], torch.Tensor):
        assert_differentiable(kl, "the approximate KL of tensor new_log_probs", "new_log_probs")
        kl.backward()
        close(as_float64(gradient(graded["new_log_probs"], "new_log_probs")), np.expm1(log_ratio) / ratio.size,
              "∂KL/∂new_log_prob_i must be (r_i - 1) / N: gradient reaches new_log_probs (the KL is a scalar of "
              "them, not of numbers copied out)", rtol=new_tolerance)
    no_gradient(graded, ("old_log_probs",), "old log-probs are data; detach them")

    epsilon = batch["clip_epsilon"]
    binds = clip_binds(ratio, plain64["advantages"], epsilon)
    graded = require_grad(batch, SURROGATE_ARRAYS)
    for name, fraction, names, count, rule in (
        ("active_clip_fraction", impl.active_clip_fraction(**graded), SURROGATE_ARRAYS, binds.sum(),
         "A > 0 and r > 1 + ε, or A < 0 and r < 1 - ε"),
        ("ratio_outside_fraction", impl.ratio_outside_fraction(graded["new_log_probs"], graded["old_log_probs"],
                                                               epsilon), log_probs,
         (np.abs(ratio - 1.0) > epsilon).sum(), "|r - 1| > ε"),
    ):
        check_kind_and_dtype(name, fraction, batch, names, any_float=True)
        assert not (isinstance(fraction, torch.Tensor) and fraction.requires_grad), (
            f"{name} requires grad: a fraction is a count, returned without gradient")
        close(fraction, count / ratio.size, f"{name} counts {rule} (log-probs down to {lowest:.4g}, {promoted})",
              any_float=True)


def batch_arrays(batch: dict, name: str) -> np.ndarray:
    value = batch[name]
    return value.detach().numpy() if isinstance(value, torch.Tensor) else value


@given(batch=typed_batches(value_batches(), VALUE_ARRAYS))
def test_value_loss_keeps_container_dtype_and_detaches_its_targets(impl, batch):
    plain64 = {key: as_float64(value) if key in VALUE_ARRAYS else value for key, value in batch.items()}
    promoted = np.result_type(*(numpy_dtype(batch[name]) for name in VALUE_ARRAYS))
    graded = require_grad(batch, VALUE_ARRAYS)
    loss = impl.clipped_value_loss(**graded)
    check_kind_and_dtype("clipped_value_loss", loss, batch, VALUE_ARRAYS)
    values, old_values, returns, epsilon = (plain64[key] for key in (*VALUE_ARRAYS, "clip_epsilon"))
    clipped = old_values + np.clip(values - old_values, -epsilon, epsilon)
    close(as_float64(loss), 0.5 * np.maximum((values - returns) ** 2, (clipped - returns) ** 2).mean(),
          f"the value loss in {promoted}", rtol=1e-9 if promoted == np.float64 else 2e-5)
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        loss.backward()
    no_gradient(graded, ("old_values", "returns"), "old values and returns are targets recorded with the data; "
                "detach them")
    if isinstance(graded["values"], torch.Tensor):
        gradient(graded["values"], "values")


@given(policy_loss=floats(-10, 10), value_loss=floats(0, 10), entropy=entropy_batches(), data=st.data())
def test_ppo_loss_keeps_container_and_dtype(impl, policy_loss, value_loss, entropy, data):
    batch = data.draw(typed_batches(st.just(dict(policy_loss=np.array(policy_loss), value_loss=np.array(value_loss),
                                                 entropy=entropy)), ("policy_loss", "value_loss", "entropy")))
    graded = require_grad(batch, ("policy_loss", "value_loss", "entropy"))
    total = impl.ppo_loss(**graded, value_coefficient=0.5, entropy_coefficient=0.01)
    check_kind_and_dtype("ppo_loss", total, batch, ("policy_loss", "value_loss", "entropy"))
    promoted = numpy_dtype(total)
    close(as_float64(total), float(as_float64(batch["policy_loss"])) + 0.5 * float(as_float64(batch["value_loss"]))
          - 0.01 * as_float64(batch["entropy"]).mean(), f"the PPO loss in {promoted}",
          rtol=1e-9 if promoted == np.float64 else 2e-5)
    tensors = [key for key in ("policy_loss", "value_loss", "entropy") if isinstance(graded[key], torch.Tensor)]
    if tensors:
        assert_differentiable(total, "the PPO loss of tensor terms", " and ".join(tensors))
        total.backward()
        for key in tensors:
            gradient(graded[key], key)


# ---- bad input -------------------------------------------------------------------------------------------------


def test_any_one_tensor_argument_gives_a_tensor(impl):
    surrogate = dict(new_log_probs=np.log([1.5, 0.5, 1.0]), old_log_probs=np.zeros(3), advantages=np.ones(3),
                     clip_epsilon=0.2)
    values = dict(values=np.zeros(3), old_values=np.ones(3), returns=np.ones(3), clip_epsilon=0.2)
    total = dict(policy_loss=np.array(1.0), value_loss=np.array(2.0), entropy=np.ones(3), value_coefficient=0.5,
                 entropy_coefficient=0.01)
    log_probs = ("new_log_probs", "old_log_probs")
    cases = [(impl.clipped_surrogate_terms, surrogate, SURROGATE_ARRAYS),
             (impl.clipped_policy_loss, surrogate, SURROGATE_ARRAYS),
             (impl.active_clip_fraction, surrogate, SURROGATE_ARRAYS),
             (impl.ratio_outside_fraction, {key: surrogate[key] for key in (*log_probs, "clip_epsilon")}, log_probs),
             (impl.approximate_kl, {key: surrogate[key] for key in log_probs}, log_probs),
             (impl.clipped_value_loss, values, VALUE_ARRAYS),
             (impl.ppo_loss, total, ("policy_loss", "value_loss", "entropy"))]
    for function, arguments, names in cases:
        for name in names:
            found = function(**dict(arguments, **{name: torch.from_numpy(arguments[name].copy())}))
            for part in found if isinstance(found, tuple) else (found,):
                assert isinstance(part, torch.Tensor), (
                    f"{function.__name__}: only {name} went in as a tensor and {type(part).__name__} came out; a "
                    "result is a tensor if any array argument is one")


def test_bad_input_is_a_clear_error(impl):
    good = dict(new_log_probs=np.zeros(3), old_log_probs=np.zeros(3), advantages=np.ones(3), clip_epsilon=0.2)
    impl.clipped_surrogate_terms(**good)  # valid input works first
    for function in (impl.clipped_surrogate_terms, impl.clipped_policy_loss, impl.active_clip_fraction):
        for change, argument in [
            (dict(old_log_probs=np.zeros(4)), "old_log_probs"),
            (dict(advantages=np.ones((3, 1))), "advantages"),
            (dict(advantages=np.ones(1)), "advantages"),  # no broadcasting
            (dict(clip_epsilon=0.0), "clip_epsilon"),
            (dict(clip_epsilon=-0.1), "clip_epsilon"),
            (dict(new_log_probs=np.zeros(0), old_log_probs=np.zeros(0), advantages=np.zeros(0)), "new_log_probs"),
        ]:
            with pytest.raises(ValueError, match=word(argument)):
                function(**{**good, **change})
    with pytest.raises(ValueError, match=word("old_log_probs")):
        impl.approximate_kl(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match=word("new_log_probs")):
        impl.approximate_kl(np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match=word("new_log_probs")):
        impl.ratio_outside_fraction(np.zeros(0), np.zeros(0), clip_epsilon=0.2)
    for change, argument in [(dict(values=np.zeros(0), old_values=np.zeros(0), returns=np.zeros(0)), "values"),
                             (dict(clip_epsilon=-0.5), "clip_epsilon")]:
        with pytest.raises(ValueError, match=word(argument)):
            impl.clipped_value_loss(**{**dict(values=np.zeros(3), old_values=np.zeros(3), returns=np.ones(3),
                                              clip_epsilon=0.2), **change})
    with pytest.raises(ValueError, match=word("clip_epsilon")):
        impl.ratio_outside_fraction(np.zeros(3), np.zeros(3), clip_epsilon=0.0)
    with pytest.raises(ValueError, match=word("old_log_probs")):
        impl.ratio_outside_fraction(np.zeros(3), np.zeros(2), clip_epsilon=0.2)

    values = dict(values=np.zeros(3), old_values=np.zeros(3), returns=np.ones(3), clip_epsilon=0.2)
    for change, argument in [(dict(old_values=np.zeros(2)), "old_values"), (dict(returns=np.ones(4)), "returns"),
                             (dict(clip_epsilon=0.0), "clip_epsilon")]:
        with pytest.raises(ValueError, match=word(argument)):
            impl.clipped_value_loss(**{**values, **change})

    total = dict(policy_loss=np.array(1.0), value_loss=np.array(2.0), entropy=np.ones(3), value_coefficient=0.5,
                 entropy_coefficient=0.01)
    for change, argument in [
        (dict(policy_loss=np.ones(2)), "policy_loss"),
        (dict(value_loss=np.ones(3)), "value_loss"),
        (dict(entropy=np.ones(0)), "entropy"),
        (dict(value_coefficient=-1.0), "value_coefficient"),
        (dict(entropy_coefficient=-0.01), "entropy_coefficient"),
    ]:
        with pytest.raises(ValueError, match=word(argument)):
            impl.ppo_loss(**{**total, **change})


def test_bad_arrays_are_named_as_numpy_and_as_tensors(impl):
    """The checks hold on the training loops' path too, where every array is already a tensor; a shape is compared
    with the first array's, and the error names both."""
    functions = [(impl.clipped_surrogate_terms, ("new_log_probs", "old_log_probs", "advantages"), 0.2),
                 (impl.clipped_policy_loss, ("new_log_probs", "old_log_probs", "advantages"), 0.2),
                 (impl.active_clip_fraction, ("new_log_probs", "old_log_probs", "advantages"), 0.2),
                 (impl.approximate_kl, ("new_log_probs", "old_log_probs"), None),
                 (impl.ratio_outside_fraction, ("new_log_probs", "old_log_probs"), 0.2),
                 (impl.clipped_value_loss, ("values", "old_values", "returns"), 0.2)]
    for function, (first, *others), clip_epsilon in functions:
        epsilon = {} if clip_epsilon is None else dict(clip_epsilon=clip_epsilon)
        good = {name: np.linspace(-1.0, 0.0, 3) for name in (first, *others)}
        function(**good, **epsilon)  # valid input works first
        cases = [({first: np.zeros(1)}, others[0], first)]  # every other array differs from the first one
        cases += [({name: np.zeros(1)}, name, first) for name in others]  # one that would broadcast
        cases += [({name: np.zeros(0) for name in good}, first)]
        for change, *named in cases:
            for as_tensors in (False, True):
                arrays = {name: torch.from_numpy(value) if as_tensors else value
                          for name, value in {**good, **change}.items()}
                with pytest.raises(ValueError) as error:
                    function(**arrays, **epsilon)
                unnamed = [name for name in named if not re.search(word(name), str(error.value))]
                assert not unnamed, (
                    f"{function.__name__} with {({k: tuple(v.shape) for k, v in change.items()})}, "
                    f"{'tensors' if as_tensors else 'NumPy'}: {str(error.value)!r} does not name {unnamed}")
        for name in good:
            with pytest.raises(ValueError, match=word(name)):
                function(**{**good, name: np.array(["a", "b", "c"])}, **epsilon)


def test_ppo_loss_takes_one_number_of_any_shape_and_names_what_is_not_numbers(impl):
    total = impl.ppo_loss(np.array([1.0]), np.array([[2.0]]), np.array([0.5, 1.5]), value_coefficient=0.5,
                          entropy_coefficient=0.1)
    assert np.shape(total) == (), f"a loss of shape (1,) or (1, 1) is one number; the total has shape {np.shape(total)}"
    close(total, 1.9, "the PPO loss of one-element losses")
    good = dict(policy_loss=np.array(1.0), value_loss=np.array(2.0), entropy=np.ones(3))
    for name in good:
        with pytest.raises(ValueError, match=word(name)):
            impl.ppo_loss(**{**good, name: np.array(["a"])}, value_coefficient=0.5, entropy_coefficient=0.01)


def test_ppo_loss_scales_each_term_in_the_promoted_dtype(impl):
    # Scaled in float32, 0.37 · value_loss (or 0.37 · mean(entropy)) is off by about 1e-8 of itself.
    arguments = dict(policy_loss=np.array(1.0), value_loss=np.array(0.7), entropy=np.array([0.3, 1.1]))
    for name in ("value_loss", "entropy"):
        mixed = dict(arguments, **{name: arguments[name].astype(np.float32)})
        widened = {key: value.astype(np.float64) for key, value in mixed.items()}
        expected = widened["policy_loss"] + 0.37 * widened["value_loss"] - 0.37 * widened["entropy"].mean()
        close(impl.ppo_loss(**mixed, value_coefficient=0.37, entropy_coefficient=0.37), expected,
              f"a float32 {name} with float64 other terms: the total is computed in float64, each term widened "
              "before it is scaled", rtol=1e-13)


# ---- clauses no test holds, and why ----
# approximate_kl: "it cannot serve as a KL loss" and "lower variance when the policies are close": consequences
#     explained for the reader; the tests hold what they follow from (old log-probs detached; the estimator's value).
# clipped_value_loss: "clip_epsilon in the units of the values": a statement about the caller's choice of ε.
# categorical_entropy, "computed from log_softmax (never log(softmax))": how, not what; held only through what it
#   implies (finite values and gradients at p = 0), which other routes (torch.distributions, a where) also give.
# categorical_entropy, the value at logits near the dtype's limits: torch.distributions' logsumexp route loses a
#   tie's log 2 there (0 for [1e308, 1e308]) and is a valid variant; only finiteness and [0, log K] are held there.
# ppo_loss: "minimising the loss keeps the policy exploring": the reason for the sign the tests hold.
# The Examples: run as doctests (python -m pytest --doctest-modules solutions), not here.


test_contract, test_contract_edges = battery_tests(CONTRACTS)
