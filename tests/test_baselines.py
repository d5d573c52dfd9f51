"""Concept 2 — baselines (GUIDE.md §2): no baseline, the same-group mean, RLOO, and the simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import floats, group_rewards

pytestmark = pytest.mark.baselines

TIGHT = dict(rtol=1e-10, atol=1e-10)


@given(rewards=group_rewards())
def test_no_baseline_returns_the_rewards(impl, rewards):
    advantages = impl.no_baseline_advantages(rewards)
    assert isinstance(advantages, np.ndarray), "NumPy in must give NumPy out"
    np.testing.assert_array_equal(advantages, rewards, err_msg="with no baseline the advantage is the reward")
    assert advantages is not rewards and not np.shares_memory(advantages, rewards), (
        "return a new array: a caller that changes the advantages must not change the rewards"
    )


@given(rewards=group_rewards())
def test_rloo_advantages_sum_to_zero_in_every_group(impl, rewards):
    advantages = impl.rloo_advantages(rewards)
    assert advantages.shape == rewards.shape, "RLOO keeps the [groups, G] shape"
    scale = 1.0 + np.abs(rewards).max()
    np.testing.assert_allclose(
        advantages.sum(axis=1), 0.0, atol=1e-10 * scale,
        err_msg="RLOO advantages must sum to zero within each row (group): are the groups formed along axis 1?",
    )


@given(rewards=group_rewards(min_group_size=1))
def test_same_group_centring_sums_to_zero_in_every_group(impl, rewards):
    advantages = impl.group_mean_advantages(rewards)
    assert advantages.shape == rewards.shape
    np.testing.assert_allclose(
        advantages.sum(axis=1), 0.0, atol=1e-10 * (1.0 + np.abs(rewards).max()),
        err_msg="same-group centring subtracts each row's own mean: every row must sum to zero",
    )


@given(rewards=group_rewards())
def test_same_group_centring_is_rloo_scaled_by_g_minus_one_over_g(impl, rewards):
    group_size = rewards.shape[1]
    np.testing.assert_allclose(
        impl.group_mean_advantages(rewards),
        (group_size - 1) / group_size * impl.rloo_advantages(rewards),
        **TIGHT,
        err_msg="same-group centring must equal (G-1)/G times RLOO exactly: RLOO's baseline is the mean of the "
        "OTHER G-1 rewards (divide by G-1, leave r_i out)",
    )


@given(rewards=group_rewards(), shifts=st.lists(floats(-50, 50), min_size=5, max_size=5))
def test_a_constant_added_to_a_group_changes_nothing(impl, rewards, shifts):
    shifted = rewards + np.asarray(shifts[: rewards.shape[0]])[:, None]
    for function in (impl.group_mean_advantages, impl.rloo_advantages):
        np.testing.assert_allclose(
            function(shifted), function(rewards), rtol=1e-9, atol=1e-9 * (1 + np.abs(shifted).max()),
            err_msg=f"{function.__name__}: adding a constant to one group's rewards must not change its "
            "advantages: the baseline must be computed within each group (row), not across groups",
        )


@given(rewards=group_rewards(), index=st.integers(0, 5), new_reward=floats(-10, 10))
def test_rloo_baseline_of_sample_i_does_not_depend_on_its_own_reward(impl, rewards, index, new_reward):
    index = index % rewards.shape[1]
    changed = rewards.copy()
    changed[:, index] = new_reward
    baseline_before = rewards - impl.rloo_advantages(rewards)
    baseline_after = changed - impl.rloo_advantages(changed)
    np.testing.assert_allclose(
        baseline_after[:, index], baseline_before[:, index], rtol=1e-9, atol=1e-9,
        err_msg="RLOO's baseline for sample i changed when r_i changed: the sample is in its own baseline",
    )


@given(rewards=group_rewards())
def test_torch_in_torch_out_and_inputs_untouched(impl, rewards):
    original = rewards.copy()
    tensor = torch.tensor(rewards, requires_grad=True)
    for function in (impl.no_baseline_advantages, impl.group_mean_advantages, impl.rloo_advantages):
        result = function(tensor)
        assert isinstance(result, torch.Tensor), f"{function.__name__}: a tensor in must give a tensor out"
        np.testing.assert_allclose(result.detach().numpy(), function(rewards), **TIGHT)
    np.testing.assert_array_equal(rewards, original, err_msg="the rewards array was changed in place")


def test_rloo_worked_example(impl):
    np.testing.assert_allclose(impl.rloo_advantages(np.array([[1.0, 2.0, 6.0]])), [[-3.0, -1.5, 4.5]], **TIGHT)
    np.testing.assert_allclose(impl.group_mean_advantages(np.array([[1.0, 2.0, 6.0]])), [[-2.0, -1.0, 3.0]],
                               **TIGHT)


def test_bad_input_is_a_clear_error(impl):
    impl.rloo_advantages(np.zeros((2, 3)))  # valid input works first
    with pytest.raises(ValueError, match="G >= 2"):
        impl.rloo_advantages(np.zeros((4, 1)))
    for function in (impl.no_baseline_advantages, impl.group_mean_advantages, impl.rloo_advantages):
        with pytest.raises(ValueError, match="rewards"):
            function(np.zeros(6))  # one flat row is ambiguous: [groups, G] is required
        with pytest.raises(ValueError, match="rewards"):
            function(np.zeros((2, 3, 1)))
        with pytest.raises(ValueError, match="rewards"):
            function(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="group_size"):
        impl.simulate_group_baseline_bias(group_size=1, groups=10, seed=0)
    with pytest.raises(ValueError, match="groups"):
        impl.simulate_group_baseline_bias(group_size=4, groups=0, seed=0)


# ---- the simulation -------------------------------------------------------------------------------------------

SIMULATION_KEYS = {
    "true_gradient", "plain_mean", "plain_std", "same_group_mean", "same_group_std", "rloo_mean", "rloo_std",
    "predicted_scale", "observed_scale",
}
GROUPS = 40_000
# A fixed seed makes the check deterministic; 4 standard errors is the tolerance a correct estimator meets for all
# but 6e-5 of seeds, and it is far tighter than the gaps the mistakes open (a factor (G-1)/G = 0.75 at G = 4).
Z = 4.0


_SIMULATIONS: dict[tuple[str, int], dict[str, float]] = {}


def simulate(impl, group_size: int) -> dict[str, float]:
    """One simulation per implementation and group size, shared by the tests below (run inside a test, so a stub
    fails the test rather than erroring its set-up)."""
    key = (impl.package_name, group_size)
    if key not in _SIMULATIONS:
        _SIMULATIONS[key] = impl.simulate_group_baseline_bias(group_size=group_size, groups=GROUPS, seed=2026)
    return _SIMULATIONS[key]


def test_simulation_reports_every_number(impl):
    for result in (simulate(impl, group_size) for group_size in (2, 4, 8)):
        assert SIMULATION_KEYS <= set(result), f"missing keys: {sorted(SIMULATION_KEYS - set(result))}"
        assert all(isinstance(value, float) and math.isfinite(value) for value in result.values()), (
            "every value of the simulation must be a finite Python float"
        )


@pytest.mark.parametrize("group_size", [2, 4, 8])
def test_simulation_rloo_is_unbiased_and_same_group_is_scaled(impl, group_size):
    result = simulate(impl, group_size)
    standard_error = result["rloo_std"] / math.sqrt(GROUPS)
    assert abs(result["rloo_mean"] - result["true_gradient"]) < Z * standard_error, (
        f"RLOO's mean gradient {result['rloo_mean']:.4f} is not the true gradient {result['true_gradient']} "
        f"within {Z} standard errors ({standard_error:.4f}): RLOO must be unbiased"
    )
    expected = (group_size - 1) / group_size * result["true_gradient"]
    standard_error = result["same_group_std"] / math.sqrt(GROUPS)
    assert abs(result["same_group_mean"] - expected) < Z * standard_error, (
        f"same-group centring's mean gradient {result['same_group_mean']:.4f} is not (G-1)/G = {expected:.4f} "
        f"of the true gradient within {Z} standard errors"
    )
    standard_error = result["plain_std"] / math.sqrt(GROUPS)
    assert abs(result["plain_mean"] - result["true_gradient"]) < Z * standard_error, (
        "the estimate without a baseline is unbiased: its mean must match the true gradient"
    )
    assert result["predicted_scale"] == pytest.approx((group_size - 1) / group_size, rel=1e-12)
    assert result["observed_scale"] == pytest.approx(result["same_group_mean"] / result["true_gradient"],
                                                     rel=1e-12), (
        "observed_scale must be measured (same-group mean / true gradient), not copied from the prediction"
    )


@pytest.mark.parametrize("group_size", [2, 4, 8])
def test_simulation_no_baseline_has_the_largest_spread(impl, group_size):
    result = simulate(impl, group_size)
    assert result["plain_std"] > max(result["same_group_std"], result["rloo_std"]), (
        "with rewards far from zero, the estimate without a baseline must have the largest spread"
    )
    np.testing.assert_allclose(
        result["same_group_std"], (group_size - 1) / group_size * result["rloo_std"], rtol=1e-9,
        err_msg="per group, same-group centring is exactly (G-1)/G times RLOO, so their spreads differ by it too",
    )


def test_simulation_is_deterministic_for_a_seed(impl):
    first = impl.simulate_group_baseline_bias(group_size=4, groups=2_000, seed=7)
    assert first == impl.simulate_group_baseline_bias(group_size=4, groups=2_000, seed=7), (
        "the same seed must give the same numbers, bit for bit"
    )
    assert first != impl.simulate_group_baseline_bias(group_size=4, groups=2_000, seed=8), (
        "a different seed must draw different samples"
    )
