"""The reference against verl 0.9.1's ``verl/trainer/ppo/core_algos.py`` (GUIDE.md §1, §2, §3, §4 and §7): GAE over
response tokens, the vanilla policy loss in every ``agg_loss`` mode (empty rows included, with and without the
global batch size), its dual clip and log-ratio clamp, ``kl_penalty``, the GRPO and RLOO outcome advantages, the
value loss, the GPG loss, REINFORCE++ returns and ``entropy_from_logits``.

verl's ``masked_mean`` divides by ``count + 1e-8`` and ``seq-mean-token-mean`` divides each row by ``n + 1e-8``
(``verl/utils/torch_functional.py``, ``core_algos.agg_loss``): where a test compares through one of them, its
tolerance is 1e-8 relative, the size of that term, and it says so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.utils import torch_functional as verl_F
from verl.workers.config import ActorConfig

from .cases import cases, close, largest_difference, log_prob_pair, prefix_mask, reference_loss, tensor

pytestmark = pytest.mark.parity

VERL_EPSILON = 1e-8  # the term verl adds to a count before dividing by it (see the module docstring)
MODES = {  # agg_loss mode -> (the reference's reduction, what the reference's value is multiplied by)
    "token-mean": ("token_mean", lambda rows, columns: 1.0),
    "seq-mean-token-mean": ("sequence_mean", lambda rows, columns: 1.0),
    "seq-mean-token-sum": ("sequence_sum_mean", lambda rows, columns: 1.0),
    "seq-mean-token-sum-norm": ("sequence_sum_mean", lambda rows, columns: 1.0 / columns),
    "token-sum": ("sequence_sum_mean", lambda rows, columns: float(rows)),
}


def actor_config(clip_ratio: float, **global_batch_info) -> ActorConfig:
    """verl's own actor configuration with a symmetric clip range (the reference has one ε)."""
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=clip_ratio,
                       clip_ratio_low=clip_ratio, clip_ratio_high=clip_ratio, global_batch_info=global_batch_info)


def _compressed(row: np.ndarray, mask_row: np.ndarray) -> np.ndarray:
    return row[mask_row.astype(bool)]


# ---- GAE over response tokens (§3) ---------------------------------------------------------------------------


def test_gae_on_response_tokens_is_the_reference_with_the_response_end_terminal(reference, ledger):
    """verl's recursion runs over a response's tokens with no bootstrap after the last one, and carries the value and
    the advantage across masked tokens: on the response tokens, its advantage before whitening (``returns -
    values``) is the reference's GAE of the response's tokens alone, the last one terminal; a masked token gets the
    advantage of the next response token; then the advantages are standardised over the batch's response tokens."""
    worst, worst_whitened = 0.0, 0.0
    for label, rng in cases("verl gae"):
        rows, columns = int(rng.integers(1, 7)), int(rng.integers(2, 16))
        mask = (rng.random((rows, columns)) < rng.uniform(0.3, 1.0)).astype(np.float64)
        mask[0, :2] = 1.0  # masked_whiten needs two response tokens
        rewards, values = rng.normal(size=(rows, columns)), rng.normal(0.0, 2.0, size=(rows, columns))
        gamma, lam = float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 1.0))
        advantages, returns = core_algos.compute_gae_advantage_return(tensor(rewards), tensor(values),
                                                                      tensor(mask), gamma, lam)
        before_whitening = (returns - tensor(values)).numpy()
        for row in range(rows):
            taken = np.flatnonzero(mask[row])
            if taken.size == 0:
                assert np.all(before_whitening[row] == 0.0), f"{label}: an empty row's advantages are 0 in verl"
                continue
            r, v = rewards[row, taken], values[row, taken]
            ends = np.zeros(taken.size, dtype=bool)
            ends[-1] = True
            expected = reference.gae_advantages(r, v, np.append(v[1:], 0.0), ends, ends, gamma, lam)
            worst = max(worst, largest_difference(before_whitening[row, taken], expected))
            assert close(before_whitening[row, taken], expected), (
                f"{label}, row {row}: verl's GAE on the response tokens differs from the reference's by "
                f"{largest_difference(before_whitening[row, taken], expected):.3g}")
            following = np.searchsorted(taken, np.arange(columns))  # the next response token at or after each
            carried = np.where(following < taken.size, np.append(expected, 0.0)[following], 0.0)
            assert close(before_whitening[row], carried), (
                f"{label}, row {row}: a masked token should carry the next response token's advantage")
        taken = mask.astype(bool)
        mean = before_whitening[taken].mean()
        variance = before_whitening[taken].var(ddof=1)
        standardised = (before_whitening - mean) / math.sqrt(variance + 1e-8)
        # masked_mean's count + 1e-8 moves the mean by |mean| 1e-8 / count: 1e-7 absolute covers it.
        worst_whitened = max(worst_whitened, largest_difference(advantages.numpy()[taken], standardised[taken]))
        assert close(advantages.numpy()[taken], standardised[taken], rtol=1e-7, atol=1e-7), (
            f"{label}: verl's advantages should be standardised over the response tokens (Bessel's variance, "
            f"+1e-8 inside the square root)")
    ledger.add("verl compute_gae_advantage_return (returns - values) vs gae_advantages per response", 300, worst,
               "equal")
    ledger.add("verl compute_gae_advantage_return advantages vs batch-standardised reference (rtol 1e-7)", 300,
               worst_whitened, "equal")


# ---- the vanilla policy loss and agg_loss (§4, §7) -----------------------------------------------------------


def _token_case(rng: np.random.Generator, spread: float, empty: float):
    rows, columns = int(rng.integers(1, 9)), int(rng.integers(1, 13))
    new, old = log_prob_pair(rng, (rows, columns), spread)
    advantages = rng.normal(size=rows)
    mask = prefix_mask(rng, rows, columns, empty=empty)
    return new, old, advantages, mask, float(rng.uniform(0.05, 0.4))


def _vanilla(new, old, advantages, mask, mode: str, config: ActorConfig):
    """verl's vanilla loss on per-token advantages, its metrics, and its gradient with respect to ``new``."""
    leaf = tensor(new, grad=True)
    token_advantages = tensor(np.repeat(advantages[:, None], new.shape[1], axis=1))
    loss, metrics = core_algos.compute_policy_loss_vanilla(tensor(old), leaf, token_advantages, tensor(mask),
                                                           loss_agg_mode=mode, config=config)
    loss.backward()
    return float(loss.detach()), metrics, leaf.grad


def _mode_tolerance(mode: str, new, old, advantages, mask, epsilon: float) -> dict[str, float]:
    """seq-mean-token-mean divides each row by n + 1e-8: each row's mean moves by 1e-8 of itself, and a row's mean
    is at most max |A| · max(r, 1 + ε) in size; so does each gradient, elementwise."""
    if mode == "seq-mean-token-mean":
        ratio = np.exp(new - old)[mask.astype(bool)]
        bound = float(np.max(np.abs(advantages))) * max(float(ratio.max(initial=1.0)), 1.0 + epsilon)
        return {"rtol": 2 * VERL_EPSILON, "atol": 2 * VERL_EPSILON * bound}
    return {"rtol": 1e-9, "atol": 1e-12}


@pytest.mark.parametrize("mode", list(MODES))
def test_vanilla_loss_with_the_global_batch_size_is_the_masked_token_objective(reference, ledger, mode):
    """With ``global_batch_info`` as the engine path passes it (the batch's token count and row count), every
    ``agg_loss`` mode is minus the reference's ``masked_token_ppo_objective`` with its reduction (``-norm`` divides
    by the response length, ``token-sum`` is ``B`` times the sum-mean), empty rows included, value and gradient.
    The log-ratios stay within ±1 here, so that neither the dual clip nor the ±20 clamp acts."""
    reduction, factor = MODES[mode]
    worst = 0.0
    for label, rng in cases(f"verl vanilla {mode}"):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=0.25)
        new = old + np.clip(new - old, -1.0, 1.0)
        if not mask.any():
            mask[0, 0] = 1.0  # a batch with no token at all is the next test's
        rows, columns = mask.shape
        config = actor_config(epsilon, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=rows)
        loss, _, gradient = _vanilla(new, old, advantages, mask, mode, config)
        expected, expected_gradient = reference_loss(reference, new, old, advantages, mask, epsilon, reduction)
        scale = factor(rows, columns)
        tolerance = _mode_tolerance(mode, new, old, advantages, mask, epsilon)
        worst = max(worst, abs(loss - scale * expected))
        assert close(loss, scale * expected, **tolerance), (
            f"{label}: verl's {mode} loss {loss!r} is not the reference's {reduction} loss x {scale} "
            f"({scale * expected!r})")
        assert close(gradient, scale * expected_gradient, **tolerance), (
            f"{label}: the gradient of verl's {mode} loss differs from the reference's by "
            f"{largest_difference(gradient, scale * expected_gradient):.3g}")
    ledger.add(f"verl vanilla policy loss {mode}, global batch info passed, vs {reduction}"
               + (" (tolerance 2e-8: n + 1e-8)" if mode == "seq-mean-token-mean" else ""), 300, worst, "equal")


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_seq_mean_modes_without_the_global_batch_size_differ_exactly_on_batches_with_an_empty_row(
        reference, ledger, mode):
    """Called without a global batch size, as on one process, verl divides the ``seq-mean-*`` modes by the number of
    rows that have a token, the reference by B: equal on a batch without an empty row; on one with, verl's loss is
    the reference's times B / (rows with a token); NaN (0/0) when no row has a token, where the reference gives 0."""
    reduction, factor = MODES[mode]
    counted = {"no empty row": 0, "an empty row": 0, "no token": 0}
    worst = 0.0
    for label, rng in cases(f"verl empty rows {mode}"):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=rng.choice([0.0, 0.4, 1.0]))
        new = old + np.clip(new - old, -1.0, 1.0)
        rows, columns = mask.shape
        loss, _, _ = _vanilla(new, old, advantages, mask, mode, actor_config(epsilon))
        expected, _ = reference_loss(reference, new, old, advantages, mask, epsilon, reduction)
        expected *= factor(rows, columns)
        filled = int(mask.any(axis=1).sum())
        tolerance = _mode_tolerance(mode, new, old, advantages, mask, epsilon)
        if filled == rows:
            counted["no empty row"] += 1
            worst = max(worst, abs(loss - expected))
            assert close(loss, expected, **tolerance), (
                f"{label}: without an empty row verl's {mode} loss {loss!r} should be the reference's {expected!r}")
        elif filled:
            counted["an empty row"] += 1
            assert close(loss, expected * rows / filled, **tolerance), (
                f"{label}: with {rows - filled} empty rows of {rows}, verl's {mode} loss {loss!r} should be the "
                f"reference's x {rows}/{filled} ({expected * rows / filled!r})")
            assert expected == 0.0 or not close(loss, expected), f"{label}: the two should differ here"
        else:
            counted["no token"] += 1
            assert math.isnan(loss) and expected == 0.0, (
                f"{label}: with no token at all verl gives {loss!r} (expected NaN), the reference {expected!r} (0)")
    assert min(counted.values()) >= 20, f"the cases should hold each kind of batch: {counted}"
    ledger.add(f"verl {mode} without global batch size ({counted['an empty row']} batches with an empty row, "
               f"{counted['no token']} with no token)", 300, worst,
               "convention: differs exactly on batches with an empty row (x B / filled rows; NaN on none)")


def test_token_mean_differs_only_on_a_batch_without_any_token(reference, ledger):
    """``token-mean`` divides by the batch's token count: NaN (0/0) when there is no token, where the reference
    gives 0; equal everywhere else, with or without the global batch size."""
    for label, rng in cases("verl token-mean empty", count=100):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=1.0)
        for config in (actor_config(epsilon), actor_config(epsilon, dp_size=1, batch_num_tokens=0,
                                                           global_batch_size=mask.shape[0])):
            loss, _, _ = _vanilla(new, old, advantages, mask, "token-mean", config)
            expected, _ = reference_loss(reference, new, old, advantages, mask, epsilon, "token_mean")
            assert math.isnan(loss) and expected == 0.0, (
                f"{label}: a batch without a token gives NaN in verl ({loss!r}) and 0 in the reference "
                f"({expected!r})")
    ledger.add("verl token-mean on a batch without a token", 100, 0.0, "convention: NaN in verl, 0 in the reference")


def test_the_guides_empty_row_example(reference):
    """GUIDE §7: B = 2, one empty row, a one-row objective of 1 at ratio 1: ``sequence_mean`` gives -0.5 in the
    reference, -1.0 in verl's fallback (up to its n + 1e-8) and -0.5 with the batch size passed."""
    zeros, mask, advantages = np.zeros((2, 1)), np.array([[1.0], [0.0]]), np.array([1.0, 0.0])
    fallback, _, _ = _vanilla(zeros, zeros, advantages, mask, "seq-mean-token-mean", actor_config(0.2))
    passed, _, _ = _vanilla(zeros, zeros, advantages, mask, "seq-mean-token-mean",
                            actor_config(0.2, dp_size=1, batch_num_tokens=1, global_batch_size=2))
    expected, _ = reference_loss(reference, zeros, zeros, advantages, mask, 0.2, "sequence_mean")
    assert close(expected, -0.5), f"the reference gives {expected!r}"
    assert close(fallback, -1.0, rtol=2 * VERL_EPSILON), f"verl without the batch size gives {fallback!r}"
    assert close(passed, -0.5, rtol=2 * VERL_EPSILON), f"verl with the batch size gives {passed!r}"


def test_dual_clip_and_log_ratio_clamp_differ_exactly_where_they_act(reference, ledger):
    """verl caps a negative advantage's per-token loss at ``clip_ratio_c · |A|`` (default 3) and clamps the log-ratio
    to ±20 before the exponential. Per token (through the gradient of the token-mean loss, which is per token):
    verl's equals the reference's except exactly at the tokens with A < 0 and r > clip_ratio_c (the dual clip) or
    A > 0 and log r < -20 (the clamp, where the min takes the unclipped branch), where verl's gradient is 0 and the
    reference's is not. The loss differs exactly when the batch holds such a token."""
    worst, differing = 0.0, 0
    for label, rng in cases("verl dual clip"):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=1.0, empty=0.1)
        far = rng.random(new.shape) < 0.05
        new = np.where(far, old + rng.choice([-1.0, 1.0], size=new.shape) * rng.uniform(19.0, 30.0, new.shape), new)
        if not mask.any():
            mask[0, 0] = 1.0
        loss, metrics, gradient = _vanilla(new, old, advantages, mask, "token-mean", actor_config(epsilon))
        expected, expected_gradient = reference_loss(reference, new, old, advantages, mask, epsilon, "token_mean")
        log_ratio, a = new - old, advantages[:, None]
        acts = mask.astype(bool) & (((a < 0) & (log_ratio > math.log(3.0))) | ((a > 0) & (log_ratio < -20.0)))
        same = np.isclose(gradient.numpy(), expected_gradient.numpy(), rtol=1e-9, atol=0.0)
        assert np.array_equal(~same, acts), (
            f"{label}: the gradients should differ exactly at the dual-clipped or clamped tokens "
            f"{np.argwhere(acts).tolist()}; they differ at {np.argwhere(~same).tolist()}")
        assert np.all(gradient.numpy()[acts] == 0.0), f"{label}: verl's gradient is 0 where its clip or clamp acts"
        if acts.any():
            differing += 1
            # The clamp's share can be as small as e^-20 |A| / N: only exact inequality is asked of the loss here.
            assert loss != expected, f"{label}: the losses should differ when a token is clipped or clamped"
        else:
            worst = max(worst, abs(loss - expected))
            assert close(loss, expected), f"{label}: verl's loss {loss!r} should be the reference's {expected!r}"
        dual = mask.astype(bool) & (a < 0) & (np.exp(np.clip(log_ratio, -20, 20)) * -a > 3.0 * -a)
        assert close(metrics["actor/pg_clipfrac_lower"], dual.sum() / mask.sum(), rtol=2 * VERL_EPSILON), (
            f"{label}: pg_clipfrac_lower should be the share of dual-clipped tokens")
    assert differing > 60, f"the cases should often hold a dual-clipped or clamped token; {differing} did"
    ledger.add(f"verl vanilla loss, dual clip and ±20 clamp, per token ({differing} cases with such a token)", 300,
               worst, "convention: differs exactly where the dual clip or the clamp acts")


def test_at_ratio_1_the_clipped_loss_has_the_reinforce_gradient(reference, ledger):
    """GUIDE §1: at ratio 1 (new = old) the gradient of verl's vanilla loss is the gradient of the reference's
    ``reinforce_surrogate_loss`` of the response tokens."""
    worst = 0.0
    for label, rng in cases("verl ratio one"):
        _, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=0.2)
        mask[0, 0] = 1.0
        _, _, gradient = _vanilla(old, old, advantages, mask, "token-mean", actor_config(epsilon))
        taken = mask.astype(bool)
        leaf = tensor(old[taken], grad=True)
        token_advantages = np.repeat(advantages[:, None], mask.shape[1], axis=1)
        reference.reinforce_surrogate_loss(leaf, tensor(token_advantages[taken])).backward()
        worst = max(worst, largest_difference(gradient.numpy()[taken], leaf.grad))
        assert close(gradient.numpy()[taken], leaf.grad), (
            f"{label}: at ratio 1 verl's gradient should be the REINFORCE surrogate's")
    ledger.add("verl vanilla loss gradient at ratio 1 vs reinforce_surrogate_loss gradient", 300, worst, "equal")


def test_the_guides_clip_fraction_example(reference):
    """GUIDE §4: r = 0.5, A = +1, ε = 0.2: the ratio-outside count gives 1.0, verl's ``pg_clipfrac`` (the reference's
    ``active_clip_fraction``) 0.0."""
    new, old, advantages, mask = np.log([[0.5]]), np.zeros((1, 1)), np.array([1.0]), np.ones((1, 1))
    _, metrics, _ = _vanilla(new, old, advantages, mask, "token-mean", actor_config(0.2))
    assert metrics["actor/pg_clipfrac"] == 0.0, f"verl's pg_clipfrac is {metrics['actor/pg_clipfrac']!r}"
    assert float(reference.active_clip_fraction(new, old, advantages[:, None], 0.2)) == 0.0, "active: 0.0"
    assert float(reference.ratio_outside_fraction(new, old, 0.2)) == 1.0, "ratio outside: 1.0"


def test_verl_runs_rloo_as_an_advantage_estimator_inside_a_one_epoch_ppo_actor():
    """GUIDE §8: ``algorithm.adv_estimator=rloo`` selects ``compute_rloo_outcome_advantage``; the actor's
    ``ppo_epochs`` defaults to 1."""
    assert core_algos.get_adv_estimator_fn("rloo") is core_algos.compute_rloo_outcome_advantage, (
        "adv_estimator 'rloo' should be compute_rloo_outcome_advantage")
    assert actor_config(0.2).ppo_epochs == 1, f"ppo_epochs defaults to {actor_config(0.2).ppo_epochs}"


def test_the_guides_dual_clip_example(reference):
    """GUIDE §4: one sequence with A = -1 and ratio e² on both tokens, ε = 0.2: 7.389 here, 3.0 in verl."""
    old, new, advantages, mask = np.zeros((1, 2)), np.full((1, 2), 2.0), np.array([-1.0]), np.ones((1, 2))
    loss, _, _ = _vanilla(new, old, advantages, mask, "token-mean", actor_config(0.2))
    expected, _ = reference_loss(reference, new, old, advantages, mask, 0.2, "token_mean")
    assert close(expected, math.exp(2.0)), f"the reference gives {expected!r}"
    assert close(loss, 3.0), f"verl gives {loss!r}"


def test_pg_clipfrac_is_the_active_clip_fraction_and_ppo_kl_is_k1(reference, ledger):
    """verl's ``pg_clipfrac`` counts the tokens where the clipped term wins, the reference's
    ``active_clip_fraction``; its ``ppo_kl`` is k1, mean(old - new) over the response tokens: minus the mean of
    the reference's ``sequence_log_probability_ratio``, which can be negative, where the reference's k3
    (``approximate_kl``) never is. Both through ``masked_mean`` (rtol 2e-8)."""
    worst, negative = 0.0, 0
    for label, rng in cases("verl metrics"):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=0.1)
        if not mask.any():
            mask[0, 0] = 1.0
        _, metrics, _ = _vanilla(new, old, advantages, mask, "token-mean", actor_config(epsilon))
        taken = mask.astype(bool)
        token_advantages = np.repeat(advantages[:, None], mask.shape[1], axis=1)
        active = float(reference.active_clip_fraction(new[taken], old[taken], token_advantages[taken], epsilon))
        k1 = -float(reference.sequence_log_probability_ratio(new, old, mask).sum()) / mask.sum()
        k3 = float(reference.approximate_kl(new[taken], old[taken]))
        worst = max(worst, abs(metrics["actor/pg_clipfrac"] - active), abs(metrics["actor/ppo_kl"] - k1))
        assert close(metrics["actor/pg_clipfrac"], active, rtol=2 * VERL_EPSILON), (
            f"{label}: pg_clipfrac {metrics['actor/pg_clipfrac']!r} is not active_clip_fraction {active!r}")
        assert close(metrics["actor/ppo_kl"], k1, rtol=2 * VERL_EPSILON, atol=1e-15), (
            f"{label}: ppo_kl {metrics['actor/ppo_kl']!r} is not k1 = mean(old - new) = {k1!r}")
        assert k3 >= 0.0 and (k1 != k3), f"{label}: k1 {k1!r} and k3 {k3!r} are different estimators"
        negative += metrics["actor/ppo_kl"] < 0
    assert negative > 30, f"k1 should be negative in some cases; it was in {negative}"
    ledger.add("verl pg_clipfrac vs active_clip_fraction; ppo_kl vs k1 from sequence_log_probability_ratio", 300,
               worst, f"equal (k1, negative in {negative} cases, is not the reference's k3)")


# ---- kl_penalty (§4) -----------------------------------------------------------------------------------------


def test_low_var_kl_is_approximate_kl_with_the_roles_swapped_except_at_its_clamps(reference, ledger):
    """``kl_penalty(logprob, ref_logprob, "low_var_kl")`` (and ``"k3"``) is ``approximate_kl(ref_logprob,
    logprob)`` per token, except exactly where verl's clamps act: |ref - logprob| > 20, or the estimate above 10."""
    worst, clamped = 0.0, 0
    for label, rng in cases("verl low_var_kl", count=100):
        size = int(rng.integers(1, 40))
        logprob = np.log(rng.uniform(1e-3, 1.0, size))
        ref = logprob + rng.normal(0.0, 1.0, size) * rng.choice([0.1, 1.0, 5.0, 25.0], size)
        k3 = core_algos.kl_penalty(tensor(logprob), tensor(ref), "low_var_kl").numpy()
        assert np.array_equal(k3, core_algos.kl_penalty(tensor(logprob), tensor(ref), "k3").numpy()), (
            f"{label}: 'k3' is another name of 'low_var_kl'")
        expected = np.array([float(reference.approximate_kl(ref[i:i + 1], logprob[i:i + 1])) for i in range(size)])
        acts = (np.abs(ref - logprob) > 20.0) | (expected > 10.0)
        same = np.isclose(k3, expected, rtol=1e-9, atol=1e-15)
        assert np.array_equal(~same, acts), (
            f"{label}: low_var_kl should differ from approximate_kl(ref, logprob) exactly where a clamp acts "
            f"({np.flatnonzero(acts).tolist()}); it differs at {np.flatnonzero(~same).tolist()}")
        worst = max(worst, largest_difference(k3[~acts], expected[~acts]))
        clamped += int(acts.sum())
    assert clamped > 50, f"the cases should reach verl's clamps; {clamped} tokens did"
    ledger.add(f"verl kl_penalty low_var_kl/k3 vs approximate_kl(ref, logprob), per token ({clamped} clamped)",
               100, worst, "equal except exactly where its clamps (±20, ≤10) act")


def test_k1_is_the_per_token_log_ratio_and_the_other_modes_are_their_aliases(reference, ledger):
    """``"k1"``/``"kl"`` is ``logprob - ref``, whose sum over a response is the reference's
    ``sequence_log_probability_ratio(logprob, ref, mask)``; ``"k2"``/``"mse"`` and the pairs are one estimator
    under two names; ``"k3+"`` has k3's value."""
    worst = 0.0
    for label, rng in cases("verl kl modes", count=100):
        rows, columns = int(rng.integers(1, 6)), int(rng.integers(1, 10))
        logprob, ref = log_prob_pair(rng, (rows, columns), spread=0.5)
        mask = prefix_mask(rng, rows, columns, empty=0.2)
        penalty = {name: core_algos.kl_penalty(tensor(logprob), tensor(ref), name).numpy()
                   for name in ("k1", "kl", "k2", "mse", "k3", "low_var_kl", "k3+")}
        summed = (penalty["k1"] * mask).sum(axis=1)
        expected = reference.sequence_log_probability_ratio(logprob, ref, mask)
        worst = max(worst, largest_difference(summed, expected))
        assert close(summed, expected), f"{label}: k1 summed over a response is the sequence log-ratio"
        for one, other in (("k1", "kl"), ("k2", "mse"), ("k3", "low_var_kl"), ("k3", "k3+")):
            assert np.array_equal(penalty[one], penalty[other]), f"{label}: {one!r} and {other!r} differ in value"
    ledger.add("verl kl_penalty k1 summed over the mask vs sequence_log_probability_ratio", 100, worst, "equal")


def test_the_actors_kl_loss_type_defaults_to_low_var_kl():
    """GUIDE §4: the actor's ``kl_loss_type`` defaults to ``low_var_kl``."""
    assert actor_config(0.2).kl_loss_type == "low_var_kl", f"got {actor_config(0.2).kl_loss_type!r}"


# ---- outcome advantages (§2) ---------------------------------------------------------------------------------


def _groups(rng: np.random.Generator, singles: bool):
    """Rewards of groups of 2 to 6 (and of 1 if ``singles``), in shuffled rows, with their index array."""
    sizes = rng.integers(1 if singles else 2, 7, size=int(rng.integers(1, 6)))
    index = np.concatenate([[f"prompt-{k}"] * int(size) for k, size in enumerate(sizes)]).astype(object)
    order = rng.permutation(index.size)
    rewards = rng.normal(size=index.size) * rng.choice([0.0, 1.0], size=index.size, p=[0.1, 0.9])
    return rewards[order], index[order], sizes


def _outcome(function, rewards: np.ndarray, index: np.ndarray, columns: int, rng, **options) -> np.ndarray:
    """verl's outcome advantage of rewards placed on each response's last token: one scalar per response."""
    mask = np.zeros((rewards.size, columns))
    lengths = rng.integers(1, columns + 1, size=rewards.size)
    mask[np.arange(columns)[None, :] < lengths[:, None]] = 1.0
    token_rewards = np.zeros_like(mask)
    token_rewards[np.arange(rewards.size), lengths - 1] = rewards
    advantages, _ = function(tensor(token_rewards), tensor(mask), index, **options)
    advantages = advantages.numpy()
    assert np.array_equal(advantages, advantages[:, :1] * mask), "verl broadcasts one advantage over the mask"
    return advantages[:, 0]


def _per_group(function, rewards: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The reference's ``function`` of ``[1, G]`` for each group, back in the rows' order."""
    result = np.zeros_like(rewards)
    for name in dict.fromkeys(index):
        rows = np.flatnonzero(index == name)
        result[rows] = function(rewards[rows][None, :])[0]
    return result


@pytest.mark.parametrize("vectorised", [False, True], ids=["loop", "vectorised"])
@pytest.mark.parametrize("norm", [True, False], ids=["std", "no_std"])
def test_grpo_advantage_is_the_group_mean_divided_by_the_bessel_std_plus_1e_6(reference, ledger, norm, vectorised):
    """verl's GRPO advantage is the reference's ``group_mean_advantages`` divided by the group's standard deviation
    with Bessel's correction plus 1e-6; with ``norm_adv_by_std_in_grpo=False`` (Dr. GRPO) it is
    ``group_mean_advantages`` itself. The vectorised version computes its statistics in float32
    (``verl/utils/groupwise.py``, about 7 significant digits, fewer once divided by a small std): compared at 1e-5
    there."""
    function = (core_algos.compute_grpo_vectorized_outcome_advantage if vectorised
                else core_algos.compute_grpo_outcome_advantage)
    worst = 0.0
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if vectorised else {"rtol": 1e-9, "atol": 1e-12}
    for label, rng in cases(f"verl grpo {norm} {vectorised}"):
        rewards, index, _ = _groups(rng, singles=False)
        verl = _outcome(function, rewards, index, int(rng.integers(1, 6)), rng, norm_adv_by_std_in_grpo=norm)
        centred = _per_group(reference.group_mean_advantages, rewards, index)
        expected = centred.copy()
        if norm:
            for name in dict.fromkeys(index):
                rows = np.flatnonzero(index == name)
                std = math.sqrt((centred[rows] ** 2).sum() / (rows.size - 1))
                expected[rows] = centred[rows] / (std + 1e-6)
        worst = max(worst, largest_difference(verl, expected))
        assert close(verl, expected, **tolerance), (
            f"{label}: verl's GRPO advantages differ from the reference's by {largest_difference(verl, expected):.3g}")
    name = "compute_grpo_vectorized_outcome_advantage" if vectorised else "compute_grpo_outcome_advantage"
    ledger.add(f"verl {name}(norm={norm}) vs group_mean_advantages" + (" / (std + 1e-6)" if norm else ""), 300,
               worst, "equal" + (" (float32 statistics)" if vectorised else ""))


@pytest.mark.parametrize("vectorised", [False, True], ids=["loop", "vectorised"])
def test_rloo_advantage_is_the_reference_on_groups_of_two_or_more(reference, ledger, vectorised):
    """verl's two RLOO advantages (``G/(G-1)·(r_i - mean)`` in the loop, sums and counts in the vectorised one) are
    the reference's ``rloo_advantages`` on every group of two or more, in any row order."""
    function = (core_algos.compute_rloo_vectorized_outcome_advantage if vectorised
                else core_algos.compute_rloo_outcome_advantage)
    worst = 0.0
    for label, rng in cases(f"verl rloo {vectorised}"):
        rewards, index, _ = _groups(rng, singles=False)
        verl = _outcome(function, rewards, index, int(rng.integers(1, 6)), rng)
        expected = _per_group(reference.rloo_advantages, rewards, index)
        worst = max(worst, largest_difference(verl, expected))
        assert close(verl, expected), (
            f"{label}: verl's RLOO advantages differ from the reference's by {largest_difference(verl, expected):.3g}")
    name = "compute_rloo_vectorized_outcome_advantage" if vectorised else "compute_rloo_outcome_advantage"
    ledger.add(f"verl {name} vs rloo_advantages", 300, worst, "equal")


def test_groups_of_one_are_where_verl_and_the_reference_part(reference, ledger):
    """On a group of one: verl's GRPO takes mean 0 and std 1 (r / (1 + 1e-6), the sum taken in float32 since verl's
    std is a float32 tensor there: rtol 1e-6), the reference's same-group centring
    gives 0; verl's RLOO loop leaves r, its vectorised RLOO gives 0, and the reference's ``rloo_advantages``
    refuses the group (``ValueError``). On the other groups of the same batch, nothing changes."""
    singles_seen = 0
    for label, rng in cases("verl singletons"):
        rewards, index, _ = _groups(rng, singles=True)
        columns = 3
        single = np.array([np.sum(index == name) == 1 for name in index])
        singles_seen += int(single.sum())
        grpo = _outcome(core_algos.compute_grpo_outcome_advantage, rewards, index, columns, rng)
        loop = _outcome(core_algos.compute_rloo_outcome_advantage, rewards, index, columns, rng)
        vectorised = _outcome(core_algos.compute_rloo_vectorized_outcome_advantage, rewards, index, columns, rng)
        centred = _per_group(reference.group_mean_advantages, rewards, index)
        assert close(grpo[single], rewards[single] / (1 + 1e-6), rtol=1e-6), (
            f"{label}: verl's GRPO keeps r / (1 + 1e-6)")
        assert np.all(centred[single] == 0.0), f"{label}: the reference's same-group centring gives 0"
        assert close(loop[single], rewards[single]), f"{label}: verl's RLOO loop leaves r as it is"
        assert np.all(vectorised[single] == 0.0), f"{label}: verl's vectorised RLOO gives 0"
        if single.any():
            with pytest.raises(ValueError):
                reference.rloo_advantages(rewards[single][:1][None, :])
        others = ~single
        if others.any():
            expected = _per_group(reference.rloo_advantages, rewards[others], index[others])
            assert close(loop[others], expected) and close(vectorised[others], expected), (
                f"{label}: the groups of two or more keep the reference's RLOO advantages")
    assert singles_seen > 100, f"the cases should hold groups of one; they held {singles_seen}"
    ledger.add(f"verl GRPO/RLOO on groups of one ({singles_seen} singletons)", 300, 0.0,
               "convention: differs exactly on groups of one")


def test_the_guides_group_of_one_example():
    """GUIDE §2: a group of one with reward 3.0 keeps 2.999997 in verl's GRPO (3 / float32(1 + 1e-6))."""
    advantages, _ = core_algos.compute_grpo_outcome_advantage(tensor([[3.0]]), tensor([[1.0]]), np.array([0]))
    assert round(float(advantages), 6) == 2.999997, f"verl's GRPO gives {float(advantages)!r}"


# ---- the value loss (§4) -------------------------------------------------------------------------------------


def test_value_loss_is_the_reference_over_the_response_tokens(reference, ledger):
    """``compute_value_loss`` is ½ · token-mean of the max of the two squared errors: the reference's
    ``clipped_value_loss`` over the response tokens, value and gradient."""
    worst = 0.0
    for label, rng in cases("verl value loss"):
        rows, columns = int(rng.integers(1, 7)), int(rng.integers(1, 10))
        mask = prefix_mask(rng, rows, columns, empty=0.2)
        mask[0, 0] = 1.0
        old_values = rng.normal(0.0, 2.0, size=(rows, columns))
        values = old_values + rng.normal(0.0, 0.5, size=(rows, columns))
        returns = old_values + rng.normal(0.0, 1.0, size=(rows, columns))
        epsilon = float(rng.uniform(0.05, 1.0))
        leaf = tensor(values, grad=True)
        loss, _ = core_algos.compute_value_loss(leaf, tensor(returns), tensor(old_values), tensor(mask), epsilon)
        loss.backward()
        taken = mask.astype(bool)
        expected_leaf = tensor(values[taken], grad=True)
        expected = reference.clipped_value_loss(expected_leaf, tensor(old_values[taken]), tensor(returns[taken]),
                                                epsilon)
        expected.backward()
        worst = max(worst, abs(float(loss.detach()) - float(expected.detach())))
        assert close(loss, expected), f"{label}: verl's value loss {loss.item()!r} is not {expected.item()!r}"
        assert close(leaf.grad.numpy()[taken], expected_leaf.grad), f"{label}: the value-loss gradients differ"
        assert np.all(leaf.grad.numpy()[~taken] == 0.0), f"{label}: no gradient reaches a masked token"
    ledger.add("verl compute_value_loss vs clipped_value_loss on response tokens", 300, worst, "equal")


# ---- the GPG loss and REINFORCE++ returns (§1) ---------------------------------------------------------------


def test_gpg_policy_loss_is_the_reinforce_surrogate_over_the_response_tokens(reference, ledger):
    """verl's ``"gpg"`` loss, ``-log_prob · advantages`` aggregated over tokens, is the reference's
    ``reinforce_surrogate_loss`` of the response tokens, value and gradient."""
    worst = 0.0
    for label, rng in cases("verl gpg"):
        new, old, advantages, mask, epsilon = _token_case(rng, spread=0.3, empty=0.2)
        mask[0, 0] = 1.0
        token_advantages = np.repeat(advantages[:, None], mask.shape[1], axis=1)
        leaf = tensor(new, grad=True)
        loss, _ = core_algos.compute_policy_loss_gpg(tensor(old), leaf, tensor(token_advantages), tensor(mask),
                                                     config=actor_config(epsilon))
        loss.backward()
        taken = mask.astype(bool)
        expected_leaf = tensor(new[taken], grad=True)
        expected = reference.reinforce_surrogate_loss(expected_leaf, tensor(token_advantages[taken]))
        expected.backward()
        worst = max(worst, abs(float(loss.detach()) - float(expected.detach())))
        assert close(loss, expected), f"{label}: verl's gpg loss {loss.item()!r} is not {expected.item()!r}"
        assert close(leaf.grad.numpy()[taken], expected_leaf.grad), f"{label}: the gpg gradients differ"
    ledger.add("verl compute_policy_loss_gpg vs reinforce_surrogate_loss", 300, worst, "equal")


def test_reinforce_plus_plus_returns_are_the_discounted_reward_to_go_of_each_response(reference, ledger):
    """``compute_reinforce_plus_plus_outcome_advantage``'s returns are the reference's ``discounted_reward_to_go``
    over each response's tokens, restarting where the response ends (before its whitening into advantages)."""
    worst = 0.0
    for label, rng in cases("verl reinforce++"):
        rows, columns = int(rng.integers(1, 6)), int(rng.integers(2, 12))
        mask = prefix_mask(rng, rows, columns, empty=0.1)
        mask[0, :2] = 1.0
        rewards, gamma = rng.normal(size=(rows, columns)), float(rng.uniform(0.0, 1.0))
        _, returns = core_algos.compute_reinforce_plus_plus_outcome_advantage(
            tensor(rewards), tensor(mask), config=AlgoConfig(gamma=gamma))
        ends = np.zeros((columns, rows), dtype=bool)  # time-major, each response's last token ends its episode
        lengths = mask.sum(axis=1).astype(int)
        ends[np.maximum(lengths - 1, 0), np.arange(rows)] = True
        expected = reference.discounted_reward_to_go((rewards * mask).T, ends, gamma).T * mask
        worst = max(worst, largest_difference(returns, expected))
        assert close(returns, expected), (
            f"{label}: REINFORCE++ returns differ from the reward-to-go by {largest_difference(returns, expected):.3g}")
    ledger.add("verl reinforce_plus_plus returns vs discounted_reward_to_go per response", 300, worst, "equal")


# ---- the entropy (§4) ----------------------------------------------------------------------------------------


def test_entropy_from_logits_is_the_reference_for_finite_logits_and_nan_at_minus_infinity(reference, ledger):
    """verl's ``entropy_from_logits`` (``logsumexp(z) - Σ softmax(z)·z``) equals the reference's
    ``categorical_entropy`` on finite logits, and is NaN, in value and gradient, exactly on the rows with a logit of
    -∞, where the reference's is finite."""
    worst, infinite = 0.0, 0
    for label, rng in cases("verl entropy"):
        rows, actions = int(rng.integers(1, 8)), int(rng.integers(2, 12))
        logits = rng.normal(0.0, rng.choice([0.1, 1.0, 10.0]), size=(rows, actions))
        logits[rng.random((rows, actions)) < 0.05] = -math.inf
        logits[:, 0] = np.where(np.isinf(logits).all(axis=1), 0.0, logits[:, 0])
        leaf = tensor(logits, grad=True)
        entropy = verl_F.entropy_from_logits(leaf)
        entropy.sum().backward()
        verl = entropy.detach().numpy()
        expected = reference.categorical_entropy(logits)
        has_infinity = np.isinf(logits).any(axis=1)
        infinite += int(has_infinity.sum())
        assert np.array_equal(np.isnan(leaf.grad.numpy()).any(axis=1), has_infinity), (
            f"{label}: verl's entropy gradient should be NaN exactly on the rows with -inf")
        assert np.array_equal(np.isnan(verl), has_infinity), (
            f"{label}: verl's entropy should be NaN exactly on the rows with -inf; NaN at "
            f"{np.flatnonzero(np.isnan(verl)).tolist()}, -inf in {np.flatnonzero(has_infinity).tolist()}")
        assert np.all(np.isfinite(expected)), f"{label}: the reference's entropy is finite"
        worst = max(worst, largest_difference(verl[~has_infinity], expected[~has_infinity]))
        assert close(verl[~has_infinity], expected[~has_infinity], atol=1e-12), (
            f"{label}: on finite logits verl's entropy differs from the reference's by "
            f"{largest_difference(verl[~has_infinity], expected[~has_infinity]):.3g}")
    ledger.add(f"verl entropy_from_logits vs categorical_entropy ({infinite} rows with -inf)", 300, worst,
               "equal on finite logits; NaN exactly at -inf")
