"""The token_objectives tests: token-level PPO: masked terms, reductions and exact sequence ratios."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.assertions import assert_differentiable, gradient, plain, which_reading
from kata.testing.strategies import MASKED_EXTREMES, seeds, token_objective_batches

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
    """The batch with every masked log-prob replaced by an extreme value (either sign, beyond exp's range)."""
    random = np.random.default_rng(draw_seed)
    masked = batch["mask"] == 0
    changed = dict(batch)
    for key in ("new_log_probs", "old_log_probs"):
        changed[key] = np.where(masked, random.choice(MASKED_EXTREMES, size=masked.shape), batch[key])
    return changed


def every_output(impl, batch: dict) -> list[np.ndarray]:
    outputs = list(impl.masked_token_ppo_terms(**batch))
    outputs += [impl.masked_token_ppo_objective(**batch, reduction=r) for r in REDUCTIONS]
    ratio_arguments = {k: batch[k] for k in ("new_log_probs", "old_log_probs", "mask")}
    outputs.append(impl.sequence_log_probability_ratio(**ratio_arguments))
    outputs.append(impl.sequence_probability_ratio(**ratio_arguments))
    return outputs


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
            "each row's advantage times ratio 1: the ratio is masked there but the advantage is kept":
                row_advantages}, lead="; they equal ")
    )
    arguments = {k: SEED_BATCH[k] for k in ("new_log_probs", "old_log_probs", "mask")}
    token_log_ratios = SEED_BATCH["new_log_probs"] - SEED_BATCH["old_log_probs"]
    log_ratio = impl.sequence_log_probability_ratio(**arguments)
    if not np.allclose(log_ratio, [-0.1, -0.1], rtol=0, atol=1e-12):
        raise AssertionError(
            f"the sequence log-ratios are {plain(log_ratio)}, expected [-0.1, -0.1]: sum new - old over the response "
            "tokens only, row 0: 0.3 - 0.3 - 0.1 = -0.1, row 1: 0.2 - 0.3 = -0.1"
            + which_misreading(log_ratio, [-0.1, -0.1], {
                "the sum over every column, prompt and padding included (use the mask)": token_log_ratios.sum(1),
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
                "the mean of the token ratios": [r.mean() for r in response_ratios],
                "exp of the mean log-ratio": [np.exp(-0.1 / 3), np.exp(-0.1 / 2)],
                "the product over every column, prompt and padding included": np.exp(token_log_ratios.sum(1))})
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
    misreadings = {
        "token_mean": {"the objective's negative (the sign is flipped: this is the objective to maximise)":
                       -expected["token_mean"],
                       "the sum divided by the number of rows B = 2, not by the 5 response tokens": sums.sum() / 2,
                       "the sum divided by all 12 padded positions, not by the 5 response tokens": sums.sum() / 12},
        "sequence_mean": {"the objective's negative (the sign is flipped)": -expected["sequence_mean"],
                          "each row divided by the padded length 6, not by its response length":
                          (sums[0] / 6 + sums[1] / 6) / 2,
                          "the token_mean": expected["token_mean"]},
        "sequence_sum_mean": {"the objective's negative (the sign is flipped)": -expected["sequence_sum_mean"],
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
    for name, got, expected in zip(("ratio", "unclipped", "clipped", "pessimistic"), terms, expected_terms(batch)):
        assert isinstance(got, np.ndarray) and got.shape == batch["mask"].shape, (
            f"{name}: NumPy in must give a NumPy [B, L] array out"
        )
        np.testing.assert_allclose(
            got, expected, **TIGHT,
            err_msg=f"{name}: at a response token, PPO's term with the response's advantage (one advantage per "
            "row, shared by its tokens); at a masked position, ratio 1 and terms 0",
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
    lengths = batch["mask"].sum(axis=1)
    for name, a, b in zip(OUTPUT_NAMES, map(np.asarray, before), map(np.asarray, after)):
        if np.isnan(a).any():
            empty = (f"row {int(np.flatnonzero(lengths == 0)[0])} has no response token" if (lengths == 0).any()
                     else None)
            raise AssertionError(
                f"{name} is {plain(a)}, NaN before any extreme value is written (response lengths "
                f"{plain(lengths)})" + (f": {empty}, and an empty response must contribute 0, never NaN (for "
                                        "example, 0 / 0 from dividing its sum by n = 0)" if empty else "")
            )
        assert not np.isnan(b).any(), (
            f"{name} is {plain(b)} when masked positions hold extremes like +-1e4 (it is {plain(a)} without them): "
            "values at masked positions reach the computation; for example, masking after exp overflows to inf "
            "there, and 0 * inf is NaN, where selecting with the mask before exp never sees them"
        )
        np.testing.assert_array_equal(
            b, a, err_msg=f"{name} changed when only values at masked positions (prompt, padding) changed",
        )


@given(batch=token_objective_batches(), extremes_seed=seeds, reduction=st.sampled_from(REDUCTIONS))
def test_masked_positions_get_no_gradient(impl, batch, extremes_seed, reduction):
    gradients = []
    for values in (batch, with_masked_values(batch, extremes_seed)):
        new = torch.tensor(values["new_log_probs"], requires_grad=True)
        value = impl.masked_token_ppo_objective(
            new, torch.tensor(values["old_log_probs"]), torch.tensor(values["advantages"]),
            torch.tensor(values["mask"]), clip_epsilon=values["clip_epsilon"], reduction=reduction,
        )
        assert isinstance(value, torch.Tensor) and value.requires_grad, (
            "a tensor in must give a tensor out, with the gradient path to new_log_probs kept"
        )
        value.backward()
        gradients.append(new.grad.numpy())
    assert np.all(gradients[1][batch["mask"] == 0] == 0.0) and not np.isnan(gradients[1]).any(), (
        f"{reduction}: gradient reached a masked position (or is NaN there): prompt and padding log-probs must not "
        "be in the loss"
    )
    np.testing.assert_array_equal(gradients[1], gradients[0],
                                  err_msg=f"{reduction}: the gradient changed when only masked values changed")


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
        + which_reading(found, expected, {"its negative: the loss's gradient, where the objective to maximise is "
                                          "documented": -expected}, atol=1e-12),
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
            "the sum divided by the number of rows B": sums.sum() / rows,
            "the sum divided by every padded position B * L": sums.sum() / (rows * width),
            "the objective's negative": -token_mean}),
    )
    np.testing.assert_allclose(
        found["sequence_mean"], sequence_mean, **TIGHT,
        err_msg="sequence_mean = mean over rows of (row sum / row's response length); an empty row contributes 0 "
        "and still counts in B" + which_reading(found["sequence_mean"], sequence_mean, {
            "each row divided by the padded length L": np.mean(sums / width),
            "the token_mean": token_mean, "the objective's negative": -sequence_mean}),
    )
    np.testing.assert_allclose(
        found["sequence_sum_mean"], sums.mean(), **TIGHT,
        err_msg="sequence_sum_mean = mean over rows of each row's sum over its response tokens"
        + which_reading(found["sequence_sum_mean"], sums.mean(), {"the sum over rows, not its mean": sums.sum(),
                                                                  "the objective's negative": -sums.mean()}),
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
    with pytest.raises(ValueError, match="reduction") as error:
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
    np.testing.assert_allclose(
        ratio, product, rtol=1e-10,
        err_msg="the response's probability ratio is the PRODUCT of its token ratios, over response tokens only"
        + which_reading(ratio, product, {
            "the mean of the token ratios": np.where(response, token_ratios, 0.0).sum(axis=1) / counts,
            "exp of the mean token log-ratio": np.exp(np.log(token_ratios).sum(axis=1) / counts)}, rtol=1e-10),
    )
    response_sum = (np.where(batch["mask"] == 1, batch["new_log_probs"] - batch["old_log_probs"], 0.0)).sum(axis=1)
    np.testing.assert_allclose(
        log_ratio, response_sum, **TIGHT,
        err_msg="the response's log-ratio sums new - old over its response tokens only (prompt and padding "
        "columns hold junk)",
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


# ---- arrays, rows, and bad input -------------------------------------------------------------------------------


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


def test_bad_input_is_a_clear_error(impl):
    impl.masked_token_ppo_terms(**SEED_BATCH)
    cases = {
        "old_log_probs": dict(old_log_probs=SEED_BATCH["old_log_probs"][:, :5]),
        "mask": dict(mask=SEED_BATCH["mask"][:, :5]),
        "advantages": dict(advantages=np.ones((2, 6))),  # one advantage per response, not per token
        "clip_epsilon": dict(clip_epsilon=0.0),
    }
    for name, change in cases.items():
        with pytest.raises(ValueError, match=name):
            impl.masked_token_ppo_terms(**dict(SEED_BATCH, **change))
    with pytest.raises(ValueError, match="mask"):
        impl.masked_token_ppo_terms(**dict(SEED_BATCH, mask=SEED_BATCH["mask"] * 2))
    with pytest.raises(ValueError, match="mask"):
        impl.sequence_log_probability_ratio(SEED_BATCH["new_log_probs"], SEED_BATCH["old_log_probs"],
                                            SEED_BATCH["mask"][:1])
