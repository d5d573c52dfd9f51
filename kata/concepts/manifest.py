"""The kata's manifest: the eight concepts in teaching order, and everything the tools know about them.

One source feeds the command line (`kata list`, `kata hint`, `kata status`), the grader (points), the packages'
public names (`exercises/__init__.py`, `solutions/__init__.py`), the pytest markers, the mistake catalogue check
and the study guide's numbering. Concept number ``i`` is GUIDE.md section ``§i``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """A wrong implementation kept in ``mistakes/<concept>/<name>.py``; the concept's tests must catch it."""

    name: str
    misunderstanding: str
    hint: int  # the level of `kata hint <concept>` that addresses it (1-based)


@dataclass(frozen=True)
class Variant:
    """A valid implementation kept in ``variants/<concept>/<name>.py``; every test of the concept must pass on it."""

    name: str
    description: str


@dataclass(frozen=True)
class Concept:
    number: int
    name: str  # module name in exercises/ and solutions/, and the pytest marker
    title: str
    points: float
    summary: str
    exports: tuple[str, ...]  # public names the concept module defines; the package re-exports them
    hints: tuple[str, ...]  # from a gentle nudge to nearly the answer
    mistakes: tuple[Mistake, ...]
    variants: tuple[Variant, ...] = ()

    @property
    def marker(self) -> str:
        return self.name

    @property
    def guide_section(self) -> str:
        return f"GUIDE.md §{self.number}"

    @property
    def guide_heading(self) -> str:
        """The concept's heading in GUIDE.md."""
        return f"{self.number}. {self.title}"

    @property
    def guide_anchor(self) -> str:
        """The heading's anchor as GitHub renders it (lower case, punctuation dropped, spaces to hyphens)."""
        slug = re.sub(r"[^\w\- ]", "", self.guide_heading.lower())
        return slug.replace(" ", "-")


CONCEPTS: tuple[Concept, ...] = (
    Concept(
        number=1,
        name="reinforce",
        title="REINFORCE: the score-function estimator and the detach contract",
        points=10,
        summary="A surrogate loss whose gradient is the policy gradient; advantages enter as constants.",
        exports=("reinforce_surrogate_loss", "discounted_reward_to_go", "categorical_entropy"),
        hints=(
            "The loss is not the objective: it is any scalar whose gradient equals the REINFORCE estimate. "
            "Start from grad E[R] = E[grad log pi(a|s) * A].",
            "Multiply log-probabilities by advantages and average. Which of the two may carry gradient?",
            "Advantages are constants for the policy step: use `advantages.detach()` even if the caller "
            "forgot, then return `-(log_probs * advantages).mean()`.",
            "Reward-to-go runs backwards: G_t = r_t + gamma * G_{t+1}, and G_{t+1} is reset to 0 after a step "
            "that ends an episode.",
            "Entropy: log_p = torch.log_softmax(logits, dim=-1), never log(softmax(...)); then sum -exp(log_p) * "
            "log_p over the last axis, with log_p clamped to a finite minimum so that p = 0 adds exactly 0.",
        ),
        mistakes=(
            Mistake("advantages_not_detached", "gradient flows into the advantages, so a critic would be "
                    "trained by the policy loss", hint=3),
            Mistake("loss_sign_flipped", "the loss is +mean(log pi * A): minimising it lowers the probability of "
                    "good actions", hint=3),
            Mistake("reward_to_go_ignores_episode_ends", "returns leak from one episode into the previous one", hint=4),
            Mistake("entropy_of_probabilities_not_logits", "entropy computed as if the logits were "
                    "probabilities", hint=5),
            Mistake("reward_to_go_not_discounted", "reward-to-go ignores gamma: every discount behaves like 1", hint=4),
            Mistake("entropy_log_of_softmax", "entropy from log(softmax(z)): NaN once a probability underflows "
                    "to 0", hint=5),
            Mistake("entropy_over_wrong_axis", "softmax and sum over the batch axis instead of the action axis",
                    hint=5),
        ),
        variants=(
            Variant("float64_loss_cast_back", "the surrogate loss summed in float64 and cast back"),
            Variant("numpy_reward_to_go", "reward-to-go on a NumPy path for NumPy input, into a fresh buffer"),
            Variant("torch_distributions_entropy", "entropy from torch.distributions.Categorical"),
            Variant("vectorised_reward_to_go", "reward-to-go as one matrix product, no Python loop"),
        ),
    ),
    Concept(
        number=2,
        name="baselines",
        title="Baselines: no baseline, the same-group mean, and RLOO",
        points=10,
        summary="Group baselines change variance; the same-group mean also scales the gradient by (G-1)/G.",
        exports=(
            "no_baseline_advantages",
            "group_mean_advantages",
            "rloo_advantages",
            "simulate_group_baseline_bias",
        ),
        hints=(
            "Rewards come shaped [groups, G]: every row is one prompt's group of G sampled responses. "
            "Baselines never mix rows.",
            "The same-group mean includes r_i in its own baseline; RLOO averages the other G - 1 rewards only.",
            "RLOO: b_i = (sum(r) - r_i) / (G - 1), so A_i = r_i - b_i = G/(G-1) * (r_i - mean(r)).",
            "The simulation: draw each sample's score s ~ N(0, 1) and reward r = c + s + noise, so the true "
            "gradient E[s * r] is 1. Average s * A within each group, then take the mean and std over groups.",
        ),
        mistakes=(
            Mistake("rloo_includes_self", "the sample is included in its own baseline: that is the same-group "
                    "mean, not leave-one-out", hint=2),
            Mistake("groups_along_wrong_axis", "groups formed along the batch axis instead of within each row "
                    "of [groups, G]", hint=1),
            Mistake("rloo_divides_by_group_size", "the leave-one-out mean divided by G instead of G - 1", hint=3),
            Mistake("simulation_scale_not_measured", "the simulation reports the predicted (G-1)/G instead of "
                    "measuring the observed scale", hint=4),
        ),
        variants=(
            Variant("fresh_buffer_no_baseline", "the rewards copied row by row into a fresh buffer"),
            Variant("loo_baseline_by_masked_mean", "the leave-one-out baseline as a product with (1 - I) / (G - 1)"),
            Variant("numpy_group_mean", "same-group centring on a NumPy path for NumPy input"),
            Variant("rloo_as_scaled_centring", "RLOO as G / (G - 1) times the same-group centred rewards"),
        ),
    ),
    Concept(
        number=3,
        name="gae",
        title="GAE with two masks: bootstrap and trace cuts",
        points=15,
        summary="`terminated` decides whether to bootstrap; `trace_cuts` decides whether the recursion goes on.",
        exports=("gae_advantages",),
        hints=(
            "Two different questions: may this record bootstrap from V(next state)? may the backward recursion "
            "carry the next record's advantage into this one?",
            "delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t). Use next_values, never values[t+1].",
            "Walk t from the end: A_t = delta_t + gamma * lambda * (1 - trace_cuts_t) * A_{t+1}.",
            "Work on 1-D [T] and time-major [T, N] alike by running the recursion over axis 0; return the "
            "same kind of array you were given.",
        ),
        mistakes=(
            Mistake("truncation_as_termination", "a record cut by a time limit or the buffer end is treated as "
                    "terminal: no bootstrap from V(next state)", hint=2),
            Mistake("bootstraps_from_terminal", "a terminated record still bootstraps from next_values", hint=2),
            Mistake("recursion_leaks_across_cuts", "the backward recursion continues across a trace cut", hint=3),
            Mistake("recursion_cut_by_terminated_only", "only `terminated` stops the recursion, so it leaks "
                    "across truncations and buffer ends", hint=3),
            Mistake("next_values_from_values_shift", "V(s_{t+1}) taken from values[t + 1] instead of "
                    "next_values, which is wrong at every cut", hint=2),
            Mistake("lambda_not_applied", "the recursion decays by gamma only, ignoring lambda", hint=3),
        ),
        variants=(
            Variant("discount_matrix", "GAE as one matrix product of the TD residuals, no Python loop"),
            Variant("float64_cast_back", "GAE in float64, cast back to the inputs' dtype"),
            Variant("numpy_buffer", "GAE on a NumPy path for NumPy input, into a fresh buffer"),
        ),
    ),
    Concept(
        number=4,
        name="clipped_surrogate",
        title="PPO's clipped objectives and diagnostics",
        points=15,
        summary="The pessimistic clipped surrogate, the clipped value loss, the entropy bonus and the "
                "diagnostics (non-negative approximate KL, active clip fraction, ratio-outside fraction).",
        exports=(
            "clipped_surrogate_terms",
            "clipped_policy_loss",
            "clipped_value_loss",
            "ppo_loss",
            "approximate_kl",
            "active_clip_fraction",
            "ratio_outside_fraction",
        ),
        hints=(
            "The ratio is exp(new_log_probs - old_log_probs); old log-probs are data, not parameters.",
            "unclipped = r * A, clipped = clip(r, 1 - eps, 1 + eps) * A, pessimistic = min(unclipped, clipped). "
            "Clip the ratio, never the advantage.",
            "The value loss takes the max of the two squared errors, and the clipped prediction is "
            "V_old + clip(V - V_old, -eps, eps): the clip is around the OLD value.",
            "approx KL = mean((r - 1) - log r) is >= 0 for every sample. The clip is active where the clipped "
            "branch is the smaller one and differs from the unclipped: A > 0 and r > 1 + eps, or A < 0 and "
            "r < 1 - eps.",
            "The total: policy_loss + value_coefficient * value_loss - entropy_coefficient * entropy.mean(). "
            "Entropy is a bonus, so it is subtracted from a loss that is minimised.",
        ),
        mistakes=(
            Mistake("max_instead_of_min", "the optimistic max of the two branches instead of the pessimistic "
                    "min", hint=2),
            Mistake("policy_loss_sign_flipped", "the policy loss is +mean(pessimistic): minimising it lowers the "
                    "objective", hint=2),
            Mistake("advantage_clipped_not_ratio", "the advantage is clipped instead of the probability ratio", hint=2),
            Mistake("value_clip_around_returns", "the value prediction is clipped around the returns instead of "
                    "the old values", hint=3),
            Mistake("value_loss_min_not_max", "min of the two value losses instead of max", hint=3),
            Mistake("entropy_bonus_sign_flipped", "the entropy term is added to the loss, so minimising it "
                    "lowers entropy", hint=5),
            Mistake("entropy_never_added", "the entropy bonus is computed and never added to the loss", hint=5),
            Mistake("kl_k1_can_go_negative", "the k1 estimate mean(old - new log-probs) reported as a "
                    "non-negative KL", hint=4),
            Mistake("clip_fraction_counts_ratio_outside", "the active clip fraction counts |r - 1| > eps, "
                    "whatever the advantage's sign", hint=4),
            Mistake("old_log_probs_not_detached", "gradient flows into the old log-probabilities, which are data "
                    "recorded before the update", hint=1),
            Mistake("ratio_outside_counts_log_ratio", "the ratio-outside fraction tests |log r| > eps instead of "
                    "|r - 1| > eps", hint=4),
            Mistake("kl_ratio_inverted", "the k3 estimator with old/new instead of new/old: non-negative, but "
                    "not an estimate of KL(old || new) under the old policy's samples", hint=4),
        ),
        variants=(
            Variant("approx_kl_from_ratio", "CleanRL's ((ratio - 1) - logratio).mean(), without expm1"),
            Variant("cleanrl_max_of_negatives", "CleanRL's policy loss max(-A r, -A clip(r)).mean()"),
            Variant("cleanrl_ratio_outside_fraction",
                    "CleanRL's ((ratio - 1).abs() > eps).float().mean(): a float32 fraction"),
            Variant("float64_terms_cast_back", "the four surrogate terms in float64, cast back"),
            Variant("value_loss_by_where", "the clipped value prediction chosen by torch.where instead of clamp"),
        ),
    ),
    Concept(
        number=5,
        name="ppo_cartpole",
        title="Complete PPO on CartPole",
        points=15,
        summary="Environment flags into the two GAE masks, and the PPO update: shuffled minibatch epochs, "
                "clipped losses, entropy, gradient-norm clipping and diagnostics.",
        exports=("gae_masks", "bootstrap_values", "minibatch_indices", "ppo_update",
                 "profile_config", "train_ppo", "aggregate_training_runs"),
        hints=(
            "Three flags, two masks: terminated says whether to bootstrap; terminated OR truncated OR the "
            "rollout's last step says where the recursion stops.",
            "At an autoreset the next observation is the new episode's first: bootstrap a truncated step from "
            "V(final observation), never from V(reset observation).",
            "One epoch is one permutation of all sample indices cut into minibatches: every sample once.",
            "Compute old log-probs and values once, before the epochs, and never recompute them inside the "
            "update; clip the gradient norm after backward() and before step().",
        ),
        mistakes=(
            Mistake("truncation_as_termination", "truncation at the time limit treated as termination: no "
                    "bootstrap", hint=1),
            Mistake("bootstrap_from_reset_observation", "a truncated step bootstraps from the next episode's "
                    "reset observation", hint=2),
            Mistake("buffer_end_not_a_cut", "the rollout buffer's last step does not cut the trace", hint=1),
            Mistake("minibatches_with_replacement", "minibatches drawn with replacement: samples repeat or are "
                    "skipped within an epoch", hint=3),
            Mistake("old_log_probs_recomputed", "old log-probs recomputed inside the update: the ratio is stuck "
                    "at 1", hint=4),
            Mistake("entropy_bonus_sign_flipped", "entropy with the wrong sign in the update's loss", hint=4),
            Mistake("no_gradient_clipping", "the gradient norm is not clipped", hint=4),
        ),
        variants=(
            Variant("argsort_permutation", "the epoch's permutation as argsort of uniform noise"),
            Variant("cleanrl_policy_loss", "CleanRL's policy loss max(-A r, -A clip(r)) inside the update"),
            Variant("float64_masks", "the GAE masks and bootstrap values in float64 arithmetic, cast back"),
            Variant("numpy_permutation", "each epoch's permutation drawn by NumPy from a seed taken off the generator"),
        ),
    ),
    Concept(
        number=6,
        name="response_masks",
        title="Response masks and the causal shift",
        points=10,
        summary="A 0/1 mask aligned with the labels input_ids[:, 1:], and token log-probs gathered with the "
                "causal shift.",
        exports=("response_token_mask", "token_log_probs"),
        hints=(
            "Logits at position t predict token t + 1: the labels are input_ids[:, 1:], so every mask and "
            "log-prob has T - 1 columns.",
            "Column j scores token j + 1. The first response token sits at index prompt_length, so its column "
            "is prompt_length - 1.",
            "Search for EOS only among response tokens (index >= prompt_length), stop at the first one, and "
            "keep or drop its column with include_eos.",
            "When pad_token_id == eos_token_id, the first such token after the prompt is the real EOS; "
            "everything after it is padding.",
        ),
        mistakes=(
            Mistake("mask_not_shifted", "the mask aligned with input_ids[:, :-1] instead of the labels "
                    "input_ids[:, 1:]", hint=2),
            Mistake("log_probs_not_shifted", "logits at position t scored against token t instead of t + 1", hint=1),
            Mistake("prompt_in_mask", "prompt tokens are in the loss", hint=2),
            Mistake("padding_in_mask", "padding after the response is in the loss", hint=3),
            Mistake("eos_searched_in_prompt", "an EOS inside the prompt ends the response", hint=3),
            Mistake("eos_dropped_when_pad_is_eos", "EOS dropped when pad_token_id == eos_token_id", hint=4),
            Mistake("include_eos_ignored", "the EOS column is scored whatever include_eos says", hint=3),
        ),
        variants=(
            Variant("cross_entropy_log_probs", "token log-probs as -cross_entropy(logits, labels)"),
            Variant("cumulative_sum_mask", "the response mask from cumulative sums of EOS and non-pad tokens"),
            Variant("logsumexp_log_probs", "token log-probs as the gathered logit minus logsumexp"),
            Variant("row_loop_mask", "the response mask row by row in a Python loop, into a fresh buffer"),
        ),
    ),
    Concept(
        number=7,
        name="token_objectives",
        title="Token-level PPO: masked terms, reductions and exact sequence ratios",
        points=15,
        summary="Masked per-token PPO terms, the token_mean / sequence_mean / sequence_sum_mean reductions, and "
                "exact response-level ratios.",
        exports=(
            "masked_token_ppo_terms",
            "masked_token_ppo_objective",
            "sequence_log_probability_ratio",
            "sequence_probability_ratio",
        ),
        hints=(
            "Masked positions must not touch any output: with torch.where, set their log-probs (or their "
            "difference) AND their advantage to 0 before anything is exponentiated, then call your "
            "clipped_surrogate_terms: ratio exactly 1, terms exactly 0 (0 * inf is NaN, so masking after exp fails).",
            "token_mean = sum(m * l) / sum(m); sequence_mean averages each row's token mean; "
            "sequence_sum_mean averages each row's sum.",
            "The response-level ratio is the product of token ratios: exp(sum over the response of "
            "(new - old) log-probs). Sum in log space, exponentiate once.",
            "A row with no response token contributes 0 and still counts in B: divide each row's sum by "
            "max(n_i, 1), and the batch's by max(sum(m), 1). Never divide 0 by 0.",
        ),
        mistakes=(
            Mistake("token_mean_divides_by_batch", "token_mean divided by the number of rows instead of the "
                    "number of response tokens", hint=2),
            Mistake("sequence_mean_divides_by_padded_length", "sequence_mean divides each row by the padded "
                    "length instead of its response length", hint=2),
            Mistake("sequence_ratio_mean_of_token_ratios", "the sequence ratio as a mean of token ratios "
                    "instead of their product", hint=3),
            Mistake("masked_values_leak", "values at masked positions leak into the terms (mask applied after "
                    "exp, so extremes overflow)", hint=1),
            Mistake("mask_ignored_in_sequence_ratio", "prompt and padding columns summed into the sequence "
                    "log-ratio", hint=3),
            Mistake("token_mean_divides_by_padded_size", "token_mean divided by every padded position (B * L) "
                    "instead of the number of response tokens", hint=2),
            Mistake("empty_response_divides_by_zero", "an empty response makes sequence_mean divide 0 by 0 (NaN)",
                    hint=4),
            Mistake("objective_sign_flipped", "the loss returned where the objective to maximise is documented",
                    hint=2),
            Mistake("sequence_ratio_product_overflows", "the sequence ratio as a running product of token ratios, "
                    "which overflows where the sum of log-ratios does not", hint=3),
            Mistake("masked_terms_keep_the_advantage", "masked positions get ratio 1 but keep the advantage, so "
                    "their terms are A instead of 0", hint=1),
        ),
        variants=(
            Variant("float64_sequence_ratio", "the sequence ratio exponentiated in float64, cast back"),
            Variant("log_ratio_as_difference_of_sums",
                    "the sequence log-ratio as the difference of the summed log-probs"),
            Variant("reduction_weights", "the three reductions as one weighted sum with per-token weights"),
            Variant("where_on_log_ratio", "masked terms from the log-ratio zeroed off the mask, written out inline"),
        ),
    ),
    Concept(
        number=8,
        name="rloo_loop",
        title="The RLOO loop: a tiny autoregressive policy learns from a verifier",
        points=10,
        summary="Sample response groups with EOS and padding, RLOO advantages per prompt, frozen old token "
                "log-probs, PPO epochs on the masked token objective.",
        exports=(
            "sample_responses",
            "group_rloo_advantages",
            "sequence_policy_loss",
            "rloo_iteration",
            "sequence_profile_config",
            "train_tiny_sequence_policy",
            "evaluate_sequence_policy",
            "decode_sequence",
        ),
        hints=(
            "Sample one token per step for every row at once; keep a `finished` flag per row.",
            "Once a row has emitted EOS, every later token is PAD, whatever the model samples.",
            "Reshape rewards to [prompts, G] before RLOO so groups never mix prompts.",
            "Freeze old token log-probs under torch.no_grad() before the first epoch; the response mask comes "
            "from response_token_mask with include_eos=True.",
        ),
        mistakes=(
            Mistake("rloo_includes_self", "the sample is included in its own baseline", hint=3),
            Mistake("groups_across_prompts", "groups formed across prompts instead of within each prompt", hint=3),
            Mistake("causal_shift_off_by_one", "token log-probs aligned with input_ids[:, :-1]", hint=4),
            Mistake("eos_excluded_from_loss", "the EOS token is left out of the loss, so stopping is never "
                    "learned", hint=4),
            Mistake("old_log_probs_not_frozen", "old log-probs recomputed with the current policy at every "
                    "epoch", hint=4),
            Mistake("tokens_after_eos", "sampling keeps emitting tokens after EOS", hint=2),
            Mistake("sampling_from_the_first_position", "the next token drawn from the first position's logits "
                    "instead of the last position's", hint=1),
            Mistake("prompt_tokens_in_loss", "every non-padding label is scored, prompt tokens included", hint=4),
            Mistake("objective_returned_as_loss", "the objective to maximise is minimised: good responses become "
                    "less likely", hint=4),
        ),
        variants=(
            Variant("cross_entropy_log_probs", "the loss's token log-probs as -cross_entropy(logits, labels)"),
            Variant("gumbel_max_sampling", "each next token drawn by the Gumbel-max trick"),
            Variant("inverse_cdf_sampling", "each next token drawn by inverse-CDF sampling"),
            Variant("vectorised_rloo", "RLOO advantages in closed form, G / (G - 1) times the centred rewards"),
        ),
    ),
)

CONCEPTS_BY_NAME: dict[str, Concept] = {concept.name: concept for concept in CONCEPTS}
MAX_POINTS: float = float(sum(concept.points for concept in CONCEPTS))
# The sizes of a training run, for the loops, the lab and the benchmarks: a quick end-to-end run, and every seed at
# full length.
PROFILES: tuple[str, ...] = ("smoke", "full")


def concept(name: str) -> Concept:
    """The concept called ``name``; a ValueError lists the valid names otherwise."""
    try:
        return CONCEPTS_BY_NAME[name]
    except KeyError:
        valid = ", ".join(c.name for c in CONCEPTS)
        raise ValueError(f"unknown concept {name!r}; expected one of: {valid}") from None


def concept_of_export(public_name: str) -> Concept:
    """The concept whose module defines ``public_name``."""
    for candidate in CONCEPTS:
        if public_name in candidate.exports:
            return candidate
    raise KeyError(public_name)


def catalogued_mistake(entry: str) -> Mistake:
    """The catalogue's ``"concept/name"``; a ValueError names what is wrong otherwise."""
    concept_name, _, name = entry.partition("/")
    for mistake in concept(concept_name).mistakes:
        if mistake.name == name:
            return mistake
    raise ValueError(f"no catalogued mistake {entry!r}: expected concept/name with a Mistake in "
                     "kata/concepts/manifest.py")
