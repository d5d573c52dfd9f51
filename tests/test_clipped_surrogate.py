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

from tests.assertions import close
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


def is_numpy_scalar(value):
    return isinstance(value, np.ndarray | np.floating | float) and np.ndim(value) == 0


# ---- the clipped policy objective ------------------------------------------------------------------------------


@given(batch=ppo_batches())
def test_terms_are_the_ratio_its_two_branches_and_their_minimum(impl, batch):
    originals = {key: value.copy() for key, value in batch.items() if isinstance(value, np.ndarray)}
    ratio, unclipped, clipped, pessimistic = impl.clipped_surrogate_terms(**batch)
    expected = reference_terms(**batch)
    for name, actual, wanted, message in [
        ("ratio", ratio, expected[0], "the ratio is exp(new_log_probs - old_log_probs), per sample"),
        ("unclipped", unclipped, expected[1], "the unclipped term is ratio · advantage"),
        ("clipped", clipped, expected[2], "the clipped term is clip(ratio, 1 - ε, 1 + ε) · advantage: clip the "
                                          "RATIO, never the advantage"),
        ("pessimistic", pessimistic, expected[3], "the pessimistic term is min(unclipped, clipped): the min, "
                                                  "not the max"),
    ]:
        assert isinstance(actual, np.ndarray) and actual.shape == batch["new_log_probs"].shape, (
            f"{name} must be a NumPy array of new_log_probs' shape for NumPy input"
        )
        close(actual, wanted, message)
    assert np.all(pessimistic <= unclipped) and np.all(pessimistic <= clipped), (
        "the pessimistic objective can never exceed either branch: take the min of the two"
    )
    inside = np.abs(ratio - 1.0) <= batch["clip_epsilon"]
    np.testing.assert_array_equal(pessimistic[inside], unclipped[inside],
                                  err_msg="inside [1 - ε, 1 + ε] the clip changes nothing: pessimistic = r · A")
    close(impl.clipped_policy_loss(**batch), -expected[3].mean(),
          "the policy loss is -mean(pessimistic): minus, because the optimiser minimises and PPO maximises the "
          "surrogate")
    for key, value in originals.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")

    tensors = {key: torch.tensor(value, dtype=torch.float32) if isinstance(value, np.ndarray) else value
               for key, value in batch.items()}
    terms = impl.clipped_surrogate_terms(**tensors)
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in terms), (
        "float32 tensors in must give float32 tensors out"
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
    assert isinstance(loss, torch.Tensor) and loss.ndim == 0, "a tensor in must give a 0-d tensor out"
    loss.backward()
    binds = clip_binds(ratio, batch["advantages"], batch["clip_epsilon"])
    gradient = new.grad.numpy()
    assert np.all(gradient[binds] == 0.0), (
        "a sample whose clip binds (A > 0 and r > 1 + ε, or A < 0 and r < 1 - ε) must have exactly zero "
        "gradient: the min must pick the constant clipped branch there"
    )
    outside_free = ~binds & (np.abs(ratio - 1.0) > batch["clip_epsilon"]) & (batch["advantages"] != 0)
    assert np.all(gradient[outside_free] != 0.0), (
        "a ratio outside [1 - ε, 1 + ε] on the side the clip does not guard (A > 0 and r < 1 - ε, or A < 0 and "
        "r > 1 + ε) must keep its gradient: the pessimistic min picks the unclipped branch there"
    )
    close(gradient, np.where(binds, 0.0, -ratio * batch["advantages"] / ratio.size),
          "∂loss/∂new_log_prob must be -r·A/N where the clip does not bind and 0 where it does")
    for name, tensor in (("old_log_probs", old), ("advantages", advantages)):
        assert tensor.grad is None or not tensor.grad.any(), (
            f"gradient reached {name}: old log-probs and advantages are data recorded before the update; detach "
            "them"
        )

    # The diagnostics count the same events.
    epsilon = batch["clip_epsilon"]
    active = impl.active_clip_fraction(**batch)
    outside = impl.ratio_outside_fraction(batch["new_log_probs"], batch["old_log_probs"], epsilon)
    assert is_numpy_scalar(active) and is_numpy_scalar(outside), "NumPy in must give NumPy scalars (0-d) out"
    # A fraction k/N may come back in any floating dtype (CleanRL's `.float().mean()` gives float32).
    close(active, binds.mean(),
          "the active clip fraction counts samples where the clip binds: A > 0 and r > 1 + ε, or A < 0 and "
          "r < 1 - ε (their gradient is zero); a ratio outside on the other side is not clipped", any_float=True)
    close(active, ((gradient == 0.0) & (batch["advantages"] != 0)).mean(),
          "the active clip fraction must be the fraction of samples (with A ≠ 0) whose gradient the clip zeroes",
          any_float=True)
    close(outside, (np.abs(ratio - 1.0) > epsilon).mean(),
          "the ratio-outside fraction counts |r - 1| > ε, whatever the advantage", any_float=True)
    assert active <= outside, "every sample whose clip binds has its ratio outside [1 - ε, 1 + ε]"
    tensor_active = impl.active_clip_fraction(new, old, advantages, epsilon)
    assert isinstance(tensor_active, torch.Tensor) and tensor_active.ndim == 0, "tensor in, 0-d tensor out"


# ---- the clipped value loss ------------------------------------------------------------------------------------


@given(batch=value_batches())
def test_value_loss_is_the_max_of_the_two_squared_errors(impl, batch):
    values, old_values, returns = batch["values"], batch["old_values"], batch["returns"]
    epsilon = batch["clip_epsilon"]
    loss = impl.clipped_value_loss(**batch)
    assert is_numpy_scalar(loss), "NumPy in must give a NumPy scalar (0-d) out"
    clipped_prediction = old_values + np.clip(values - old_values, -epsilon, epsilon)
    expected = 0.5 * np.maximum((values - returns) ** 2, (clipped_prediction - returns) ** 2).mean()
    close(loss, expected,
          "the value loss is 0.5 · mean(max((V - R)², (V_old + clip(V - V_old, -ε, ε) - R)²)): the prediction "
          "is clipped around the OLD value, and the larger of the two errors is kept")
    assert loss >= 0.5 * ((values - returns) ** 2).mean() * (1 - 1e-12), (
        "the clipped value loss is never below the plain squared error: keep the max of the two errors"
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
    assert isinstance(loss_t, torch.Tensor) and loss_t.ndim == 0, "a tensor in must give a 0-d tensor out"
    loss_t.backward()
    assert values_t.grad is not None, "keep autograd through the value loss"
    for name, tensor in (("old_values", old_values_t), ("returns", returns_t)):
        assert tensor.grad is None or not tensor.grad.any(), (
            f"gradient reached {name}: they are targets, detach them"
        )


def test_value_loss_worked_examples(impl):
    # V moved 2 away from V_old = 1 towards R = 3: the clipped prediction 1.5 has the larger error, 1.5² / 2.
    close(impl.clipped_value_loss(np.array([3.0]), np.array([1.0]), np.array([3.0]), clip_epsilon=0.5), 1.125,
          "clip V - V_old (not V - R) and keep the larger error: 0.5 · (1 + 0.5 - 3)² = 1.125")
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
    assert is_numpy_scalar(total), "NumPy in must give a NumPy scalar (0-d) out"
    close(total, policy_loss + value_coefficient * value_loss - entropy_coefficient * entropy.mean(),
          "the PPO loss is policy_loss + c_v · value_loss - c_e · mean(entropy)")
    more = impl.ppo_loss(np.array(policy_loss), np.array(value_loss), entropy + 1.0, **arguments)
    assert more < total, (
        "more entropy must LOWER the loss (it is a bonus): with the wrong sign, or never added, minimising the "
        "loss does not keep the policy exploring"
    )
    policy = torch.tensor(policy_loss, dtype=torch.float64, requires_grad=True)
    value = torch.tensor(value_loss, dtype=torch.float64, requires_grad=True)
    entropy_t = torch.tensor(entropy, requires_grad=True)
    total_t = impl.ppo_loss(policy, value, entropy_t, **arguments)
    assert isinstance(total_t, torch.Tensor) and total_t.ndim == 0, "a tensor in must give a 0-d tensor out"
    total_t.backward()
    close(entropy_t.grad.numpy(), np.full(entropy.shape, -entropy_coefficient / entropy.size),
          "∂loss/∂entropy_i must be -c_e / N: the entropy bonus must reach the gradient")
    close([policy.grad.item(), value.grad.item()], [1.0, value_coefficient],
          "∂loss/∂policy_loss must be 1 and ∂loss/∂value_loss must be c_v")


# ---- diagnostics -----------------------------------------------------------------------------------------------


@given(batch=ppo_batches(), pair=categorical_pairs())
def test_approximate_kl_is_non_negative_and_unbiased_for_kl_old_new(impl, batch, pair):
    new, old = batch["new_log_probs"], batch["old_log_probs"]
    kl = impl.approximate_kl(new, old)
    assert is_numpy_scalar(kl), "NumPy in must give a NumPy scalar (0-d) out"
    log_ratio = new - old
    close(kl, np.mean(np.expm1(log_ratio) - log_ratio),
          "the approximate KL is mean((r - 1) - log r) with r = exp(new - old)", rtol=1e-7)
    for i in range(new.size):  # every single sample: a negative or zero estimate where policies differ is wrong
        one = float(impl.approximate_kl(new.flat[i:i + 1], old.flat[i:i + 1]))
        # r - 1 computed from r = exp(x) near 1 is exact only to the rounding of r (about 1e-16): an estimate
        # that far below 0 is rounding (CleanRL's exp(x) - 1 - x), not a negative divergence.
        assert one >= -4 * np.finfo(np.float64).eps, (
            f"approximate KL {one:.3g} < 0 for log-ratio {log_ratio.flat[i]:.3g}: mean(old - new) (k1) can go "
            "negative; mean((r - 1) - log r) cannot"
        )
        if abs(log_ratio.flat[i]) > 1e-6:
            assert one > 0.0, "the KL estimate must be positive where the two policies disagree"
    assert float(impl.approximate_kl(old, old)) == 0.0, "the KL estimate must be exactly 0 when new == old"


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
          "under samples from the old policy the estimator's expectation must be KL(old ‖ new) exactly: the "
          "ratio is new/old, and (r - 1) has expectation 0", rtol=1e-9)


def test_diagnostics_worked_examples(impl):
    new, old = np.log([1.5, 0.5, 1.5, 1.0]), np.zeros(4)
    advantages = np.array([1.0, 1.0, -1.0, 1.0])
    close(impl.active_clip_fraction(new, old, advantages, clip_epsilon=0.2), 0.25,
          "only sample 0 (A > 0, r = 1.5 > 1.2) is clipped; sample 1 (A > 0, r = 0.5) and sample 2 (A < 0, "
          "r = 1.5) are outside on the side the clip does not guard", any_float=True)
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
