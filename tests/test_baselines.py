"""The baselines tests: no baseline, the same-group mean, RLOO, and the simulation."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import plain
from kata.testing.strategies import floats, group_rewards

pytestmark = pytest.mark.baselines

TIGHT = dict(rtol=1e-10, atol=1e-10)


def rloo_by_loop(rewards: np.ndarray) -> np.ndarray:
    """r_i minus the mean of the other G - 1 rewards of its row, one sample at a time."""
    groups, size = rewards.shape
    expected = np.empty_like(rewards)
    for g in range(groups):
        for i in range(size):
            expected[g, i] = rewards[g, i] - np.delete(rewards[g], i).mean()
    return expected


def rloo_misreadings(rewards: np.ndarray) -> dict[str, np.ndarray]:
    """The advantages a common misunderstanding of RLOO gives on ``rewards`` [groups, G]."""
    size = rewards.shape[1]
    readings = {
        "the rewards themselves: no baseline is subtracted": rewards,
        "the mean of all G rewards, r_i included, as the baseline (that is same-group centring)":
            rewards - rewards.mean(axis=1, keepdims=True),
        "the other rewards' sum divided by G instead of G - 1":
            rewards - (rewards.sum(axis=1, keepdims=True) - rewards) / size,
    }
    if rewards.shape[0] > 1:
        readings["groups taken down the columns (axis 0) instead of along each row"] = (
            rewards - (rewards.sum(axis=0, keepdims=True) - rewards) / (rewards.shape[0] - 1))
    return readings


def centring_misreadings(rewards: np.ndarray) -> dict[str, np.ndarray]:
    """The advantages a common misunderstanding of same-group centring gives on ``rewards`` [groups, G]."""
    readings = {"the rewards themselves: no baseline is subtracted": rewards}
    if rewards.shape[0] > 1:
        readings["each column's mean subtracted (groups taken down axis 0) instead of each row's"] = (
            rewards - rewards.mean(axis=0, keepdims=True))
    return readings


def named_misreading(actual, expected: np.ndarray, readings: dict[str, np.ndarray]) -> str:
    """``"; it equals <reading>"`` for each reading ``actual`` matches and ``expected`` does not, else ""."""
    actual = np.asarray(actual, dtype=np.float64)
    matches = [name for name, value in readings.items()
               if value.shape == actual.shape and np.allclose(actual, value, **TIGHT)
               and not np.allclose(expected, value, **TIGHT)]
    return ("; the advantages equal " + " and ".join(matches)) if matches else ""


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
    assert advantages.shape == rewards.shape, (
        f"RLOO keeps the [groups, G] shape {rewards.shape}; got {np.shape(advantages)}"
    )
    scale = 1.0 + np.abs(rewards).max()
    sums = advantages.sum(axis=1)
    if not np.allclose(sums, 0.0, rtol=0, atol=1e-10 * scale):
        g = int(np.flatnonzero(~np.isclose(sums, 0.0, rtol=0, atol=1e-10 * scale))[0])
        raise AssertionError(
            f"group (row) {g}: rewards {plain(rewards[g])} give RLOO advantages {plain(advantages[g])}, which sum to "
            f"{plain(sums[g])}, not 0: A_i = r_i - (sum of the row's other G - 1 rewards) / (G - 1), and these "
            f"cancel over a row; expected {plain(rloo_by_loop(rewards)[g])}"
            + named_misreading(advantages, rloo_by_loop(rewards), rloo_misreadings(rewards))
        )


@given(rewards=group_rewards(min_group_size=1))
def test_same_group_centring_sums_to_zero_in_every_group(impl, rewards):
    advantages = impl.group_mean_advantages(rewards)
    assert advantages.shape == rewards.shape, (
        f"same-group centring keeps the [groups, G] shape {rewards.shape}; got {np.shape(advantages)}"
    )
    sums = advantages.sum(axis=1)
    if not np.allclose(sums, 0.0, rtol=0, atol=1e-10 * (1.0 + np.abs(rewards).max())):
        g = int(np.argmax(np.abs(sums)))
        expected = rewards - rewards.mean(axis=1, keepdims=True)
        raise AssertionError(
            f"group (row) {g}: rewards {plain(rewards[g])} give centred advantages {plain(advantages[g])}, which sum "
            f"to {plain(sums[g])}, not 0: same-group centring subtracts each row's own mean; expected "
            f"{plain(expected[g])}" + named_misreading(advantages, expected, centring_misreadings(rewards))
        )


@given(rewards=group_rewards())
def test_same_group_centring_is_rloo_scaled_by_g_minus_one_over_g(impl, rewards):
    group_size = rewards.shape[1]
    centred, rloo = impl.group_mean_advantages(rewards), impl.rloo_advantages(rewards)
    scale = (group_size - 1) / group_size
    if np.allclose(centred, scale * rloo, **TIGHT):
        return
    expected_rloo = rloo_by_loop(rewards)
    expected_centred = rewards - rewards.mean(axis=1, keepdims=True)
    wrong = []
    if not np.allclose(rloo, expected_rloo, **TIGHT):
        wrong.append(f"rloo_advantages gives {plain(rloo)} where r_i minus the mean of the OTHER G - 1 rewards is "
                     f"{plain(expected_rloo)}" + named_misreading(rloo, expected_rloo, rloo_misreadings(rewards)))
    if not np.allclose(centred, expected_centred, **TIGHT):
        wrong.append(f"group_mean_advantages gives {plain(centred)} where r_i minus its row's mean is "
                     f"{plain(expected_centred)}")
    raise AssertionError(
        f"same-group centring must equal (G-1)/G = {group_size - 1}/{group_size} times RLOO exactly, for rewards "
        f"{plain(rewards)}: " + ("; ".join(wrong) if wrong else
                                 f"group_mean_advantages {plain(centred)}, (G-1)/G * rloo_advantages "
                                 f"{plain(scale * rloo)}")
    )


@given(rewards=group_rewards(), shifts=st.lists(floats(-50, 50), min_size=5, max_size=5))
def test_a_constant_added_to_a_group_changes_nothing(impl, rewards, shifts):
    constants = np.asarray(shifts[: rewards.shape[0]])
    shifted = rewards + constants[:, None]
    for function, expected, readings in (
        (impl.group_mean_advantages, rewards - rewards.mean(axis=1, keepdims=True), centring_misreadings(rewards)),
        (impl.rloo_advantages, rloo_by_loop(rewards), rloo_misreadings(rewards)),
    ):
        before, after = np.asarray(function(rewards)), np.asarray(function(shifted))
        if np.allclose(after, before, rtol=1e-9, atol=1e-9 * (1 + np.abs(shifted).max())):
            continue
        g = int(np.flatnonzero(~np.isclose(after, before, rtol=1e-9, atol=1e-9 * (1 + np.abs(shifted).max()))
                               .reshape(len(before), -1).any(axis=1))[0]) if before.shape == after.shape else 0
        raise AssertionError(
            f"{function.__name__}: adding the constants {plain(constants)} to the rows of rewards {plain(rewards)} "
            f"changed row {g}'s advantages from {plain(before[g])} to {plain(after[g])}: a baseline taken within "
            "each row moves with the row's rewards, so the advantages stay the same"
            + named_misreading(before, expected, readings)
        )


@given(rewards=group_rewards(), index=st.integers(0, 5), new_reward=floats(-10, 10))
def test_rloo_baseline_of_sample_i_does_not_depend_on_its_own_reward(impl, rewards, index, new_reward):
    index = index % rewards.shape[1]
    changed = rewards.copy()
    changed[:, index] = new_reward
    baseline_before = rewards - impl.rloo_advantages(rewards)
    baseline_after = changed - impl.rloo_advantages(changed)
    same = np.isclose(baseline_after[:, index], baseline_before[:, index], rtol=1e-9, atol=1e-9)
    if same.all():
        return
    g = int(np.flatnonzero(~same)[0])
    # Column `index` changed in every row: changing r_i alone says whether the baseline depends on r_i itself.
    alone = rewards.copy()
    alone[g, index] = new_reward
    own = not np.isclose((alone - impl.rloo_advantages(alone))[g, index], baseline_before[g, index], rtol=1e-9,
                         atol=1e-9)
    why = ("it changes when r_i alone changes: the sample is in its own baseline" if own else
           "it does not change when r_i alone changes, so it depends on the other rows' rewards in column "
           f"{index}: groups are rows")
    raise AssertionError(
        f"RLOO's baseline r_i - A_i for sample {index} of row {g} (rewards {plain(rewards[g])}) moved from "
        f"{plain(baseline_before[g, index])} to {plain(baseline_after[g, index])} when column {index} was set to "
        f"{plain(new_reward)} in every row: the mean of the other G - 1 rewards of its row must not depend on "
        f"r_i; {why}"
    )


@given(rewards=group_rewards())
def test_torch_in_torch_out_and_inputs_untouched(impl, rewards):
    original = rewards.copy()
    tensor = torch.tensor(rewards, requires_grad=True)
    for function in (impl.no_baseline_advantages, impl.group_mean_advantages, impl.rloo_advantages):
        result = function(tensor)
        assert isinstance(result, torch.Tensor), f"{function.__name__}: a tensor in must give a tensor out"
        np.testing.assert_allclose(result.detach().numpy(), function(rewards), **TIGHT,
                                   err_msg=f"{function.__name__}: a tensor and the same NumPy rewards must give "
                                   "the same advantages")
    np.testing.assert_array_equal(rewards, original, err_msg="the rewards array was changed in place")


def test_rloo_worked_example(impl):
    rewards = np.array([[1.0, 2.0, 6.0]])
    rloo = impl.rloo_advantages(rewards)
    if not np.allclose(rloo, [[-3.0, -1.5, 4.5]], **TIGHT):
        raise AssertionError(
            f"RLOO of the rewards [1, 2, 6] is {plain(rloo)}, expected [-3, -1.5, 4.5]: each reward minus the mean "
            "of the other two, 1 - (2 + 6) / 2 = -3, 2 - (1 + 6) / 2 = -1.5, 6 - (1 + 2) / 2 = 4.5"
            + named_misreading(rloo, np.array([[-3.0, -1.5, 4.5]]), rloo_misreadings(rewards))
        )
    centred = impl.group_mean_advantages(rewards)
    assert np.allclose(centred, [[-2.0, -1.0, 3.0]], **TIGHT), (
        f"same-group centring of [1, 2, 6] is {plain(centred)}, expected each reward minus the group's mean 3: "
        "[-2, -1, 3]"
    )


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
    # $KATA_MUTATION (set by python -m kata.catalogue.mutation): every test runs the simulation of the code under test,
    # so that a mutation tool sees each test call it and never reads a result cached before the code was changed.
    if key not in _SIMULATIONS or os.environ.get("KATA_MUTATION"):
        _SIMULATIONS[key] = impl.simulate_group_baseline_bias(group_size=group_size, groups=GROUPS, seed=2026)
    return _SIMULATIONS[key]


def test_simulation_reports_every_number(impl):
    for result in (simulate(impl, group_size) for group_size in (2, 4, 8)):
        assert SIMULATION_KEYS <= set(result), f"missing keys: {sorted(SIMULATION_KEYS - set(result))}"
        wrong = {key: value for key, value in result.items() if not (isinstance(value, float)
                                                                      and math.isfinite(value))}
        assert not wrong, (
            "every value of the simulation must be a finite Python float; these are not: "
            + ", ".join(f"{key} = {value!r} ({type(value).__name__})" for key, value in wrong.items())
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
        f"the mean gradient without a baseline {result['plain_mean']:.4f} is not the true gradient "
        f"{result['true_gradient']} within {Z} standard errors ({standard_error:.4f}): it must be unbiased"
    )
    assert result["predicted_scale"] == pytest.approx((group_size - 1) / group_size, rel=1e-12), (
        f"predicted_scale is {plain(result['predicted_scale'])}, expected (G-1)/G = {group_size - 1}/{group_size}: "
        "same-group centring is RLOO scaled by (G-1)/G, so its expected gradient is that fraction of the true one"
    )
    measured = result["same_group_mean"] / result["true_gradient"]
    copied = ("; it equals predicted_scale: the prediction copied instead of the measurement"
              if result["observed_scale"] == pytest.approx(result["predicted_scale"], rel=1e-12) else "")
    assert result["observed_scale"] == pytest.approx(measured, rel=1e-12), (
        f"observed_scale is {plain(result['observed_scale'])}, expected the measured same_group_mean / "
        f"true_gradient = {plain(measured)}{copied}"
    )


@pytest.mark.parametrize("group_size", [2, 4, 8])
def test_simulation_no_baseline_has_the_largest_spread(impl, group_size):
    result = simulate(impl, group_size)
    assert result["plain_std"] > max(result["same_group_std"], result["rloo_std"]), (
        f"with rewards far from zero, the estimate without a baseline must have the largest spread: plain_std "
        f"{result['plain_std']:.4g}, same_group_std {result['same_group_std']:.4g}, rloo_std "
        f"{result['rloo_std']:.4g}"
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
