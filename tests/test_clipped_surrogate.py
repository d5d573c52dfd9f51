"""The clipped_surrogate tests: PPO's clipped objectives and diagnostics.

Every property is checked against the formulas written out here in NumPy: r = exp(new - old), the clip binds
where A > 0 and r > 1 + ε or A < 0 and r < 1 - ε, and the per-sample gradient of the policy loss with respect to
the new log-probability is -r·A/N where the clip does not bind and exactly 0 where it does.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given

from tests.assertions import assert_differentiable, close, gradient, plain
from kata.testing.strategies import categorical_pairs, entropy_batches, floats, ppo_batches, value_batches

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
    """Per term, the values each common misreading gives: named in a message only when they are the values found."""
    log_ratio = new_log_probs - old_log_probs
    ratio, unclipped, clipped, _ = reference_terms(new_log_probs, old_log_probs, advantages, clip_epsilon)
    return (
        {"exp(old - new): the ratio inverted": np.exp(-log_ratio), "new - old: the log-ratio, not exponentiated":
         log_ratio},
        {"the advantage alone, without the ratio": advantages},
        {"r · clip(A, 1 - ε, 1 + ε): the advantage clipped instead of the ratio":
         ratio * np.clip(advantages, 1.0 - clip_epsilon, 1.0 + clip_epsilon),
         "exp(clip(log r, -ε, ε)) · A: the log-ratio clipped to [-ε, ε] instead of the ratio to [1 - ε, 1 + ε]":
         np.exp(np.clip(log_ratio, -clip_epsilon, clip_epsilon)) * advantages},
        {"max(unclipped, clipped), the optimistic branch": np.maximum(unclipped, clipped)},
    )


def is_numpy_scalar(value):
    return isinstance(value, np.ndarray | np.floating | float) and np.ndim(value) == 0


# ---- the clipped policy objective ------------------------------------------------------------------------------


@given(batch=ppo_batches())
def test_terms_are_the_ratio_its_two_branches_and_their_minimum(impl, batch):
    originals = {key: value.copy() for key, value in batch.items() if isinstance(value, np.ndarray)}
    ratio, unclipped, clipped, pessimistic = impl.clipped_surrogate_terms(**batch)
    expected = reference_terms(**batch)
    for name, actual, wanted, message, readings in zip(
        ("ratio", "unclipped", "clipped", "pessimistic"), (ratio, unclipped, clipped, pessimistic), expected,
        ("the ratio is exp(new_log_probs - old_log_probs), per sample", "the unclipped term is ratio · advantage",
         "the clipped term is clip(ratio, 1 - ε, 1 + ε) · advantage", "the pessimistic term is min(unclipped, "
         "clipped)"), term_readings(**batch),
    ):
        assert isinstance(actual, np.ndarray) and actual.shape == batch["new_log_probs"].shape, (
            f"{name} must be a NumPy array of new_log_probs' shape {batch['new_log_probs'].shape} for NumPy input; "
            f"got {type(actual).__name__} of shape {np.shape(actual)}"
        )
        close(actual, wanted, message, readings=readings)
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
          "surrogate", readings={"+mean(pessimistic): the sign is flipped": expected[3].mean()})
    for key, value in originals.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")

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
          "r < 1 - ε (their gradient is zero); a ratio outside on the other side is not clipped", any_float=True,
          readings={"the fraction with |r - 1| > ε, whatever the advantage's sign": outside_fraction})
    close(active, ((grad == 0.0) & (batch["advantages"] != 0)).mean(),
          "the active clip fraction must be the fraction of samples (with A ≠ 0) whose gradient the clip zeroes",
          any_float=True)
    close(outside, outside_fraction, "the ratio-outside fraction counts |r - 1| > ε, whatever the advantage",
          any_float=True, readings={"the fraction with |log r| > ε, an interval on log r instead of r": (
              np.abs(np.log(ratio)) > epsilon).mean()})
    assert active <= outside, (
        f"the active clip fraction {plain(active)} exceeds the ratio-outside fraction {plain(outside)}: every "
        "sample whose clip binds has its ratio outside [1 - ε, 1 + ε]")
    tensor_active = impl.active_clip_fraction(new, old, advantages, epsilon)
    assert isinstance(tensor_active, torch.Tensor) and tensor_active.ndim == 0, (
        f"tensor in, 0-d tensor out; got {type(tensor_active).__name__} of shape {tuple(np.shape(tensor_active))}")


# ---- the clipped value loss ------------------------------------------------------------------------------------


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
    around_returns = returns + np.clip(values - returns, -epsilon, epsilon)
    close(loss, expected,
          "the value loss is 0.5 · mean(max((V - R)², (V_old + clip(V - V_old, -ε, ε) - R)²)): the prediction "
          "is clipped around the OLD value, and the larger of the two errors is kept", readings={
              "the loss with the min of the two errors instead of the max": 0.5 * np.minimum(*errors).mean(),
              "the loss with the prediction clipped around the returns, R + clip(V - R, -ε, ε)": 0.5 * np.maximum(
                  errors[0], (around_returns - returns) ** 2).mean(),
              "the plain 0.5 · mean((V - R)²), no clipped branch": 0.5 * errors[0].mean()})
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


# ---- bad input -------------------------------------------------------------------------------------------------


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
            with pytest.raises(ValueError, match=argument):
                function(**{**good, **change})
    with pytest.raises(ValueError, match="old_log_probs"):
        impl.approximate_kl(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="clip_epsilon"):
        impl.ratio_outside_fraction(np.zeros(3), np.zeros(3), clip_epsilon=0.0)
    with pytest.raises(ValueError, match="old_log_probs"):
        impl.ratio_outside_fraction(np.zeros(3), np.zeros(2), clip_epsilon=0.2)

    values = dict(values=np.zeros(3), old_values=np.zeros(3), returns=np.ones(3), clip_epsilon=0.2)
    for change, argument in [(dict(old_values=np.zeros(2)), "old_values"), (dict(returns=np.ones(4)), "returns"),
                             (dict(clip_epsilon=0.0), "clip_epsilon")]:
        with pytest.raises(ValueError, match=argument):
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
        with pytest.raises(ValueError, match=argument):
            impl.ppo_loss(**{**total, **change})
