"""The gae tests: GAE with two masks.

The reference formula every property is checked against is the explicit O(T²) sum, written here without any
recursion: A_t = Σ_{k≥t} (γλ)^{k-t} · [no trace cut in t..k-1] · δ_k, with δ_k = r_k + γ·V'_k·(1 - term_k) - V_k.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, close, confirmed_readings, gradient, mistake, plain, word
from kata.lab.plan import GAE_EXPECTED, gae_example_arrays
from kata.testing.strategies import floats, typed_batches
from kata.testing.strategies.gae import GAE_MASKS, GAE_VALUE_ARRAYS, gae_batches, ignored_values
from kata.testing.battery import battery_tests
from kata.testing.strategies.gae import CONTRACTS

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


# Walking forward is no catalogued mistake (no mistakes/gae/ file computes it), so it keeps its own words.
FORWARD = "the recursion walked forward in time, A_t = δ_t + γλ·A_{t-1}, where it runs backward from the end"


def gae_readings(batch: dict) -> dict[str, np.ndarray]:
    """The advantages each common misreading of GAE gives on ``batch``: named in a message only when they are the
    values found."""
    never = np.zeros_like(batch["terminated"])
    following = np.concatenate([batch["values"][1:], np.zeros_like(batch["values"][:1])])
    return {
        mistake("gae/bootstraps_from_terminal"): explicit_gae(**dict(batch, terminated=never)),
        mistake("gae/truncation_as_termination"): explicit_gae(**dict(batch, terminated=batch["trace_cuts"])),
        mistake("gae/recursion_cut_by_terminated_only"): explicit_gae(**dict(batch, trace_cuts=batch["terminated"])),
        mistake("gae/recursion_leaks_across_cuts"): explicit_gae(**dict(batch, trace_cuts=never)),
        mistake("gae/lambda_not_applied"): explicit_gae(**dict(batch, gae_lambda=1.0)),
        mistake("gae/next_values_from_values_shift"): explicit_gae(**dict(batch, next_values=following)),
        FORWARD: forward_gae(**batch),
    }


def witness_batches() -> list[dict]:
    """Rollouts on which every reading above gives its own value: terminated records, records cut without
    terminating, records carried on, next_values unlike the following values, 0 < γ, λ < 1; [T] and [T, N]."""
    random = np.random.default_rng(7)
    witnesses = []
    for shape in ((7,), (6, 2)):
        terminated = np.zeros(shape, bool)
        trace_cuts = np.zeros(shape, bool)
        terminated[2], trace_cuts[2], trace_cuts[4] = True, True, True
        witnesses.append(dict(rewards=random.uniform(-1.0, 1.0, shape), values=random.uniform(-5.0, 5.0, shape),
                              next_values=random.uniform(-5.0, 5.0, shape), terminated=terminated,
                              trace_cuts=trace_cuts, gamma=0.9, gae_lambda=0.7))
    return witnesses


WITNESSES = witness_batches()


def close_to_gae(impl, found, batch: dict, expected, message: str) -> None:
    """``found``, ``impl``'s advantages on ``batch``, equal ``expected``; a failure names each reading of
    :func:`gae_readings` that ``impl`` also gives on every witness."""
    close(found, expected, message,
          readings=lambda: confirmed_readings(impl.gae_advantages, gae_readings, batch, WITNESSES))


def test_the_labs_example(impl):
    example = gae_example_arrays()
    advantages = impl.gae_advantages(**example)
    assert isinstance(advantages, np.ndarray), f"NumPy in must give NumPy out; got {type(advantages).__name__}"
    close_to_gae(impl, advantages, example, GAE_EXPECTED,
                 "the lab's two records (the docstring's example): record 0 is cut by the rollout buffer, not "
                 "terminated, so it bootstraps from next_values, and the cut keeps record 1's advantage out of it")


@given(batch=gae_batches())
def test_equals_the_explicit_sum_of_discounted_residuals(impl, batch):
    close_to_gae(impl, impl.gae_advantages(**batch), batch, explicit_gae(**batch),
                 "GAE is the sum of (γλ)^k-discounted TD residuals up to the first trace cut, δ_t bootstrapping from "
                 "next_values[t] unless terminated[t]")


@given(batch=gae_batches())
def test_lambda_zero_gives_the_td_residual(impl, batch):
    batch["gae_lambda"] = 0.0
    close(impl.gae_advantages(**batch), td_residuals(**batch),
          "with λ = 0 the advantage is the one-step TD residual r + γ·V(next)·(1 - terminated) - V")


def uncut_readings(batch: dict) -> dict[str, np.ndarray]:
    """What an uncut record's advantages are under a common misreading of the recursion."""
    deltas, gamma, gae_lambda = td_residuals(**batch), batch["gamma"], batch["gae_lambda"]

    def decayed(decay):
        return np.stack([sum(decay ** (k - t) * deltas[k] for k in range(t, len(deltas))) for t in range(len(deltas))])

    forward, carried = np.empty_like(deltas), np.zeros_like(deltas[0])
    for t in range(len(deltas)):
        carried = deltas[t] + gamma * gae_lambda * carried
        forward[t] = carried
    return {mistake("gae/lambda_not_applied"): decayed(gamma),
            "the sum decayed by λ alone (γ not applied)": decayed(gae_lambda),  # no catalogued mistake
            FORWARD: forward}


UNCUT_WITNESSES = [dict(witness, terminated=np.zeros_like(witness["terminated"]),
                        trace_cuts=np.zeros_like(witness["trace_cuts"])) for witness in WITNESSES]


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
          readings=lambda: confirmed_readings(impl.gae_advantages, uncut_readings, batch, UNCUT_WITNESSES))


@given(batch=gae_batches())
def test_lambda_one_gives_the_discounted_return_minus_the_value(impl, batch):
    # Within a trace V(s_{t+1}) is the next record's value; next_values holds it, as a rollout records it.
    rewards, cuts, last = batch["rewards"], batch["trace_cuts"], len(batch["rewards"]) - 1
    following_values = np.concatenate([batch["values"][1:], batch["next_values"][-1:]])
    batch.update(gae_lambda=1.0, next_values=np.where(cuts, batch["next_values"], following_values))
    bootstrap = batch["gamma"] * batch["next_values"] * (1.0 - batch["terminated"])
    returns, following = np.empty_like(rewards), np.zeros_like(rewards[0])
    for t in range(last, -1, -1):  # rewards to the trace's end (a cut or the last record), then V(next) there
        following = rewards[t] + np.where(cuts[t] | (t == last), bootstrap[t], batch["gamma"] * following)
        returns[t] = following
    close(impl.gae_advantages(**batch), returns - batch["values"],
          "with λ = 1 the advantage is the bootstrapped discounted return minus V: the rewards discounted up to the "
          "trace's end, plus γ·V(next state) there unless terminated, minus V(s_t)")


@given(batch=gae_batches(min_steps=2), cut=st.integers(0, 100), noise=floats(-50, 50), data=st.data())
def test_values_after_a_cut_never_change_advantages_before_it(impl, batch, cut, noise, data):
    cut = cut % (batch["rewards"].shape[0] - 1)  # a cut with at least one record after it
    batch["trace_cuts"] = batch["trace_cuts"].copy()
    batch["trace_cuts"][cut] = True
    before = impl.gae_advantages(**batch)

    def changed_after_the_cut(*keys, extreme=False):
        changed = {key: value.copy() if isinstance(value, np.ndarray) else value for key, value in batch.items()}
        for key in keys:
            tail = changed[key][cut + 1:]
            changed[key][cut + 1:] = data.draw(ignored_values(tail.shape)) if extreme else tail + noise
        return impl.gae_advantages(**changed)

    # Rewards after the cut reach a record before it only through a recursion (or a sum) that runs past the cut.
    close(changed_after_the_cut("rewards")[: cut + 1], before[: cut + 1],
          f"advantages up to the trace cut at t={cut} changed when only the rewards after it changed: the "
          "recursion continues past the cut; every trace cut must stop it, not only terminated")
    close(changed_after_the_cut("rewards", "values", "next_values")[: cut + 1], before[: cut + 1],
          f"advantages up to the trace cut at t={cut} changed when values and next_values after it changed (the "
          f"rewards after it alone change nothing): a record reads V(s_t+1) from next_values[t] only, never from "
          f"a later record; for example, values[t + 1] at the cut is values[{cut + 1}], the next episode's")
    extreme = changed_after_the_cut(*GAE_VALUE_ARRAYS, extreme=True)[: cut + 1]
    close(extreme, before[: cut + 1],
          f"advantages up to the trace cut at t={cut} changed when the records after it held NaN, ±inf or "
          "huge values (the same finite changes alone change nothing): nothing after a cut may reach the records "
          "before it, whatever it holds; at a cut A_t = δ_t, selected (e.g. with torch.where), not γλ·0·A_{t+1}, "
          "since 0 · inf and 0 · NaN are NaN" if not np.isfinite(extreme).all() else
          f"advantages up to the trace cut at t={cut} changed when the records after it held NaN, ±inf or huge "
          "values: nothing after a cut may reach the records before it")


@given(batch=gae_batches(), record=st.integers(0, 100), noise=floats(1.0, 50), data=st.data())
def test_next_values_at_terminated_records_never_matter(impl, batch, record, noise, data):
    flat = record % batch["rewards"].size  # make sure at least one record terminates
    terminated, trace_cuts = batch["terminated"].copy(), batch["trace_cuts"].copy()
    terminated.flat[flat], trace_cuts.flat[flat] = True, True
    batch.update(terminated=terminated, trace_cuts=trace_cuts)
    before = impl.gae_advantages(**batch)
    changed = dict(batch, next_values=np.where(batch["terminated"], batch["next_values"] + noise,
                                               batch["next_values"]))
    close(impl.gae_advantages(**changed), before,
          "changing next_values only at terminated records changed the advantages: a terminal state has no "
          "future value, so a terminated record must not bootstrap (δ_t = r_t - V(s_t) there)")
    extremes = data.draw(ignored_values(terminated.shape))
    changed = dict(batch, next_values=np.where(batch["terminated"], extremes, batch["next_values"]))
    found = impl.gae_advantages(**changed)
    close(found, before,
          "next_values at terminated records held NaN, ±inf or huge values and the advantages changed (finite "
          "changes there alone change nothing): next_values is ignored where terminated, whatever it holds; "
          "select the bootstrap (e.g. with torch.where) rather than multiplying by (1 - terminated), since "
          "0 · inf and 0 · NaN are NaN" if not np.isfinite(found).all() else
          "next_values at terminated records held NaN, ±inf or huge values and the advantages changed: "
          "next_values is ignored where terminated, whatever it holds")


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


def jacobian(batch: dict) -> np.ndarray:
    """∂A/∂rewards of the explicit sum, [size, size] over the flattened records (A is linear in the rewards)."""
    size = batch["rewards"].size
    zeros = np.zeros_like(batch["rewards"], dtype=np.float64)
    columns = []
    for j in range(size):
        unit = zeros.copy()
        unit.flat[j] = 1.0
        columns.append(explicit_gae(**dict(batch, rewards=unit, values=zeros, next_values=zeros)).reshape(-1))
    return np.stack(columns, axis=1)


def numpy_dtype(value) -> np.dtype:
    return torch.empty((), dtype=value.dtype).numpy().dtype if isinstance(value, torch.Tensor) else value.dtype


def as_float64(value) -> np.ndarray:
    return value.detach().numpy().astype(np.float64) if isinstance(value, torch.Tensor) else value.astype(np.float64)


@given(batch=typed_batches(gae_batches(), GAE_VALUE_ARRAYS, masks=GAE_MASKS))
def test_promoted_dtype_container_and_gradients_for_every_argument(impl, batch):
    """Returns: the promoted dtype of the three value arrays; a tensor if any of the five arrays is a tensor, with
    autograd into each value array; inputs unchanged."""
    arrays = [key for key, value in batch.items() if isinstance(value, np.ndarray | torch.Tensor)]
    dtypes = [numpy_dtype(batch[key]) for key in GAE_VALUE_ARRAYS]
    promoted = np.result_type(*dtypes)
    tensors = [key for key in arrays if isinstance(batch[key], torch.Tensor)]
    for key in tensors:
        if key in GAE_VALUE_ARRAYS:
            batch[key].requires_grad_(True)
    originals = {key: as_float64(batch[key]).copy() for key in arrays}
    found = impl.gae_advantages(**batch)
    kinds = ", ".join(f"{key} {'tensor' if key in tensors else 'NumPy'} {dtype}" for key, dtype in
                      zip(GAE_VALUE_ARRAYS, dtypes))
    if tensors:
        assert isinstance(found, torch.Tensor), (
            f"{', '.join(tensors)} went in as tensors and {type(found).__name__} came out: the advantages are a "
            "tensor if any of the five arrays is one (NumPy only when every argument is NumPy)")
    else:
        assert isinstance(found, np.ndarray), f"NumPy in must give NumPy out; got {type(found).__name__}"
    dtype = numpy_dtype(found)
    assert dtype == promoted, (
        f"{kinds}: the advantages came back in {dtype}; the contract asks for the promoted floating dtype of the "
        f"three value arrays, {promoted}")
    plain64 = {key: (as_float64(value) if key in GAE_VALUE_ARRAYS else as_float64(value) != 0)
               if key in arrays else value for key, value in batch.items()}
    expected = explicit_gae(**plain64)
    tolerance = 1e-9 if promoted == np.float64 else 2e-5
    close(as_float64(found), expected, f"{kinds}: the advantages must equal the explicit sum of discounted residuals "
          "in the promoted dtype", rtol=tolerance)
    required = [key for key in tensors if key in GAE_VALUE_ARRAYS]
    if required:
        assert_differentiable(found, "the advantages of tensor input", " and ".join(required))
        weights = 1.0 + np.arange(found.numel(), dtype=np.float64).reshape(found.shape) / found.numel()
        (found * torch.as_tensor(weights, dtype=found.dtype)).sum().backward()
        through = jacobian(plain64).T @ weights.reshape(-1)
        bootstrap = plain64["gamma"] * (1.0 - plain64["terminated"].reshape(-1))
        for key, sign in (("rewards", 1.0), ("values", -1.0), ("next_values", bootstrap)):
            if key in required:  # a gradient comes back in its input's dtype
                close(gradient(batch[key], key).astype(np.float64).reshape(-1), sign * through,
                      f"∂(Σ_t w_t·A_t)/∂{key} must follow from A = Σ (γλ)^k δ with δ_t = r_t + "
                      f"γ·V'_t·(1 - terminated_t) - V_t: autograd must reach {key}, scaled as δ uses it",
                      rtol=1e-9 if numpy_dtype(batch[key]) == np.float64 else 2e-5)
    for key in arrays:
        assert np.array_equal(as_float64(batch[key]), originals[key], equal_nan=True), (
            f"{key} was changed in place: gae_advantages never changes its inputs (build new arrays)")


def test_any_one_tensor_argument_gives_a_tensor(impl):
    base = dict(rewards=np.ones(3), values=np.zeros(3), next_values=np.ones(3),
                terminated=np.array([False, False, True]), trace_cuts=np.array([False, True, True]),
                gamma=0.5, gae_lambda=0.5)
    for key in ("rewards", "values", "next_values", "terminated", "trace_cuts"):
        found = impl.gae_advantages(**dict(base, **{key: torch.from_numpy(base[key].copy())}))
        assert isinstance(found, torch.Tensor), (
            f"only {key} went in as a tensor and {type(found).__name__} came out: the advantages are a tensor if any "
            "of the five arrays is one")


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
    cases = [  # the change, then every argument the message must name (a shape is compared with rewards')
        (dict(rewards=np.array(["a", "b", "c"])), "rewards"),
        (dict(values=np.array(["a", "b", "c"])), "values"),
        (dict(next_values=np.array(["a", "b", "c"])), "next_values"),
        (dict(values=np.zeros(4)), "values", "rewards"),
        (dict(next_values=np.zeros((3, 1))), "next_values", "rewards"),
        (dict(terminated=np.array([False, True])), "terminated", "rewards"),
        (dict(trace_cuts=np.ones(4, bool)), "trace_cuts", "rewards"),
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
    for change, *arguments in cases:
        with pytest.raises(ValueError) as error:
            impl.gae_advantages(**{**good, **change})
        unnamed = [argument for argument in arguments if not re.search(word(argument), str(error.value))]
        assert not unnamed, f"changing {sorted(change)} raised {str(error.value)!r}, which does not name {unnamed}"


@pytest.mark.parametrize("shape, record", [((3,), "1"), ((3, 2), "(1, 0)")])
def test_a_terminated_record_left_uncut_is_named(impl, shape, record):
    terminated, trace_cuts = np.zeros(shape, bool), np.zeros(shape, bool)
    terminated[1:] = trace_cuts[2:] = True  # records 1 and 2 end the task; only record 2 cuts its trace
    good = dict(rewards=np.ones(shape), values=np.zeros(shape), next_values=np.ones(shape), gamma=0.9,
                gae_lambda=0.9)
    impl.gae_advantages(**good, terminated=terminated, trace_cuts=trace_cuts | terminated)  # valid input works first
    with pytest.raises(ValueError) as error:
        impl.gae_advantages(**good, terminated=terminated, trace_cuts=trace_cuts)
    message = str(error.value)
    assert "trace_cuts must be True wherever terminated is True" in message, (
        f"the message states the rule the input broke: {message!r}")
    assert f"record {record} is terminated but not cut" in message, (
        f"the message names the first record that breaks it, {record} for shape {shape}: {message!r}")


# ---- clauses no test holds, and why ----
# "V(s_{t+1}) for the observation step t produced": which observation a caller valued is the caller's; the tests hold
#     what the function does with it (bootstrap unless terminated, never values[t + 1]).
# The Example: run as a doctest (python -m pytest --doctest-modules solutions), not here.


test_contract, test_contract_edges = battery_tests(CONTRACTS)
