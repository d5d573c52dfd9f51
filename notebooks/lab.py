# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The lab: policy gradients from REINFORCE to PPO
#
# This notebook walks through the module's whole route once, with real numbers: why a baseline helps and what a
# finite group does to it, why GAE needs two masks, PPO training an agent on the kata's own CartPole, how a
# language-model objective keeps prompt and padding tokens out of the loss, and a tiny autoregressive policy that
# learns from a verifier with RLOO.
#
# Every function it calls comes from one implementation, chosen in the next cell: `solutions` (the reference),
# `exercises` (your code) or a folder laid out like `exercises/`. On your own code, a cell stops with
# `not implemented yet: ...` until you have written that concept; `kata lab --impl exercises` runs the same route
# and skips what is not written yet instead.
#
# It runs as a plain script too (`python notebooks/lab.py`); figures go to `lab-output/notebook/`. The `smoke`
# profile is a quick end-to-end check on a CPU; `full` trains longer and on five seeds. The numbers are what this
# code gives under this protocol, not external benchmarks.

# %%
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from kata import plots
from kata.impl import load

PACKAGE = os.environ.get("KATA_LAB_IMPL", "solutions")  # "solutions", "exercises", or a folder's path
PROFILE = os.environ.get("KATA_LAB_PROFILE", "smoke")  # "smoke" or "full"
FIGURES = Path(os.environ.get("KATA_LAB_FIGURES", "lab-output/notebook"))
if PROFILE not in {"smoke", "full"}:
    raise ValueError("KATA_LAB_PROFILE must be 'smoke' or 'full'")

impl = load(PACKAGE)
simulate_group_baseline_bias = impl.simulate_group_baseline_bias
gae_advantages = impl.gae_advantages
profile_config, train_ppo, aggregate_training_runs = impl.profile_config, impl.train_ppo, impl.aggregate_training_runs
response_token_mask = impl.response_token_mask
masked_token_ppo_terms, masked_token_ppo_objective = impl.masked_token_ppo_terms, impl.masked_token_ppo_objective
sequence_log_probability_ratio = impl.sequence_log_probability_ratio
sequence_probability_ratio = impl.sequence_probability_ratio
sequence_profile_config, train_tiny_sequence_policy = impl.sequence_profile_config, impl.train_tiny_sequence_policy
evaluate_sequence_policy, decode_sequence = impl.evaluate_sequence_policy, impl.decode_sequence

SEEDS = [11, 37] if PROFILE == "smoke" else [11, 37, 71, 101, 131]
print("implementation:", impl.root)
print("profile:", PROFILE, "| PPO seeds:", SEEDS)

# %% [markdown]
# ## 1. Baselines: less spread, and a scale that a finite group changes
#
# A group of G responses to one prompt gives G rewards. Each sample's gradient term is its score times an advantage,
# and the group's estimate is their average. Three choices of advantage:
#
# - **no baseline**: the raw reward. Unbiased, but every sample pushes in the direction of its own score, however
#   ordinary its reward: a large spread.
# - **same-group mean**: reward minus the group's mean. The spread drops, but each sample sits in its own baseline,
#   so a share 1/G of its own reward is subtracted from itself. The expected estimate shrinks by exactly (G-1)/G.
# - **RLOO** (leave one out): reward minus the mean of the *other* G-1 rewards. The baseline does not depend on the
#   sample, so the estimate stays unbiased, with a spread close to the same-group mean's.
#
# The simulation does not replace the algebra (GUIDE.md §2); it measures the (G-1)/G factor and shows the spread.

# %%
baseline_result = simulate_group_baseline_bias(
    group_size=8,
    groups=80_000 if PROFILE == "smoke" else 400_000,
    seed=2026,
)
for key, value in baseline_result.items():
    print(f"{key:>24s}: {value: .6f}")
plots.show(plots.baseline_spread(baseline_result, group_size=8), FIGURES / "baseline_spread.png")

# %% [markdown]
# ## 2. GAE: one mask for bootstrapping, another for the recursion
#
# Two different questions are asked of every record. *May it bootstrap from V(next state)?* Only a real task end
# (`terminated`) says no. *May the backward recursion carry the next record's advantage into this one?* Any break
# in the trajectory says no: a terminal, a time limit, or simply the end of the rollout buffer (`trace_cuts`).
#
# Here record 0 is cut by the buffer but is not terminal: it bootstraps from V(next) = 10, so its advantage is
# 1 + 0.9 · 10 − 2 = 8, and nothing from record 1 (an unrelated terminal step with reward 100) leaks into it.

# %%
rewards = np.array([1.0, 100.0])
values = np.array([2.0, 0.0])
next_values = np.array([10.0, 0.0])
terminated = np.array([False, True])
trace_cuts = np.array([True, True])  # record 0: the buffer ends here; record 1: a terminal
advantages = gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma=0.9, gae_lambda=1.0)
print("advantages:", advantages)
print("value target of record 0:", values[0] + advantages[0])
assert np.allclose(advantages, [8.0, 100.0])

# %% [markdown]
# ## 3. PPO on CartPole
#
# The whole algorithm on the kata's own CartPole (CartPole-v1's published dynamics, 500-step limit): fixed-length
# rollouts from several environments, stored old log-probabilities and values, GAE with the two masks, epochs of
# shuffled minibatches on the clipped policy and value losses with an entropy term, gradient-norm clipping, the
# diagnostics, and a separate greedy evaluation. Several seeds, because one lucky seed proves little.

# %%
runs = []
started = time.perf_counter()
for seed in SEEDS:
    config = profile_config(PROFILE, seed=seed)
    if PROFILE == "smoke":
        config = replace(config, evaluation_every=2)  # evaluate every second update: a denser curve
    result = train_ppo(config)
    runs.append(result)
    print(f"seed={seed:3d} | final greedy return {result['final_evaluation_mean']:7.2f} "
          f"± {result['final_evaluation_std']:6.2f}")
curve = aggregate_training_runs(runs)
print(f"training wall time: {time.perf_counter() - started:.1f} s")

# %% [markdown]
# The curve shows the median over seeds, the interquartile band and each seed. Reaching the 500-step ceiling shows
# that collection, targets, repeated optimisation and evaluation work together. It does not show robustness (a
# few seeds, one environment) and says nothing about language models; comparing methods would need equal budgets,
# more seeds and uncertainty estimates.

# %%
plots.show(plots.learning_curve(curve, SEEDS, PROFILE), FIGURES / "ppo_learning_curve.png")

# %% [markdown]
# The diagnostics of the first seed, update by update: the non-negative approximate KL between the policy before
# and after the update, the share of samples whose clipped branch binds (their gradient is zero), and the share
# whose ratio left [1 − ε, 1 + ε] at all. They describe this batch and this run; they are not universal thresholds.

# %%
plots.show(plots.ppo_diagnostics(runs[0]["history"], SEEDS[0]), FIGURES / "ppo_diagnostics.png")

# %% [markdown]
# ## 4. Language-model responses: the shift, the mask, the ratio and the reduction
#
# A causal model's logits at position j score token j + 1, so every per-token quantity lives on the labels
# `input_ids[:, 1:]`. The response mask marks the label columns that belong to the response (EOS included here);
# prompt and padding columns are 0. The log-probabilities below are extreme exactly where the mask is 0: a correct
# mask makes them vanish from every result.
#
# The local ratios are per token (1 where masked). The response-level ratio is their *product*, computed as the
# exponential of the summed log-ratios. The three reductions weigh tokens differently: `token_mean` averages over
# all response tokens of the batch, `sequence_mean` averages each response's token mean, `sequence_sum_mean`
# averages each response's sum (GUIDE.md §7).

# %%
# Token positions: BOS, prompt_1, prompt_2, response_1, response_2, EOS, PAD.
input_ids = np.array([
    [1, 10, 11, 20, 21, 2, 0],
    [1, 12, 30, 2, 0, 0, 0],
])
prompt_lengths = np.array([3, 2])
mask = response_token_mask(input_ids, prompt_lengths, pad_token_id=0, eos_token_id=2, include_eos=True)

# Aligned with the labels input_ids[:, 1:].
old_log_probs = np.array([
    [-9.0, -8.0, -1.0, -1.2, -0.8, -20.0],
    [-7.0, -0.7, -0.9, -30.0, -40.0, -50.0],
])
new_log_probs = np.array([
    [9.0, 8.0, -0.7, -1.5, -0.9, 20.0],
    [7.0, -0.5, -1.2, 30.0, 40.0, 50.0],
])
advantages = np.array([1.5, -0.8])

ratio, unclipped, clipped, pessimistic = masked_token_ppo_terms(
    new_log_probs, old_log_probs, advantages, mask, clip_epsilon=0.2
)
print("response mask on input_ids[:, 1:]:\n", mask)
print("local ratios (1 where masked):\n", np.round(ratio, 4))
print("exact sequence log-ratios:", np.round(sequence_log_probability_ratio(new_log_probs, old_log_probs, mask), 4))
print("exact sequence ratios:", np.round(sequence_probability_ratio(new_log_probs, old_log_probs, mask), 4))
for reduction in ["token_mean", "sequence_mean", "sequence_sum_mean"]:
    value = masked_token_ppo_objective(
        new_log_probs, old_log_probs, advantages, mask, clip_epsilon=0.2, reduction=reduction
    )
    print(f"{reduction:>18s}: {value: .6f}")
assert np.all(pessimistic[mask == 0] == 0.0)

# %% [markdown]
# ## 5. A tiny autoregressive policy trained with RLOO and token-level PPO
#
# Now the same pieces train something. A small GRU sees one of three prompts and must answer with that prompt's two
# symbols followed by an EOS it samples itself. A deterministic verifier scores each response (partial credit, no
# gradient). Each iteration samples a group of responses per prompt, computes leave-one-out advantages within each
# group, freezes the sampling policy's token log-probabilities, and runs a few PPO epochs on the masked token
# objective.
#
# It is not a language model and not a small RLHF. What it gives is one running path through everything the
# previous section only showed: responses of different lengths, a sampled EOS, padding, the causal shift, a group
# baseline and token-level clipping.

# %%
sequence_config = sequence_profile_config(PROFILE)
print("profile:", sequence_config)
sequence_run = train_tiny_sequence_policy(seed=5, **sequence_config)
first_batch = sequence_run["first_batch"]
assert first_batch is not None

print("First rows of the initial rollout:")
for i in range(min(6, len(first_batch.prompt_classes))):
    print(
        f"  prompt={first_batch.prompt_classes[i]} | "
        f"{decode_sequence(first_batch.input_ids[i].cpu().numpy())} | "
        f"reward={first_batch.rewards[i]:.2f} | "
        f"advantage={first_batch.advantages[i]:+.3f} | "
        f"mask={first_batch.response_mask[i].cpu().numpy().astype(int).tolist()}"
    )
for prompt_class in range(3):
    idx = np.flatnonzero(first_batch.prompt_classes == prompt_class)
    np.testing.assert_allclose(first_batch.advantages[idx].sum(), 0.0, atol=1e-12)
print("RLOO advantages sum to zero within every prompt group.")

# %% [markdown]
# The reward and the exact-response success rate of sampled responses, measured on the evaluation schedule.

# %%
sequence_history = sequence_run["history"]
plots.show(plots.sequence_reward_curve(sequence_history), FIGURES / "rloo_reward.png")
plots.show(plots.sequence_success_curve(sequence_history), FIGURES / "rloo_success.png")
print("initial evaluation reward:", float(sequence_history["evaluation_mean_reward"][0]))
print("final evaluation reward:", sequence_run["final_evaluation"]["mean_reward"])

print("Greedy responses after training:")
greedy = evaluate_sequence_policy(sequence_run["model"], samples_per_prompt=1, deterministic=True)
for prompt_class, row, reward in zip(greedy["prompt_classes"], greedy["input_ids"], greedy["rewards"]):
    print(f"  prompt={prompt_class} | {decode_sequence(row)} | reward={reward:.2f}")

# %% [markdown]
# ## What the run shows, and what it does not
#
# When every cell runs and every assertion holds, the pieces agree: the verifier's reward raises the probability
# of the right response, and prompt tokens, padding and positions after EOS stay out of the policy loss. That is a
# check of the implementation's contract. It is not evidence about PPO or RLOO on large language models, where
# post-training adds a reference policy and its KL penalty, distributed and delayed rollouts, learned or much
# richer reward signals, length control, mixed objectives and the engineering around all of it.
#
# GUIDE.md ends with the module's practical takeaways.
