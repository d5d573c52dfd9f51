"""The token_objectives tests: token-level PPO: masked terms, reductions and exact sequence ratios."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, gradient, mistake, plain, which_reading, word
from kata.testing.strategies import IGNORED_VALUES, containers, extreme_log_probs, float_dtypes, seeds
from kata.testing.strategies.token_objectives import token_objective_batches
from kata.testing.battery import battery_tests
from kata.testing.strategies.token_objectives import CONTRACTS

pytestmark = pytest.mark.token_objectives

REDUCTIONS = ("token_mean", "sequence_mean", "sequence_sum_mean")
TIGHT = dict(rtol=1e-12, atol=1e-12)


def which_misreading(actual, expected, readings: dict[str, object]) -> str:
    """``"; it equals <reading>"`` for the readings (a misunderstanding's name -> the value it gives) that
    ``actual`` matches and ``expected`` does not; "" when none does."""
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    matches = [name for name, value in readings.items()
               if np.asarray(value).shape == actual.shape
               and np.allclose(actual, value, rtol=1e-9, atol=1e-12)
               and not np.allclose(expected, value, rtol=1e-9, atol=1e-12)]
    return ("; it equals " + " and ".join(matches)) if matches else ""


def expected_terms(batch: dict) -> tuple[np.ndarray, ...]:
    """The four terms by their definition, in NumPy: PPO's per-token terms at response tokens, (1, 0, 0, 0)
    elsewhere."""
    response = batch["mask"] == 1
    epsilon = batch["clip_epsilon"]
    ratio = np.ones(response.shape)
    ratio[response] = np.exp(batch["new_log_probs"][response] - batch["old_log_probs"][response])
    advantages = np.where(response, batch["advantages"][:, None], 0.0)
    unclipped = ratio * advantages
    clipped = np.clip(ratio, 1.0 - epsilon, 1.0 + epsilon) * advantages
    return ratio, unclipped, clipped, np.minimum(unclipped, clipped)


def per_row(batch: dict) -> tuple[np.ndarray, np.ndarray]:
    """(row sums of the pessimistic term over the response, response lengths n_i)."""
    pessimistic = expected_terms(batch)[3]
    return (pessimistic * batch["mask"]).sum(axis=1), batch["mask"].sum(axis=1)


def objective(impl, batch: dict, reduction: str) -> float:
    return float(impl.masked_token_ppo_objective(**batch, reduction=reduction))


def with_masked_values(batch: dict, draw_seed: int) -> dict:
    """The batch with every masked log-prob replaced by one of IGNORED_VALUES (+-inf, NaN, beyond exp's range)."""
    random = np.random.default_rng(draw_seed)
    masked = batch["mask"] == 0
    changed = dict(batch)
    for key in ("new_log_probs", "old_log_probs"):
        values = random.choice(np.array(IGNORED_VALUES), size=masked.shape).astype(batch[key].dtype)
        changed[key] = np.where(masked, values, batch[key])
    return changed


def log_ratio_tolerance(batch: dict) -> np.ndarray:
    """Per row, how far two valid sums of the response's log-ratios may differ: a sum of ``new - old`` and a
    difference of the two sums round differently, by a few ulps of the log-probs summed (large near -800)."""
    response = batch["mask"] == 1
    eps = float(np.finfo(np.result_type(batch["new_log_probs"], batch["old_log_probs"])).eps)
    size = np.where(response, np.abs(batch["new_log_probs"]) + np.abs(batch["old_log_probs"]), 0.0).sum(axis=1)
    return 16 * eps * (1.0 + size)


def every_output(impl, batch: dict) -> list[np.ndarray]:
    outputs = list(impl.masked_token_ppo_terms(**batch))
    outputs += [impl.masked_token_ppo_objective(**batch, reduction=r) for r in REDUCTIONS]
    ratio_arguments = {k: batch[k] for k in ("new_log_probs", "old_log_probs", "mask")}
    outputs.append(impl.sequence_log_probability_ratio(**ratio_arguments))
    outputs.append(impl.sequence_probability_ratio(**ratio_arguments))
    return outputs


def nan_origin(impl, index: int, batch: dict, value: np.ndarray) -> str:
    """What a NaN in output ``OUTPUT_NAMES[index]`` on finite response values comes from: an empty row when the NaN
    sits in one (or, for a reduction, when leaving the empty rows out removes it), else the response's values."""
    lengths = batch["mask"].sum(axis=1)
    empty = "an empty response contributes 0 (and its log-ratio is 0), never NaN; for example, 0 / 0 from dividing "
    if value.ndim:
        row = int(np.argwhere(np.isnan(value))[0][0])
        if lengths[row] == 0:
            return f"row {row} has no response token: {empty}its sum by n = 0"
    elif (lengths == 0).any() and (lengths > 0).any():
        kept = {key: value[lengths > 0] if key in ("new_log_probs", "old_log_probs", "advantages", "mask") else value
                for key, value in batch.items()}
        if np.isfinite(np.asarray(output_of(impl, index, kept))).all():
            return f"rows {plain(np.flatnonzero(lengths == 0))} have no response token, and without them it is " \
                   f"finite: {empty}a sum by n = 0"
    elif (lengths == 0).all():
        return f"no row has a response token: {empty}0 by 0"
    response = batch["mask"] == 1
    row = int(np.argwhere(np.isnan(value))[0][0]) if value.ndim else int(np.flatnonzero(lengths > 0)[0])
    low = min(batch["new_log_probs"][response].min(), batch["old_log_probs"][response].min())
    return (f"the response log-probs are finite (as low as {plain(low)}), and a valid log-prob that far below 0 is "
            f"still a finite ratio exp(new - old)" + (f" (row {row}, response lengths {plain(lengths)})"))


OUTPUT_NAMES = ("ratio", "unclipped", "clipped", "pessimistic", *REDUCTIONS, "sequence log-ratio", "sequence ratio")


# ---- the seed's example ----------------------------------------------------------------------------------------

SEED_BATCH = dict(
    new_log_probs=np.array([[9.0, 8.0, -0.7, -1.5, -0.9, 20.0], [7.0, -0.5, -1.2, 30.0, 40.0, 50.0]]),
    old_log_probs=np.array([[-9.0, -8.0, -1.0, -1.2, -0.8, -20.0], [-7.0, -0.7, -0.9, -30.0, -40.0, -50.0]]),
    advantages=np.array([1.5, -0.8]),
    mask=np.array([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]]),
    clip_epsilon=0.2,
)


def test_seed_example(impl):
    ratio, _, _, pessimistic = impl.masked_token_ppo_terms(**SEED_BATCH)
    assert isinstance(ratio, np.ndarray), f"NumPy in must give NumPy out; got {type(ratio).__name__}"
    np.testing.assert_allclose(
        ratio, np.exp([[0, 0, 0.3, -0.3, -0.1, 0], [0, 0.2, -0.3, 0, 0, 0]]), rtol=1e-12,
        err_msg="response tokens carry exp(new - old); prompt and padding columns carry exactly 1",
    )
    masked = SEED_BATCH["mask"] == 0
    row_advantages = np.broadcast_to(SEED_BATCH["advantages"][:, None], masked.shape)[masked]
    assert np.all(pessimistic[masked] == 0.0), (
        f"prompt and padding terms must be exactly 0; the pessimistic terms there are {plain(pessimistic[masked])}: "
        "a row's advantage applies only at its response tokens"
        + which_reading(pessimistic[masked], np.zeros(masked.sum()), {
            mistake("token_objectives/masked_terms_keep_the_advantage"): row_advantages}, lead="; they equal ")
    )
    arguments = {k: SEED_BATCH[k] for k in ("new_log_probs", "old_log_probs", "mask")}
    token_log_ratios = SEED_BATCH["new_log_probs"] - SEED_BATCH["old_log_probs"]
    log_ratio = impl.sequence_log_probability_ratio(**arguments)
    if not np.allclose(log_ratio, [-0.1, -0.1], rtol=0, atol=1e-12):
        raise AssertionError(
            f"the sequence log-ratios are {plain(log_ratio)}, expected [-0.1, -0.1]: sum new - old over the response "
            "tokens only, row 0: 0.3 - 0.3 - 0.1 = -0.1, row 1: 0.2 - 0.3 = -0.1"
            + which_misreading(log_ratio, [-0.1, -0.1], {
                mistake("token_objectives/mask_ignored_in_sequence_ratio"): token_log_ratios.sum(1),
                "the mean over the response tokens, not their sum": [-0.1 / 3, -0.1 / 2]})
        )
    sequence_ratio = impl.sequence_probability_ratio(**arguments)
    expected_ratio = np.exp([-0.1, -0.1])
    if not np.allclose(sequence_ratio, expected_ratio, rtol=1e-12, atol=0):
        response_ratios = [np.exp([0.3, -0.3, -0.1]), np.exp([0.2, -0.3])]
        raise AssertionError(
            f"the sequence ratios are {plain(sequence_ratio)}, expected exp(-0.1) = {plain(expected_ratio[0])} for "
            "both rows: a response's probability is the PRODUCT of its tokens' probabilities, so its ratio is the "
            "product of the token ratios, exp(sum of the log-ratios), over the response tokens only"
            + which_misreading(sequence_ratio, expected_ratio, {
                mistake("token_objectives/sequence_ratio_mean_of_token_ratios"): [r.mean() for r in response_ratios],
                "exp of the mean log-ratio": [np.exp(-0.1 / 3), np.exp(-0.1 / 2)],
                mistake("token_objectives/mask_ignored_in_sequence_ratio"): np.exp(token_log_ratios.sum(1))})
        )
    # Row 0: A = 1.5, ratios e^0.3 (clipped to 1.2), e^-0.3, e^-0.1. Row 1: A = -0.8, ratios e^0.2, e^-0.3 (clipped
    # to 0.8). Row sums 4.268483 and -1.617122; 3 and 2 response tokens.
    sums = np.array([1.5 * (1.2 + np.exp(-0.3) + np.exp(-0.1)), -0.8 * (np.exp(0.2) + 0.8)])
    expected = {"token_mean": sums.sum() / 5, "sequence_mean": (sums[0] / 3 + sums[1] / 2) / 2,
                "sequence_sum_mean": sums.sum() / 2}
    steps = {
        "token_mean": "(4.268483 + (-1.617122)) / 5 response tokens = 0.530272",
        "sequence_mean": "(4.268483 / 3 + (-1.617122) / 2) / 2 rows = 0.307133",
        "sequence_sum_mean": "(4.268483 + (-1.617122)) / 2 rows = 1.325681",
    }
    flipped = mistake("token_objectives/objective_sign_flipped")
    misreadings = {
        "token_mean": {flipped: -expected["token_mean"],
                       mistake("token_objectives/token_mean_divides_by_batch"): sums.sum() / 2,
                       mistake("token_objectives/token_mean_divides_by_padded_size"): sums.sum() / 12},
        "sequence_mean": {flipped: -expected["sequence_mean"],
                          mistake("token_objectives/sequence_mean_divides_by_padded_length"):
                          (sums[0] / 6 + sums[1] / 6) / 2,
                          "the token_mean": expected["token_mean"]},
        "sequence_sum_mean": {flipped: -expected["sequence_sum_mean"],
                              "the sum over the batch, not its mean over rows": sums.sum()},
    }
    for reduction, value in expected.items():
        got = objective(impl, SEED_BATCH, reduction)
        if not np.isclose(got, value, rtol=1e-12, atol=0):
            raise AssertionError(
                f"{reduction} of the lab's two rows is {plain(got)}, expected {steps[reduction]} (row sums of the "
                "pessimistic terms: 1.5 * (1.2 + e^-0.3 + e^-0.1) = 4.268483 and -0.8 * (e^0.2 + 0.8) = -1.617122)"
                + which_misreading(got, value, misreadings[reduction])
            )
    np.testing.assert_allclose(list(expected.values()), [0.530272, 0.307133, 1.325681], atol=5e-7,
                               err_msg="the test's own worked values disagree with its arithmetic")


# ---- masked terms ----------------------------------------------------------------------------------------------


@given(batch=token_objective_batches())
def test_terms_are_ppo_terms_at_response_tokens_and_neutral_elsewhere(impl, batch):
    terms = impl.masked_token_ppo_terms(**batch)
    masked = batch["mask"] == 0
    with np.errstate(all="ignore"):
        quotient = np.where(masked, 1.0, np.exp(batch["new_log_probs"]) / np.exp(batch["old_log_probs"]))
    for name, got, expected in zip(("ratio", "unclipped", "clipped", "pessimistic"), terms, expected_terms(batch)):
        assert isinstance(got, np.ndarray) and got.shape == batch["mask"].shape, (
            f"{name}: NumPy in must give a NumPy [B, L] array out"
        )
        np.testing.assert_allclose(
            got, expected, **TIGHT,
            err_msg=f"{name}: at a response token, PPO's term with the response's advantage (one advantage per "
            "row, shared by its tokens); at a masked position, ratio 1 and terms 0"
            + (which_reading(got, expected, {
                mistake("token_objectives/ratio_as_quotient_of_probabilities"): quotient}) if name == "ratio" else ""),
        )
    assert np.all(terms[0][masked] == 1.0), "masked ratios must be exactly 1 (the multiplicative identity)"
    for name, term in zip(("unclipped", "clipped", "pessimistic"), terms[1:]):
        assert np.all(term[masked] == 0.0), f"masked {name} terms must be exactly 0"


@given(batch=token_objective_batches(), extremes_seed=seeds)
def test_values_at_masked_positions_change_nothing(impl, batch, extremes_seed):
    extreme = with_masked_values(batch, extremes_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in exp would warn
        before, after = every_output(impl, batch), every_output(impl, extreme)
    for index, (name, a, b) in enumerate(zip(OUTPUT_NAMES, map(np.asarray, before), map(np.asarray, after))):
        if np.isnan(a).any():
            raise AssertionError(f"{name} is {plain(a)}, NaN before any extreme value is written: "
                                 + nan_origin(impl, index, batch, a))
        if np.isnan(b).any():
            raise AssertionError(
                f"{name} is {plain(b)} when masked positions hold values like +-inf, NaN or 1e4 (it is {plain(a)} "
                "without them): values at masked positions reach the computation; for example, masking after exp "
                "overflows to inf there, and 0 * inf is NaN, where selecting with the mask before exp never sees them"
            )
        np.testing.assert_array_equal(
            b, a, err_msg=f"{name} changed when only values at masked positions (prompt, padding) changed",
        )


def output_of(impl, index: int, arguments: dict):
    """Output ``OUTPUT_NAMES[index]`` of the implementation on ``arguments`` (a batch's keyword arguments)."""
    if index < 4:
        return impl.masked_token_ppo_terms(**arguments)[index]
    if index < 4 + len(REDUCTIONS):
        return impl.masked_token_ppo_objective(**arguments, reduction=REDUCTIONS[index - 4])
    pair = {key: arguments[key] for key in ("new_log_probs", "old_log_probs", "mask")}
    if index == len(OUTPUT_NAMES) - 2:
        return impl.sequence_log_probability_ratio(**pair)
    return impl.sequence_probability_ratio(**pair)


@given(batch=token_objective_batches(), extremes_seed=seeds)
def test_gradient_reaches_new_log_probs_only_and_never_a_masked_position(impl, batch, extremes_seed):
    extreme = with_masked_values(batch, extremes_seed)
    masked = batch["mask"] == 0
    for index, name in enumerate(OUTPUT_NAMES):
        gradients = []
        for values in (batch, extreme):
            leaves = {key: torch.tensor(values[key], dtype=torch.float64, requires_grad=True)
                      for key in ("new_log_probs", "old_log_probs", "advantages", "mask")}
            value = output_of(impl, index, dict(values, **leaves))
            assert_differentiable(value, f"{name} of tensor log-probabilities", "new_log_probs")
            value.sum().backward()
            for data in ("old_log_probs", "advantages", "mask"):
                reached = leaves[data].grad
                if reached is not None and bool(reached.any()):
                    raise AssertionError(
                        f"{name}: a gradient reached {data} (it is {plain(reached)}), which is data: only "
                        f"new_log_probs receives gradient, even when {data} requires grad (detach it)"
                    )
            gradients.append(gradient(leaves["new_log_probs"], "new_log_probs"))
        found = gradients[1]
        bad = masked & ((found != 0) | np.isnan(found))
        if bad.any():
            row, column = (int(i) for i in np.argwhere(bad)[0])
            raise AssertionError(
                f"{name}: the gradient at masked position [{row}, {column}] is {plain(found[row, column])} when "
                f"that position's log-probs are new = {plain(extreme['new_log_probs'][row, column])}, old = "
                f"{plain(extreme['old_log_probs'][row, column])}: no gradient reaches a masked position, whatever "
                "it holds (select the response positions with torch.where before computing on them: 0 * inf is NaN)"
            )
        if not np.isfinite(found).all():
            raise AssertionError(f"{name}: the gradient with respect to new_log_probs is {plain(found)}, not finite, "
                                 "at response tokens whose log-probs are finite")
        np.testing.assert_array_equal(found, gradients[0],
                                      err_msg=f"{name}: the gradient changed when only masked values changed")


@given(batch=token_objective_batches(allow_empty=False), reduction=st.sampled_from(REDUCTIONS))
def test_gradient_is_ppos_at_each_response_token(impl, batch, reduction):
    new = torch.tensor(batch["new_log_probs"], requires_grad=True)
    arguments = dict(batch, new_log_probs=new)
    value = impl.masked_token_ppo_objective(**arguments, reduction=reduction)
    assert_differentiable(value, f"the {reduction} objective of tensor log-probabilities", "new_log_probs")
    value.backward()
    ratio = expected_terms(batch)[0]
    advantages = batch["advantages"][:, None] * np.ones_like(ratio)
    epsilon = batch["clip_epsilon"]
    binds = ((advantages > 0) & (ratio > 1 + epsilon)) | ((advantages < 0) & (ratio < 1 - epsilon))
    lengths = batch["mask"].sum(axis=1, keepdims=True) * np.ones_like(ratio)
    weight = {"token_mean": 1.0 / batch["mask"].sum(), "sequence_mean": 1.0 / (len(ratio) * lengths),
              "sequence_sum_mean": 1.0 / len(ratio)}[reduction]
    expected = np.where((batch["mask"] == 1) & ~binds, ratio * advantages * weight, 0.0)
    found = gradient(new, "new_log_probs")
    np.testing.assert_allclose(
        found, expected, rtol=1e-9, atol=1e-12,
        err_msg=f"{reduction}: d objective / d new_log_prob must be ratio * A * (the token's weight) where the clip "
        "does not bind and 0 where it does (the advantages and old log-probs are constants)"
        + which_reading(found, expected, {mistake("token_objectives/objective_sign_flipped"): -expected}, atol=1e-12),
    )


# ---- reductions ------------------------------------------------------------------------------------------------


@given(batch=token_objective_batches())
def test_each_reduction_matches_its_formula(impl, batch):
    sums, lengths = per_row(batch)
    rows, width = batch["mask"].shape
    token_mean = sums.sum() / max(lengths.sum(), 1)
    sequence_mean = np.mean(np.where(lengths > 0, sums / np.maximum(lengths, 1), 0.0))
    found = {reduction: objective(impl, batch, reduction) for reduction in REDUCTIONS}
    np.testing.assert_allclose(
        found["token_mean"], token_mean, **TIGHT,
        err_msg="token_mean = sum(m * l) / sum(m): every response token of the batch weighs the same"
        + which_reading(found["token_mean"], token_mean, {
            mistake("token_objectives/token_mean_divides_by_batch"): sums.sum() / rows,
            mistake("token_objectives/token_mean_divides_by_padded_size"): sums.sum() / (rows * width),
            mistake("token_objectives/objective_sign_flipped"): -token_mean}),
    )
    np.testing.assert_allclose(
        found["sequence_mean"], sequence_mean, **TIGHT,
        err_msg="sequence_mean = mean over rows of (row sum / row's response length); an empty row contributes 0 "
        "and still counts in B" + which_reading(found["sequence_mean"], sequence_mean, {
            mistake("token_objectives/sequence_mean_divides_by_padded_length"): np.mean(sums / width),
            "the token_mean": token_mean, mistake("token_objectives/objective_sign_flipped"): -sequence_mean}),
    )
    np.testing.assert_allclose(
        found["sequence_sum_mean"], sums.mean(), **TIGHT,
        err_msg="sequence_sum_mean = mean over rows of each row's sum over its response tokens"
        + which_reading(found["sequence_sum_mean"], sums.mean(), {
            "the sum over rows, not its mean": sums.sum(),
            mistake("token_objectives/objective_sign_flipped"): -sums.mean()}),
    )


@given(batch=token_objective_batches(equal_lengths=True))
def test_reductions_agree_up_to_the_length_when_rows_have_equal_length(impl, batch):
    length = int(batch["mask"].sum(axis=1)[0])
    values = dict(zip(REDUCTIONS, (objective(impl, batch, r) for r in REDUCTIONS)))
    tokens = f"{length} token" + ("s" if length != 1 else "")
    sums, _ = per_row(batch)
    formulas = {"token_mean": sums.sum() / (length * len(sums)), "sequence_mean": np.mean(sums / length),
                "sequence_sum_mean": sums.mean()}

    def wrong_ones(names) -> str:
        wrong = [f"{name} = {plain(values[name])} where its formula gives {plain(formulas[name])}" for name in names
                 if not np.isclose(values[name], formulas[name], **TIGHT)]
        return "; ".join(wrong) if wrong else "each matches its formula alone, so they disagree only by rounding"

    if not np.isclose(values["sequence_mean"], values["token_mean"], **TIGHT):
        raise AssertionError(
            f"with every response {tokens} long, sequence_mean must equal token_mean: token_mean = "
            f"{plain(values['token_mean'])}, sequence_mean = {plain(values['sequence_mean'])}; "
            + wrong_ones(("token_mean", "sequence_mean"))
        )
    if not np.isclose(values["sequence_sum_mean"], length * values["token_mean"], **TIGHT):
        raise AssertionError(
            f"with every response {tokens} long, sequence_sum_mean is {length} times token_mean: "
            f"sequence_sum_mean = {plain(values['sequence_sum_mean'])}, {length} * token_mean = "
            f"{plain(length * values['token_mean'])}; " + wrong_ones(("token_mean", "sequence_sum_mean"))
        )


def test_reductions_differ_as_documented_when_lengths_differ(impl):
    # Row 0: one token, row 1: three; at ratio 1 every pessimistic term is the row's advantage.
    batch = dict(new_log_probs=np.zeros((2, 3)), old_log_probs=np.zeros((2, 3)), advantages=np.array([4.0, 1.0]),
                 mask=np.array([[1, 0, 0], [1, 1, 1]]), clip_epsilon=0.2)
    token_mean, sequence_mean, sequence_sum_mean = (objective(impl, batch, r) for r in REDUCTIONS)
    np.testing.assert_allclose(token_mean, (4 + 3) / 4, **TIGHT,
                               err_msg="token_mean weighs the 3-token response three times the 1-token one")
    np.testing.assert_allclose(sequence_mean, (4 + 1) / 2, **TIGHT,
                               err_msg="sequence_mean weighs each response once, whatever its length")
    np.testing.assert_allclose(sequence_sum_mean, (4 + 3) / 2, **TIGHT,
                               err_msg="sequence_sum_mean sums each response's tokens, then averages over rows")


def test_an_unknown_reduction_names_the_valid_ones(impl):
    objective(impl, SEED_BATCH, "token_mean")
    with pytest.raises(ValueError, match=r"\breduction\b") as error:
        impl.masked_token_ppo_objective(**SEED_BATCH, reduction="mean")
    assert all(name in str(error.value) for name in REDUCTIONS), (
        f"the error must list the valid reductions {REDUCTIONS}; got: {error.value}"
    )


@given(batch=token_objective_batches(allow_empty=False), empty_at=st.integers(0, 5))
def test_an_empty_response_contributes_zero_and_counts_in_the_batch(impl, batch, empty_at):
    rows, length = batch["mask"].shape
    where = empty_at % (rows + 1)
    grown = {key: np.insert(value, where, 7.0, axis=0) if key != "clip_epsilon" else value
             for key, value in batch.items()}
    grown["mask"][where] = 0  # a row whose response is empty, with junk log-probs and advantage
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 / 0 would warn
        before = {r: objective(impl, batch, r) for r in REDUCTIONS}
        after = {r: objective(impl, grown, r) for r in REDUCTIONS}
        arguments = {k: grown[k] for k in ("new_log_probs", "old_log_probs", "mask")}
        log_ratio = impl.sequence_log_probability_ratio(**arguments)
        ratio = impl.sequence_probability_ratio(**arguments)
    assert all(np.isfinite(value) for value in after.values()), f"an empty response gave NaN or inf: {after}"
    np.testing.assert_allclose(after["token_mean"], before["token_mean"], **TIGHT,
                               err_msg="token_mean: an empty response adds no token, so it changes nothing")
    for reduction in ("sequence_mean", "sequence_sum_mean"):
        np.testing.assert_allclose(
            after[reduction], before[reduction] * rows / (rows + 1), **TIGHT,
            err_msg=f"{reduction}: an empty response contributes 0 and counts in B (the documented choice), so "
            f"adding one to {rows} rows scales the objective by {rows}/{rows + 1}",
        )
    assert log_ratio[where] == 0.0 and ratio[where] == 1.0, (
        f"an empty response's log-ratio is 0 (an empty sum) and its ratio 1; row {where} gives "
        f"{plain(log_ratio[where])} and {plain(ratio[where])}"
    )


def test_a_batch_without_response_tokens_gives_zero(impl):
    batch = dict(SEED_BATCH, mask=np.zeros((2, 6), dtype=np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = [objective(impl, batch, r) for r in REDUCTIONS]
    assert values == [0.0, 0.0, 0.0], f"no response token at all: every reduction is 0, never NaN; got {values}"
    for reduction in REDUCTIONS:
        new = torch.tensor(batch["new_log_probs"], requires_grad=True)
        value = impl.masked_token_ppo_objective(new, batch["old_log_probs"], batch["advantages"], batch["mask"],
                                                batch["clip_epsilon"], reduction)
        assert_differentiable(value, f"the {reduction} objective of a batch without response tokens",
                              "new_log_probs")
        value.backward()
        found = gradient(new, "new_log_probs")
        assert np.all(found == 0.0), (
            f"{reduction}: no response token at all, so no gradient, but d objective / d new_log_probs is "
            f"{plain(found)}"
        )


# ---- exact sequence ratios -------------------------------------------------------------------------------------


@given(batch=token_objective_batches())
def test_sequence_ratio_is_the_product_of_token_ratios(impl, batch):
    arguments = {k: batch[k] for k in ("new_log_probs", "old_log_probs", "mask")}
    log_ratio = impl.sequence_log_probability_ratio(**arguments)
    ratio = impl.sequence_probability_ratio(**arguments)
    assert isinstance(ratio, np.ndarray) and ratio.shape == (len(batch["mask"]),), (
        f"one ratio per row, [B] = [{len(batch['mask'])}], as a NumPy array; got {type(ratio).__name__} of shape "
        f"{tuple(np.shape(ratio))}"
    )
    token_ratios = expected_terms(batch)[0]
    product = np.array([np.prod(row) for row in token_ratios])
    response = batch["mask"] == 1
    counts = np.maximum(response.sum(axis=1), 1)
    with np.errstate(all="ignore"):
        quotient = np.exp(np.where(response, batch["new_log_probs"], 0.0).sum(axis=1)) / np.exp(
            np.where(response, batch["old_log_probs"], 0.0).sum(axis=1))
    np.testing.assert_allclose(
        ratio, product, rtol=1e-10 + log_ratio_tolerance(batch).max(),
        err_msg="the response's probability ratio is the PRODUCT of its token ratios, over response tokens only"
        + which_reading(ratio, product, {
            mistake("token_objectives/sequence_ratio_mean_of_token_ratios"):
                np.where(response, token_ratios, 0.0).sum(axis=1) / counts,
            "exp of the mean token log-ratio": np.exp(np.log(token_ratios).sum(axis=1) / counts),
            mistake("token_objectives/sequence_ratio_as_quotient_of_probabilities"): quotient}, rtol=1e-10),
    )
    response_sum = (np.where(batch["mask"] == 1, batch["new_log_probs"] - batch["old_log_probs"], 0.0)).sum(axis=1)
    tolerance = log_ratio_tolerance(batch)
    if not np.all(np.abs(log_ratio - response_sum) <= tolerance):
        row = int(np.flatnonzero(~(np.abs(log_ratio - response_sum) <= tolerance))[0])
        raise AssertionError(
            f"row {row}'s log-ratio is {plain(log_ratio[row])}, expected {plain(response_sum[row])}: the response's "
            "log-ratio sums new - old over its response tokens only (prompt and padding columns hold junk)"
        )


def test_sequence_ratio_is_computed_in_log_space(impl):
    # Token log-ratios +400, +400, -400, -400: each token ratio is finite, a running product overflows to inf,
    # the exact response ratio is 1. And a log-ratio of 1000 is beyond float64: the ratio is inf, never NaN.
    new = np.array([[400.0, 400.0, -400.0, -400.0], [250.0, 250.0, 250.0, 250.0]])
    arguments = dict(new_log_probs=new, old_log_probs=np.zeros_like(new), mask=np.ones_like(new))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log_ratio = impl.sequence_log_probability_ratio(**arguments)
        ratio = impl.sequence_probability_ratio(**arguments)
    np.testing.assert_allclose(log_ratio, [0.0, 1000.0], atol=1e-9,
                               err_msg="the log-ratios sum the token log-ratios: 400 + 400 - 400 - 400 = 0 and "
                               "4 * 250 = 1000")
    if not np.isclose(ratio[0], 1.0, rtol=1e-12, atol=0):
        raise AssertionError(
            f"row 0's sequence ratio is {plain(ratio[0])}, expected exp(400 + 400 - 400 - 400) = 1, each token "
            "ratio being finite; for example, a running product of the token ratios overflows to inf at e^400 * "
            "e^400, where summing the log-ratios first and exponentiating once does not"
        )
    assert ratio[1] == np.inf, (
        f"a log-ratio of 1000 is beyond float64: the ratio is inf (never NaN); got {plain(ratio[1])}"
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_sequence_ratio_beyond_the_float_range_is_inf_or_zero(impl, dtype):
    # Log-ratios of +-1000 (float64) and +-200 (float32) are beyond exp's range, from log-probs of ordinary size and
    # from log-probs where exp itself underflows.
    big = 1000.0 if dtype == np.float64 else 200.0
    low = extreme_log_probs(dtype)[-1]
    new = np.array([[big / 4] * 4, [-big / 4] * 4, [low + 1.0] * 4, [low] * 4], dtype=dtype)
    old = np.array([[0.0] * 4, [0.0] * 4, [low] * 4, [low + 1.0] * 4], dtype=dtype)
    log_ratio = new.astype(np.float64).sum(axis=1) - old.astype(np.float64).sum(axis=1)
    with np.errstate(over="ignore"):
        expected = np.exp(log_ratio).astype(dtype)  # inf, 0, then e^4 and e^-4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exp's overflow warns in NumPy
        ratio = np.asarray(impl.sequence_probability_ratio(new, old, np.ones((4, 4), dtype=np.int64)))
    assert ratio.dtype == dtype, (
        f"the sequence ratio is {ratio.dtype} for {np.dtype(dtype)} log-probs: it is in their promoted dtype, where "
        f"exp of a log-ratio of {plain(big)} is inf"
    )
    for row in range(4):
        if not (ratio[row] == expected[row] or np.isclose(ratio[row], expected[row], rtol=1e-5, atol=0)):
            raise AssertionError(
                f"{np.dtype(dtype)} row {row}: the sequence log-ratio is {plain(log_ratio[row])}, so the ratio is "
                f"{plain(expected[row])}, found {plain(ratio[row])}: beyond the float range the ratio is inf or 0, "
                "never NaN" + ("; exp(sum new) / exp(sum old) gives 0 / 0 here" if row >= 2 and np.isnan(ratio[row])
                               else "")
            )


# ---- arrays, rows, and bad input -------------------------------------------------------------------------------

ARRAYS = ("new_log_probs", "old_log_probs", "advantages", "mask")
MASK_DTYPES = (np.int64, np.bool_, np.float32, np.float64)


def arguments_of(index: int) -> tuple[str, ...]:
    """The array arguments of the function that gives output ``OUTPUT_NAMES[index]``."""
    return ARRAYS if index < 4 + len(REDUCTIONS) else ("new_log_probs", "old_log_probs", "mask")


def expected_outputs(batch: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each output's value and the scale of its rounding (what it sums in absolute value), in float64."""
    as64 = {key: np.asarray(value, dtype=np.float64) if key in ARRAYS else value for key, value in batch.items()}
    as64["mask"] = (as64["mask"] != 0).astype(np.int64)
    terms = expected_terms(as64)
    sums, lengths = per_row(as64)
    scales, _ = per_row(dict(as64, advantages=np.abs(as64["advantages"])))
    rows = len(sums)
    reductions = [(sums.sum() / max(lengths.sum(), 1), np.abs(scales).sum() / max(lengths.sum(), 1)),
                  ((sums / np.maximum(lengths, 1)).mean(), (np.abs(scales) / np.maximum(lengths, 1)).mean()),
                  (sums.mean(), np.abs(scales).sum() / rows)]
    response = as64["mask"] == 1
    log_ratio = np.where(response, as64["new_log_probs"] - as64["old_log_probs"], 0.0).sum(axis=1)
    return ([(term, np.abs(term)) for term in terms] + reductions
            + [(log_ratio, np.zeros(rows)), (np.exp(log_ratio), np.exp(log_ratio))])


@given(batch=st.one_of(token_objective_batches(), token_objective_batches(dtype=np.float32)),
       dtypes=st.tuples(float_dtypes, float_dtypes, float_dtypes), mask_dtype=st.sampled_from(MASK_DTYPES),
       data=st.data())
def test_every_output_is_in_the_promoted_dtype_and_a_tensor_if_any_input_is(impl, batch, dtypes, mask_dtype, data):
    typed = dict(batch, mask=batch["mask"].astype(mask_dtype),
                 **{key: batch[key].astype(dtype) for key, dtype in zip(ARRAYS, dtypes)})
    given_arrays = data.draw(containers({key: typed[key] for key in ARRAYS}), label="containers")
    kinds = {key: "a tensor" if isinstance(value, torch.Tensor) else "NumPy" for key, value in given_arrays.items()}
    arguments = dict(typed, **given_arrays)
    for index, (name, (expected, scale)) in enumerate(zip(OUTPUT_NAMES, expected_outputs(typed))):
        names = arguments_of(index)
        promoted = np.result_type(*(typed[key].dtype for key in names if key != "mask"))
        value = output_of(impl, index, arguments)
        inputs = ", ".join(f"{key} {kinds[key]} ({np.dtype(typed[key].dtype)})" for key in names)
        tensor_in = any(isinstance(arguments[key], torch.Tensor) for key in names)
        if isinstance(value, torch.Tensor) != tensor_in:
            raise AssertionError(
                f"{name} is {type(value).__name__} for {inputs}: the result is a tensor if any input is a tensor, "
                "NumPy otherwise (hand every input to like_inputs, not only the first)"
            )
        found = value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if found.shape != np.shape(expected):
            raise AssertionError(f"{name} has shape {found.shape}, expected {np.shape(expected)} ("
                                 + ("[B, L]" if index < 4 else "0-d" if index < 4 + len(REDUCTIONS) else "[B]") + ")")
        if found.dtype != promoted:
            raise AssertionError(
                f"{name} is {found.dtype} for {inputs}: every output is in the promoted floating dtype of the "
                f"floating inputs, here {promoted} (the mask's dtype plays no part)"
            )
        eps = float(np.finfo(promoted).eps)
        if index == len(OUTPUT_NAMES) - 2:  # the log-ratio: a sum of log-probs' rounding
            tolerance = log_ratio_tolerance(typed)
        elif index == len(OUTPUT_NAMES) - 1:  # the ratio: exp turns that rounding into a relative error
            tolerance = (64 * eps + 2 * log_ratio_tolerance(typed)) * scale
        else:
            tolerance = 64 * eps * (1.0 + scale)
        wrong = ~(np.abs(found.astype(np.float64) - expected) <= tolerance)
        if wrong.any():
            where = tuple(int(i) for i in np.argwhere(wrong)[0]) if wrong.ndim else ()
            raise AssertionError(
                f"{name} for {inputs} is {plain(found[where])}, expected {plain(expected[where])} at "
                f"{list(where)} (computed in float64 from the same inputs): NumPy, tensors and their mixtures, "
                "float32 and float64, give the same values to the output dtype's precision"
            )
    for key in ARRAYS:
        before = typed[key]
        after = given_arrays[key].numpy() if isinstance(given_arrays[key], torch.Tensor) else given_arrays[key]
        np.testing.assert_array_equal(after, before, err_msg=f"{key} was changed in place")




@given(batch=token_objective_batches(), permutation_seed=seeds)
def test_rows_are_permutation_invariant(impl, batch, permutation_seed):
    order = np.random.default_rng(permutation_seed).permutation(len(batch["mask"]))
    shuffled = {key: value[order] if key != "clip_epsilon" else value for key, value in batch.items()}
    before, after = every_output(impl, batch), every_output(impl, shuffled)
    for name, a, b in zip(OUTPUT_NAMES, map(np.asarray, before), map(np.asarray, after)):
        expected = a if a.ndim == 0 else a[order]
        np.testing.assert_allclose(b, expected, rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name}: reordering rows must reorder per-row outputs and leave "
                                   "reductions unchanged (does some row's value leak into another?)")


@pytest.mark.parametrize("batch", [SEED_BATCH, dict(SEED_BATCH, mask=np.array([[0, 0, 1, 1, 1, 0], [0] * 6]))],
                         ids=["lab", "empty row"])
def test_tensor_in_tensor_out_and_inputs_untouched(impl, batch):
    original = {key: np.copy(value) for key, value in batch.items()}
    expected = every_output(impl, batch)
    tensors = {key: torch.tensor(value) if key != "clip_epsilon" else value for key, value in batch.items()}
    outputs = every_output(impl, tensors)
    for name, got, want in zip(OUTPUT_NAMES, outputs, expected):
        assert isinstance(got, torch.Tensor), f"{name}: a tensor in must give a tensor out"
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{name}: tensors and NumPy arrays must agree")
    for key, value in original.items():
        np.testing.assert_array_equal(batch[key], value, err_msg=f"{key} was changed in place")


@pytest.mark.parametrize("alone", ARRAYS)
def test_one_tensor_argument_alone_gives_tensors_out(impl, alone):
    # Every argument in turn is the only tensor, the others NumPy: each output is a tensor, whichever it is.
    arguments = dict(SEED_BATCH, **{alone: torch.tensor(SEED_BATCH[alone])})
    for index, name in enumerate(OUTPUT_NAMES):
        if alone not in arguments_of(index):
            continue
        value = output_of(impl, index, arguments)
        if not isinstance(value, torch.Tensor):
            raise AssertionError(
                f"{name} is {type(value).__name__} when {alone} alone is a tensor: the result is a tensor if any "
                "input is a tensor (hand every input to like_inputs, not only some)"
            )


def test_bad_input_is_a_clear_error(impl):
    impl.masked_token_ppo_terms(**SEED_BATCH)
    words = np.full((2, 6), "x")
    cases = [
        ("old_log_probs", dict(old_log_probs=SEED_BATCH["old_log_probs"][:, :5])),
        ("mask", dict(mask=SEED_BATCH["mask"][:, :5])),
        ("advantages", dict(advantages=np.ones((2, 6)))),  # one advantage per response, not per token
        ("advantages", dict(advantages=np.ones(3))),
        ("clip_epsilon", dict(clip_epsilon=0.0)),
        # shapes that would broadcast: the contract admits no broadcasting
        ("old_log_probs", dict(old_log_probs=SEED_BATCH["old_log_probs"][:1])),
        ("mask", dict(mask=SEED_BATCH["mask"][:1])),
        ("advantages", dict(advantages=SEED_BATCH["advantages"][:1])),
        ("clip_epsilon", dict(clip_epsilon=-0.2)),
        ("mask", dict(mask=SEED_BATCH["mask"] * 2)),
        ("mask", dict(mask=np.where(SEED_BATCH["mask"] == 1, 1.0, np.nan))),
        # arrays of something other than numbers, and log-probs that are not [B, L] with B, L >= 1
        ("new_log_probs", dict(new_log_probs=words)),
        ("old_log_probs", dict(old_log_probs=words)),
        ("advantages", dict(advantages=np.array(["x", "y"]))),
        ("mask", dict(mask=words)),
        ("new_log_probs", dict(new_log_probs=SEED_BATCH["new_log_probs"][0])),
    ]
    empty = {"B = 0": (0, 6), "L = 0": (2, 0)}
    for function in (impl.masked_token_ppo_terms,
                     lambda **kw: impl.masked_token_ppo_objective(**kw, reduction="token_mean")):
        for name, change in cases:
            with pytest.raises(ValueError, match=word(name)):
                function(**dict(SEED_BATCH, **change))
        with pytest.raises(ValueError, match=word("advantages") + r"[\s\S]*shape \(2,\)"):
            function(**dict(SEED_BATCH, advantages=np.ones(3)))  # the message gives the shape expected, [B]
        for shape in empty.values():
            with pytest.raises(ValueError, match=word("new_log_probs")):
                function(**dict(SEED_BATCH, new_log_probs=np.zeros(shape), old_log_probs=np.zeros(shape),
                                mask=np.zeros(shape, dtype=np.int64), advantages=np.zeros(shape[0])))
    pair = {key: SEED_BATCH[key] for key in ("new_log_probs", "old_log_probs", "mask")}
    for function in (impl.sequence_log_probability_ratio, impl.sequence_probability_ratio):
        for name, change in cases:
            if name in pair:
                with pytest.raises(ValueError, match=word(name)):
                    function(**dict(pair, **{key: value for key, value in change.items() if key in pair}))
        for shape in empty.values():
            with pytest.raises(ValueError, match=word("new_log_probs")):
                function(np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64))


def test_integer_advantages_and_log_probs_take_the_new_log_probs_dtype(impl):
    # Integer (0/1 verifier) advantages and integer log-probs have no floating dtype of their own: they take
    # new_log_probs', so float32 log-probs give float32 outputs.
    new = SEED_BATCH["new_log_probs"].astype(np.float32)
    arguments = dict(SEED_BATCH, new_log_probs=new, old_log_probs=np.zeros((2, 6), dtype=np.int64),
                     advantages=np.array([1, 0]))
    for index, name in enumerate(OUTPUT_NAMES):
        found = np.asarray(output_of(impl, index, arguments))
        assert found.dtype == np.float32, (
            f"{name} is {found.dtype} for float32 new_log_probs with integer old_log_probs and advantages: integer "
            "inputs take new_log_probs' floating dtype, here float32"
        )


# ---- clauses no test holds, and why ----
# masked_token_ppo_objective "the loss to minimise is its negative": what a caller does with the objective; the sign
#   of the objective itself is held (the seed example and the gradient's sign).
# masked_token_ppo_objective "a long response weighs more than a short one" / "each token of a long response weighs
#   less": the formulas' consequences, held through the formulas and the lengths-differ example, not on their own.
# sequence_probability_ratio "prefer the log-ratio for anything numeric": advice to the caller, not a result.


test_contract, test_contract_edges = battery_tests(CONTRACTS)
