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
#
# Each section is computed by a function of `kata/lab/sections.py`, the same one `kata lab` calls, so the notebook
# and the command always show the same numbers; read that file to see each call to your functions.

# %%
import os
from pathlib import Path

import numpy as np

from kata.concepts.impl import load, reference_or_exercises
from kata.lab import plots, sections
from kata.lab.plan import GAE_EXAMPLE, GAE_EXPECTED, MASK_EXAMPLE, plan_for

PACKAGE = os.environ.get("KATA_LAB_IMPL") or reference_or_exercises()  # "solutions", "exercises", or a folder's path
PROFILE = os.environ.get("KATA_LAB_PROFILE", "smoke")  # "smoke" or "full"
FIGURES = Path(os.environ.get("KATA_LAB_FIGURES", "lab-output/notebook"))

impl = load(PACKAGE)
plan = plan_for(PROFILE)  # what the profile runs: groups, seeds, run lengths
print("implementation:", impl.root)
print("profile:", PROFILE, "| PPO seeds:", list(plan.ppo_seeds))

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
#   sample, so the estimate stays unbiased. It is the same-group estimate times G/(G-1), sample by sample, so its
#   spread is G/(G-1) times larger (8/7 here) and its signal-to-noise ratio exactly the same: what it fixes is the
#   scale, not the noise.
#
# The simulation does not replace the algebra (GUIDE.md §2); it measures the (G-1)/G factor and shows the spread.
# It is `simulate_group_baseline_bias(group_size=8, groups=..., seed=2026)`, with the profile's number of groups.

# %%
baseline_result = sections.baselines(impl, plan)
for key, value in baseline_result.items():
    print(f"{key:>24s}: {value: .6f}")
plots.show(plots.baseline_spread(baseline_result, group_size=plan.baseline_group_size),
           FIGURES / "baseline_spread.png")

# %% [markdown]
# ## 2. GAE: one mask for bootstrapping, another for the recursion
#
# Two different questions are asked of every record. *May it bootstrap from V(next state)?* Only a real task end
# (`terminated`) says no. *May the backward recursion carry the next record's advantage into this one?* Any break
# in the trajectory says no: a terminal, a time limit, or simply the end of the rollout buffer (`trace_cuts`).
#
# Here record 0 is cut by the buffer but is not terminal: it bootstraps from V(next) = 10, so its advantage is
# 1 + 0.9 · 10 − 2 = 8, and nothing from record 1 (an unrelated terminal step with reward 100) leaks into it: a
# recursion that ran across the cut would give 8 + 0.9 · 100 = 98.

# %%
print("gae_advantages on:", GAE_EXAMPLE)  # trace_cuts: record 0, the buffer ends here; record 1, a terminal
gae = sections.gae_example(impl)
print("advantages:", gae["advantages"])
print("value target of record 0:", gae["first_record_target"])
assert np.allclose(gae["advantages"], GAE_EXPECTED)

# %% [markdown]
# ## 3. PPO on CartPole
#
# The whole algorithm on the kata's own CartPole (CartPole-v1's published dynamics, 500-step limit): fixed-length
# rollouts from several environments, stored old log-probabilities and values, GAE with the two masks, epochs of
# shuffled minibatches on the clipped policy and value losses with an entropy term, gradient-norm clipping, the
# diagnostics, and a separate greedy evaluation. Several seeds, because one lucky seed proves little.

# %%
runs = []
for seed in plan.ppo_seeds:
    # train_ppo(profile_config(PROFILE, seed=seed)), with the plan's overrides (smoke: evaluate every second update)
    result = sections.ppo_run(impl, plan, seed)
    runs.append(result)
    print(f"seed={seed:3d} | final greedy return {result['final_evaluation_mean']:7.2f} "
          f"± {result['final_evaluation_std']:6.2f}")
ppo = sections.ppo_summary(impl, runs)
print(f"training wall time: {sum(r['wall_seconds'] for r in runs):.1f} s; {ppo['solved_seeds']} of {len(runs)} "
      "seeds solved")

# %% [markdown]
# The curve shows the median, the seeds' range (quartiles from 4 seeds) and each seed. Reaching the 500 ceiling shows
# that collection, targets, repeated optimisation and evaluation work together. It does not show robustness (a
# few seeds, one environment) and says nothing about language models; comparing methods would need equal budgets,
# more seeds and uncertainty estimates.

# %%
plots.show(plots.learning_curve(ppo["curve"], plan.ppo_seeds, PROFILE), FIGURES / "ppo_learning_curve.png")

# %% [markdown]
# The diagnostics of the first seed, update by update: the non-negative approximate KL between the policy before
# and after the update, the share of samples whose clipped branch binds (their gradient is zero), and the share
# whose ratio left [1 − ε, 1 + ε] at all. They describe this batch and this run; they are not universal thresholds.

# %%
plots.show(plots.ppo_diagnostics(runs[0]["history"], plan.ppo_seeds[0]), FIGURES / "ppo_diagnostics.png")

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
# Token positions: BOS, prompt_1, prompt_2, response_1, response_2, EOS, PAD; the log-probabilities are aligned
# with the labels input_ids[:, 1:].
for name in ("input_ids", "prompt_lengths", "old_log_probs", "new_log_probs", "advantages"):
    print(f"{name}: {MASK_EXAMPLE[name]}")
mask = sections.mask_example(impl)  # response_token_mask(..., pad_token_id=0, eos_token_id=2, include_eos=True)
ratio, pessimistic = sections.token_terms_example(impl, mask)  # masked_token_ppo_terms(..., clip_epsilon=0.2)
log_ratio, sequence_ratio, objectives = sections.sequence_example(impl, mask)
print("response mask on input_ids[:, 1:]:\n", mask)
print("local ratios (1 where masked):\n", np.round(ratio, 4))
print("exact sequence log-ratios:", np.round(log_ratio, 4))
print("exact sequence ratios:", np.round(sequence_ratio, 4))
for reduction, value in objectives.items():
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
# train_tiny_sequence_policy(seed=5, **sequence_profile_config(PROFILE)), then its first rollout, decoded
sequence_run = sections.rloo_run(impl, plan)
print("profile:", sequence_run["config"])
assert sequence_run["first_batch_present"]

print("First rows of the initial rollout:")
for row in sequence_run["first_rows"]:
    print(f"  prompt={row['prompt']} | {row['text']} | reward={row['reward']:.2f} | "
          f"advantage={row['advantage']:+.3f} | mask={row['mask']}")
np.testing.assert_allclose(sequence_run["group_advantage_sums"], 0.0, atol=1e-12)
print("RLOO advantages sum to zero within every prompt group.")

# %% [markdown]
# The reward and the exact-response success rate of sampled responses, measured on the evaluation schedule.

# %%
sequence_history = sequence_run["history"]
plots.show(plots.sequence_reward_curve(sequence_history), FIGURES / "rloo_reward.png")
plots.show(plots.sequence_success_curve(sequence_history), FIGURES / "rloo_success.png")
print("initial evaluation reward:", float(sequence_history["evaluation_mean_reward"][0]))
print("final evaluation reward:", sequence_run["final_mean_reward"])

print("Greedy responses after training:")
for row in sequence_run["greedy"]:
    print(f"  prompt={row['prompt']} | {row['text']} | reward={row['reward']:.2f}")

# %% [markdown]
# ## What the run shows, and what it does not
#
# When every cell runs and every assertion holds, the pieces agree: the verifier's reward raises the probability
# of the right response, and prompt tokens, padding and positions after EOS stay out of the policy loss. That is a
# check of the implementation's contract. It is not evidence about PPO or RLOO on large language models, where
# post-training adds a reference policy and its KL penalty, distributed and delayed rollouts, learned or much
# richer reward signals, length control, mixed objectives and the engineering around all of it.
#
# GUIDE.md opens with the module's eight takeaways, each linking its section.
