"""The gae tests: GAE with two masks.

The reference formula every property is checked against is the explicit O(T²) sum, written here without any
recursion: A_t = Σ_{k≥t} (γλ)^{k-t} · [no trace cut in t..k-1] · δ_k, with δ_k = r_k + γ·V'_k·(1 - term_k) - V_k.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, close, gradient
from kata.testing.strategies import floats, gae_batches

pytestmark = pytest.mark.gae


def td_residuals(rewards, values, next_values, terminated, gamma, **_):
    return rewards + gamma * next_values * (1.0 - terminated) - values


def explicit_gae(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    """GAE as the explicit sum of discounted residuals, one column at a time (no recursion)."""
    deltas = td_residuals(rewards, values, next_values, terminated, gamma)
    if deltas.ndim == 2:
        return np.stack([
            explicit_gae(rewards[:, n], values[:, n], next_values[:, n], terminated[:, n], trace_cuts[:, n],
                         gamma, gae_lambda)
            for n in range(deltas.shape[1])
        ], axis=1)
    steps = len(deltas)
    advantages = np.zeros(steps)
    for t in range(steps):
        weight = 1.0
        for k in range(t, steps):
            advantages[t] += weight * deltas[k]
            if trace_cuts[k]:
                break
            weight *= gamma * gae_lambda
    return advantages


def forward_gae(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    """The recursion walked forward in time: A_t = δ_t + γλ·(1 - cut_t)·A_{t-1} (time is axis 0)."""
    deltas = td_residuals(rewards, values, next_values, terminated, gamma)
    advantages, carried = np.empty_like(deltas), np.zeros_like(deltas[0])
    for t in range(len(deltas)):
        carried = deltas[t] + gamma * gae_lambda * (1.0 - trace_cuts[t]) * carried
        advantages[t] = carried
    return advantages


def gae_readings(batch: dict) -> dict[str, np.ndarray]:
    """The advantages each common misreading of GAE gives on ``batch``: named in a message only when they are the
    values found."""
    never = np.zeros_like(batch["terminated"])
    following = np.concatenate([batch["values"][1:], np.zeros_like(batch["values"][:1])])
    return {
        "GAE with a bootstrap at terminated records too": explicit_gae(**dict(batch, terminated=never)),
        "GAE with no bootstrap at any trace cut (a time limit or the buffer end treated as termination)":
            explicit_gae(**dict(batch, terminated=batch["trace_cuts"])),
        "GAE with the recursion stopped only where terminated (it runs across the other trace cuts)":
            explicit_gae(**dict(batch, trace_cuts=batch["terminated"])),
        "GAE with the recursion running across every trace cut": explicit_gae(**dict(batch, trace_cuts=never)),
        "GAE decayed by γ alone (λ not applied)": explicit_gae(**dict(batch, gae_lambda=1.0)),
        "GAE with V(s_t+1) taken from values[t + 1] instead of next_values[t]":
            explicit_gae(**dict(batch, next_values=following)),
        "the recursion walked forward in time, A_t = δ_t + γλ·A_{t-1}, where it runs backward from the end":
            forward_gae(**batch),
    }


def test_the_labs_example(impl):
    advantages = impl.gae_advantages(
        np.array([1.0, 100.0]), np.array([2.0, 0.0]), np.array([10.0, 0.0]),
        np.array([False, True]), np.array([True, True]), gamma=0.9, gae_lambda=1.0,
    )
    assert isinstance(advantages, np.ndarray), f"NumPy in must give NumPy out; got {type(advantages).__name__}"
    close(advantages, [8.0, 100.0],
          "the lab's two records: record 0 is cut by the rollout buffer, not terminated, so it bootstraps from "
          "next_values (1 + 0.9*10 - 2 = 8), and the cut keeps record 1's advantage out of it", readings={
              "1 - 2 at record 0: no bootstrap there (or V(s_1) read from values[1] = 0, not next_values[0] = 10)":
                  [-1.0, 100.0],
              "8 + 0.9*100 at record 0: record 1's advantage carried across the cut": [98.0, 100.0],
              "1 - 2 + 0.9*100 at record 0: no bootstrap, and record 1's advantage carried across the cut":
                  [89.0, 100.0],
          })


@given(batch=gae_batches())
def test_equals_the_explicit_sum_of_discounted_residuals(impl, batch):
    found, expected = impl.gae_advantages(**batch), explicit_gae(**batch)
    close(found, expected,
          "GAE is the sum of (γλ)^k-discounted TD residuals up to the first trace cut, δ_t bootstrapping from "
          "next_values[t] unless terminated[t]", readings=lambda: gae_readings(batch))


@given(batch=gae_batches())
def test_lambda_zero_gives_the_td_residual(impl, batch):
    batch["gae_lambda"] = 0.0
    close(impl.gae_advantages(**batch), td_residuals(**batch),
          "with λ = 0 the advantage is the one-step TD residual r + γ·V(next)·(1 - terminated) - V")


def uncut_readings(deltas, gamma, gae_lambda):
    """What an uncut record's advantages are under a common misreading of the recursion."""
    def decayed(decay):
        return np.stack([sum(decay ** (k - t) * deltas[k] for k in range(t, len(deltas))) for t in range(len(deltas))])

    forward, carried = np.empty_like(deltas), np.zeros_like(deltas[0])
    for t in range(len(deltas)):
        carried = deltas[t] + gamma * gae_lambda * carried
        forward[t] = carried
    return {"the sum decayed by γ alone (λ not applied)": decayed(gamma),
            "the sum decayed by λ alone (γ not applied)": decayed(gae_lambda),
            "the recursion run forward in time, A_t = δ_t + γλ·A_{t-1}, where it runs backward from the end": forward}


@given(batch=gae_batches(), gamma=st.floats(0.0, 1.0), gae_lambda=st.floats(0.0, 1.0))
def test_without_cuts_it_equals_the_uncut_sum(impl, batch, gamma, gae_lambda):
    batch.update(gamma=gamma, gae_lambda=gae_lambda)
    batch["terminated"] = np.zeros_like(batch["terminated"])
    batch["trace_cuts"] = np.zeros_like(batch["trace_cuts"])
    deltas = td_residuals(**batch)
    steps = deltas.shape[0]
    expected = np.stack([
        sum((gamma * gae_lambda) ** (k - t) * deltas[k] for k in range(t, steps)) for t in range(steps)
    ])
    found = impl.gae_advantages(**batch)
    close(found, expected, "with no cuts, A_t = Σ_k (γλ)^(k-t) δ_k over the rest of the record",
          readings=lambda: uncut_readings(deltas, gamma, gae_lambda))


@given(batch=gae_batches(min_steps=2), cut=st.integers(0, 100), noise=floats(-50, 50))
def test_values_after_a_cut_never_change_advantages_before_it(impl, batch, cut, noise):
    cut = cut % (batch["rewards"].shape[0] - 1)  # a cut with at least one record after it
    batch["trace_cuts"] = batch["trace_cuts"].copy()
    batch["trace_cuts"][cut] = True
    before = impl.gae_advantages(**batch)

    def changed_after_the_cut(*keys):
        changed = {key: value.copy() if isinstance(value, np.ndarray) else value for key, value in batch.items()}
        for key in keys:
            changed[key][cut + 1:] += noise
        return impl.gae_advantages(**changed)

    # Rewards after the cut reach a record before it only through a recursion (or a sum) that runs past the cut.
    close(changed_after_the_cut("rewards")[: cut + 1], before[: cut + 1],
          f"advantages up to the trace cut at t={cut} changed when only the rewards after it changed: the "
          "recursion continues past the cut; every trace cut must stop it, not only terminated")
    close(changed_after_the_cut("rewards", "values", "next_values")[: cut + 1], before[: cut + 1],
          f"advantages up to the trace cut at t={cut} changed when values and next_values after it changed (the "
          f"rewards after it alone change nothing): a record reads V(s_t+1) from next_values[t] only, never from "
          f"a later record; for example, values[t + 1] at the cut is values[{cut + 1}], the next episode's")


@given(batch=gae_batches(), record=st.integers(0, 100), noise=floats(1.0, 50))
def test_next_values_at_terminated_records_never_matter(impl, batch, record, noise):
    flat = record % batch["rewards"].size  # make sure at least one record terminates
    terminated, trace_cuts = batch["terminated"].copy(), batch["trace_cuts"].copy()
    terminated.flat[flat], trace_cuts.flat[flat] = True, True
    batch.update(terminated=terminated, trace_cuts=trace_cuts)
    changed = dict(batch, next_values=np.where(batch["terminated"], batch["next_values"] + noise,
                                               batch["next_values"]))
    close(impl.gae_advantages(**changed), impl.gae_advantages(**batch),
          "changing next_values only at terminated records changed the advantages: a terminal state has no "
          "future value, so a terminated record must not bootstrap (δ_t = r_t - V(s_t) there)")


@given(batch=gae_batches(), record=st.integers(0, 100), gamma=st.floats(0.1, 1.0), noise=floats(1.0, 50))
def test_a_truncated_record_bootstraps_from_next_values(impl, batch, record, gamma, noise):
    flat = record % batch["rewards"].size  # make sure at least one record is cut without terminating
    terminated, trace_cuts = batch["terminated"].copy(), batch["trace_cuts"].copy()
    terminated.flat[flat], trace_cuts.flat[flat] = False, True
    batch.update(terminated=terminated, trace_cuts=trace_cuts, gamma=gamma)
    truncated = trace_cuts & ~terminated
    changed = dict(batch, next_values=np.where(truncated, batch["next_values"] + noise, batch["next_values"]))
    difference = impl.gae_advantages(**changed) - impl.gae_advantages(**batch)
    close(difference[truncated], np.full(truncated.sum(), batch["gamma"] * noise),
          "a record cut by a time limit or the buffer end (trace_cuts, not terminated) must bootstrap: its "
          "advantage must move by γ·Δ when V(next state) moves by Δ")


@given(batch=gae_batches(time_major=True))
def test_time_major_batches_equal_their_columns(impl, batch):
    together = impl.gae_advantages(**batch)
    assert together.shape == batch["rewards"].shape, (
        f"a [T, N] batch gives [T, N] advantages: {batch['rewards'].shape} in, {together.shape} out")
    for n in range(batch["rewards"].shape[1]):
        column = {key: value[:, n] if isinstance(value, np.ndarray) else value for key, value in batch.items()}
        close(together[:, n], impl.gae_advantages(**column),
              f"column {n} of a time-major [T, N] batch differs from the same records passed alone as [T]: each "
              "column is its own environment, and time is axis 0")


@given(batch=gae_batches())
def test_torch_in_torch_out_with_gradients_and_inputs_untouched(impl, batch):
    originals = {key: value.copy() for key, value in batch.items() if isinstance(value, np.ndarray)}
    values = torch.tensor(batch["values"], requires_grad=True)
    tensors = dict(batch, rewards=torch.tensor(batch["rewards"]), values=values,
                   next_values=torch.tensor(batch["next_values"]),
                   terminated=torch.tensor(batch["terminated"]), trace_cuts=torch.tensor(batch["trace_cuts"]))
    advantages = impl.gae_advantages(**tensors)
    assert isinstance(advantages, torch.Tensor), f"a tensor in must give a tensor out; got {type(advantages).__name__}"
    close(advantages.detach().numpy(), impl.gae_advantages(**batch), "tensor and NumPy inputs must agree")
    assert_differentiable(advantages, "the advantages of tensor input", "values")
    advantages.sum().backward()
    gradient(values, "values")  # a readable failure when no gradient reached values
    for key, value in originals.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")


def test_integer_and_float_masks_are_accepted(impl):
    base = dict(rewards=np.ones(3), values=np.zeros(3), next_values=np.ones(3), gamma=0.5, gae_lambda=0.5)
    expected = impl.gae_advantages(**base, terminated=np.array([False, False, True]),
                                   trace_cuts=np.array([False, True, True]))
    close(impl.gae_advantages(**base, terminated=np.array([0, 0, 1]), trace_cuts=np.array([0.0, 1.0, 1.0])),
          expected, "0/1 integer or float masks mean the same as booleans")


def test_bad_input_is_a_clear_error(impl):
    good = dict(rewards=np.ones(3), values=np.zeros(3), next_values=np.ones(3),
                terminated=np.array([False, False, True]), trace_cuts=np.array([False, True, True]),
                gamma=0.99, gae_lambda=0.95)
    impl.gae_advantages(**good)  # valid input works first
    cases = [
        (dict(values=np.zeros(4)), "values"),
        (dict(next_values=np.zeros((3, 1))), "next_values"),
        (dict(terminated=np.array([False, True])), "terminated"),
        (dict(trace_cuts=np.array([0, 2, 1])), "trace_cuts"),
        (dict(terminated=np.array([0.5, 0.0, 1.0])), "terminated"),
        (dict(terminated=np.array([False, True, True]), trace_cuts=np.array([False, False, True])), "trace_cuts"),
        (dict(gamma=1.5), "gamma"),
        (dict(gamma=-0.1), "gamma"),
        (dict(gae_lambda=1.01), "gae_lambda"),
        (dict(gae_lambda=float("nan")), "gae_lambda"),
        (dict(rewards=np.ones((3, 2, 1)), values=np.zeros((3, 2, 1)), next_values=np.ones((3, 2, 1)),
              terminated=np.zeros((3, 2, 1), bool), trace_cuts=np.zeros((3, 2, 1), bool)), "rewards"),
    ]
    for change, argument in cases:
        with pytest.raises(ValueError, match=argument):
            impl.gae_advantages(**{**good, **change})
