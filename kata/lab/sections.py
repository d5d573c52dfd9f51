"""What each of the lab's five sections computes with an implementation, as plain data.

``kata lab`` (kata.lab.run), notebooks/lab.py and benchmarks/ppo_cartpole.py call these functions: a section is computed
in one place. Each takes the implementation (``kata.concepts.impl.load(...)``) and the run's :class:`LabPlan`, and uses
only the seed notebook's public names, so a student's code is what trains. The ``*_job`` functions are the same runs for
a worker process, which loads the implementation itself.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from kata.arrays import REDUCTIONS
from kata.lab.outcome import as_numpy, float_array, plain
from kata.lab.plan import GAE_EXAMPLE, MASK_EXAMPLE, LabPlan, gae_example_arrays
from kata.testing.training import SOLVED_RETURN, solved_and_held

# ---- 1. baselines -------------------------------------------------------------------------------------------------


def baselines(impl: Any, plan: LabPlan) -> dict[str, float]:
    """The three estimators' spread and the same-group mean's (G-1)/G scale, simulated (floats by name)."""
    result = impl.simulate_group_baseline_bias(
        group_size=plan.baseline_group_size, groups=plan.baseline_groups, seed=plan.baseline_seed)
    return {key: float(value) for key, value in result.items()}


# ---- 2. GAE -------------------------------------------------------------------------------------------------------


def gae_example(impl: Any) -> dict[str, Any]:
    """The seed's two-record GAE example: ``advantages`` (float64 [2]) and record 0's ``first_record_target``."""
    advantages = as_numpy(impl.gae_advantages(**gae_example_arrays())).astype(np.float64)
    return {"advantages": advantages, "first_record_target": GAE_EXAMPLE["values"][0] + float(advantages[0])}


# ---- 3. PPO on CartPole -------------------------------------------------------------------------------------------


def ppo_config(impl: Any, plan: LabPlan, seed: int) -> Any:
    """The PPO config the lab trains ``seed`` with: the profile's, with the plan's overrides."""
    config = impl.profile_config(plan.profile, seed=seed)
    return dataclasses.replace(config, **dict(plan.ppo_overrides)) if plan.ppo_overrides else config


def ppo_run(impl: Any, plan: LabPlan, seed: int) -> dict[str, Any]:
    """Train PPO on CartPole for one seed; plain data (no networks), its history as lists."""
    config = ppo_config(impl, plan, seed)
    started = time.perf_counter()
    result = impl.train_ppo(config)
    wall = time.perf_counter() - started
    history = {key: plain(list(values)) for key, values in result["history"].items()}
    steps = result.get("environment_steps", (history.get("environment_steps") or [0])[-1])
    return {
        "seed": seed,
        "final_evaluation_mean": float(result["final_evaluation_mean"]),
        "final_evaluation_std": float(result["final_evaluation_std"]),
        "environment_steps": int(steps),
        "wall_seconds": wall,
        "history": history,
    }


def ppo_job(spec: str, plan: LabPlan, seed: int) -> dict[str, Any]:
    """:func:`ppo_run` with the implementation ``spec``, loaded in this (worker) process."""
    from kata.concepts.impl import load

    return ppo_run(load(spec), plan, seed)


def ppo_summary(impl: Any, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the seeds' runs: each seed's figures (``runs``), ``solved_seeds`` and the aggregated ``curve``."""
    curve = impl.aggregate_training_runs(runs)
    per_seed = []
    for result in runs:
        steps = float_array(result["history"]["environment_steps"])
        evaluations = float_array(result["history"]["evaluation_mean"])
        evaluated = np.isfinite(evaluations)
        late = evaluated & (steps >= 0.8 * result["environment_steps"])
        reached = np.flatnonzero(evaluated & (evaluations >= SOLVED_RETURN))
        per_seed.append({
            "seed": result["seed"],
            "final_evaluation_mean": result["final_evaluation_mean"],
            "final_evaluation_std": result["final_evaluation_std"],
            "environment_steps": result["environment_steps"],
            "wall_seconds": result["wall_seconds"],
            "first_steps_reaching_475": float(steps[reached[0]]) if reached.size else None,
            "lowest_evaluation_in_last_fifth": float(evaluations[late].min()) if late.any() else None,
        })
    return {
        "runs": per_seed,
        "solved_seeds": sum(solved_and_held(r) for r in runs),
        "curve": {key: as_numpy(curve[key]) for key in ("environment_steps", "median", "q25", "q75", "all_curves")},
    }


# ---- 4. response tokens -------------------------------------------------------------------------------------------


def _mask_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    e = MASK_EXAMPLE
    return np.array(e["new_log_probs"]), np.array(e["old_log_probs"]), np.array(e["advantages"])


def mask_example(impl: Any) -> np.ndarray:
    """The response mask of the seed's two rows, aligned with ``input_ids[:, 1:]`` (EOS included)."""
    e = MASK_EXAMPLE
    mask = impl.response_token_mask(np.array(e["input_ids"]), np.array(e["prompt_lengths"]),
                                    pad_token_id=e["pad_token_id"], eos_token_id=e["eos_token_id"], include_eos=True)
    return as_numpy(mask)


def token_terms_example(impl: Any, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ratio, pessimistic)``, float64 ``[2, 6]``: the local ratios and the pessimistic terms under ``mask``."""
    new, old, advantages = _mask_arrays()
    terms = impl.masked_token_ppo_terms(new, old, advantages, mask, clip_epsilon=MASK_EXAMPLE["clip_epsilon"])
    ratio, _, _, pessimistic = (as_numpy(part).astype(np.float64) for part in terms)
    return ratio, pessimistic


def sequence_example(impl: Any, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """``(log_ratio, ratio, objectives)``: the exact sequence log-ratios and ratios (float64 ``[2]``), and the
    objective under each reduction."""
    new, old, advantages = _mask_arrays()
    log_ratio = impl.sequence_log_probability_ratio(new, old, mask)
    ratio = impl.sequence_probability_ratio(new, old, mask)
    objectives = {reduction: float(impl.masked_token_ppo_objective(
        new, old, advantages, mask, clip_epsilon=MASK_EXAMPLE["clip_epsilon"], reduction=reduction))
        for reduction in REDUCTIONS}
    return as_numpy(log_ratio).astype(np.float64), as_numpy(ratio).astype(np.float64), objectives


# ---- 5. the tiny RLOO run -----------------------------------------------------------------------------------------


def rloo_run(impl: Any, plan: LabPlan) -> dict[str, Any]:
    """Train the tiny sequence policy; its first rollout's rows decoded, its curves as lists, its greedy answers."""
    config = impl.sequence_profile_config(plan.profile)
    config.update(dict(plan.sequence_overrides))
    started = time.perf_counter()
    run = impl.train_tiny_sequence_policy(seed=plan.sequence_seed, **config)
    wall = time.perf_counter() - started
    first = run["first_batch"]
    rows: list[dict[str, Any]] = []
    group_sums: list[float] = []
    if first is not None:
        classes = np.asarray(first.prompt_classes)
        advantages = as_numpy(first.advantages).astype(np.float64)
        for i in range(min(plan.rows_shown, len(classes))):
            rows.append({
                "prompt": int(classes[i]),
                "text": impl.decode_sequence(as_numpy(first.input_ids[i])),
                "reward": float(as_numpy(first.rewards)[i]),
                "advantage": float(advantages[i]),
                "mask": [int(x) for x in as_numpy(first.response_mask[i]).astype(int).tolist()],
            })
        group_sums = [float(advantages[classes == k].sum()) for k in np.unique(classes)]
    greedy = impl.evaluate_sequence_policy(run["model"], samples_per_prompt=1, deterministic=True)
    greedy_rows = [
        {"prompt": int(p), "text": impl.decode_sequence(as_numpy(row)), "reward": float(r)}
        for p, row, r in zip(greedy["prompt_classes"], greedy["input_ids"], greedy["rewards"])
    ]
    final = run["final_evaluation"]
    return {
        "seed": plan.sequence_seed,
        "config": plain(config),
        "wall_seconds": wall,
        "first_batch_present": first is not None,
        "first_rows": rows,
        "group_advantage_sums": group_sums,
        "history": {key: plain(list(values)) for key, values in run["history"].items()},
        "final_mean_reward": float(final["mean_reward"]),
        "final_success_rate": float(final["success_rate"]),
        "greedy": greedy_rows,
    }


def rloo_job(spec: str, plan: LabPlan) -> dict[str, Any]:
    """:func:`rloo_run` with the implementation ``spec``, loaded in this (worker) process."""
    from kata.concepts.impl import load

    return rloo_run(load(spec), plan)
