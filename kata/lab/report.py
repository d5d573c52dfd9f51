"""The lab's report.md, rendered from results.json's data alone: every number it shows is in the data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kata.testing.training import SOLVED_RETURN

# Below this many seeds, quartiles are interpolations between two or three curves: the band is the range. Here, not
# in kata.lab.plots, so that the report reads without importing matplotlib.
FEWEST_SEEDS_FOR_QUARTILES = 4


def render_report(data: Mapping[str, Any]) -> str:
    """report.md from results.json's data: every number it shows is in ``data``."""
    lab, machine, sections = data["lab"], data["machine"], data["sections"]
    lines = [
        f"# Policy-gradient lab — {lab['profile']} profile",
        "",
        f"Implementation `{lab['implementation']}` ({lab['implementation_root']}), run {lab['started']}: "
        f"{lab['wall_seconds']:.1f} s end to end, training runs "
        + ("in this process." if lab["jobs"] == 1 else f"in {lab['jobs']} worker processes."),
        "",
        (f"Machine: {machine['platform']}, {machine['cores_available']} cores available, Python {machine['python']}, "
        f"torch {machine['torch']}, NumPy {machine['numpy']}; load average (1, 5, 15 min) "
        f"{machine['load_average_at_start']} at the start, {machine.get('load_average_at_end')} at the end. "
        "Wall times depend on what else the machine runs; every other number is fixed by the seeds."),
        "",
        "| section | status | seconds |",
        "|---|---|---|",
    ]
    for record in sections.values():
        lines.append(f"| {record['title']} | {record['status']} | {record['seconds']:.1f} |")
    lines.append("")
    for key, render in (("baselines", _report_baselines), ("gae", _report_gae), ("ppo", _report_ppo),
                        ("masks", _report_masks), ("rloo", _report_rloo)):
        record = sections.get(key)
        if record is None:
            continue
        lines += [f"## {record['title']}", ""]
        if key in data:  # a section skipped or failed half-way keeps what it computed
            lines += render(data[key])
        if record["status"] != "ran":
            lines += [f"**{record['status']}**:", "", "```", record["message"] or "", "```", ""]
        for name in record["figures"]:
            lines += [f"![{name}]({name})", ""]
        if record["skipped_figures"]:
            lines += [f"Not drawn: {', '.join(record['skipped_figures'])}.", ""]
        for check in record["checks"]:
            mark = "holds" if check["passed"] else f"**does not hold**: {check['detail']}"
            lines.append(f"- check: {check['name']} — {mark}")
        if record["checks"]:
            lines.append("")
    lines += [
        "## What this run establishes, and what it does not",
        "",
        ("A run in which every section ran and every check held shows that the pieces agree with each other: the "
        "estimators, the masks, the clipped objective and the loops fit together, and reward moves the policies "
        "where it should. It is one protocol on two toy tasks with a handful of seeds: it says nothing about how "
        "PPO or RLOO behave at scale, on language models, or against other methods under an equal budget."),
        "",
    ]
    return "\n".join(lines)


def _report_baselines(d: Mapping[str, Any]) -> list[str]:
    r = d["result"]
    lines = [
        (f"{d['groups']:,} simulated groups of G = {d['group_size']} (seed {d['seed']}). Each group's estimate is the "
        "average of score × advantage; its true value is the gradient below. The same-group mean includes each "
        "sample in its own baseline, which scales the expected estimate by (G-1)/G; leave-one-out (RLOO) does not. "
        "RLOO is the same estimate times G/(G-1), so its std is G/(G-1) times larger and its signal-to-noise ratio "
        "the same."),
        "",
        "| quantity | value |",
        "|---|---|",
    ]
    lines += [f"| {key} | {_fmt(value, 6)} |" for key, value in r.items()]
    lines.append("")
    return lines


def _report_gae(d: Mapping[str, Any]) -> list[str]:
    e = d["inputs"]
    return [
        ("Record 0 is cut by the rollout buffer, not by the task: it bootstraps from V(next state) = "
        f"{e['next_values'][0]:g}, and its recursion stops at the cut. Record 1 is a true terminal."),
        "",
        (f"rewards {e['rewards']}, values {e['values']}, next_values {e['next_values']}, terminated "
        f"{e['terminated']}, trace_cuts {e['trace_cuts']}, γ = {e['gamma']}, λ = {e['gae_lambda']}."),
        "",
        (f"Advantages: [{', '.join(_fmt(a, 6) for a in d['advantages'])}] (expected {d['expected']}); "
        f"the first record's value target is {_fmt(d['first_record_target'], 6)}."),
        "",
    ]


def _report_ppo(d: Mapping[str, Any]) -> list[str]:
    lines = [
        (f"Seeds {d['seeds']}, profile config with overrides {d['config_overrides'] or 'none'}. Greedy evaluation "
        f"return (ceiling 500); a seed is solved when its final evaluation and every evaluation in the last fifth of "
        f"its steps reach {SOLVED_RETURN:g}: {d['solved_seeds']} of {len(d['seeds'])} seeds solved. "
        "A few seeds show the curve, not the rate: the fraction of 20 held-out seeds that solve and hold within the "
        "profile's budget is measured by `benchmarks/training_robustness.py` (docs/benchmarks.md)."),
        "",
        ("| seed | final greedy return | environment steps | first steps at ≥ 475 | lowest return, last fifth "
        "| wall s |"),
        "|---|---|---|---|---|---|",
    ]
    for r in d["runs"]:
        lines.append(
            f"| {r['seed']} | {_fmt(r['final_evaluation_mean'], 2)} ± {_fmt(r['final_evaluation_std'], 2)} | "
            f"{r['environment_steps']:,} | {_fmt(r['first_steps_reaching_475'], 0)} | "
            f"{_fmt(r['lowest_evaluation_in_last_fifth'], 2)} | {r['wall_seconds']:.1f} |")
    lines += [
        "",
        (f"Training: {d['training_seconds_summed']:.1f} s summed over the seeds; the lab waited "
        f"{d['training_wait_seconds']:.1f} s for them. The curves show the median over the seeds of a deterministic "
        f"evaluation every few updates, with {_band(len(d['runs']))}; the diagnostics are batch-local measurements of "
        f"the first seed ({d['diagnostics']['seed']}), not thresholds."),
        "",
    ]
    return lines


def _report_masks(d: Mapping[str, Any]) -> list[str]:
    e = d["inputs"]
    lines = [
        ("The seed's two rows (BOS, prompt, response, EOS, padding) with extreme log-probabilities in the prompt and "
        "padding columns: a correct mask removes them entirely."),
        "",
        (f"input_ids {e['input_ids']}, prompt lengths {e['prompt_lengths']}, pad {e['pad_token_id']}, EOS "
        f"{e['eos_token_id']} (included)."),
        "",
        f"- response mask, aligned with `input_ids[:, 1:]`: {d['mask']}",
    ]
    if "ratio" in d:
        lines.append(f"- local ratios (1 where masked): {d['ratio']}")
    if "sequence_ratio" in d:
        lines += [
            f"- exact sequence log-ratios: {d['sequence_log_ratio']}; ratios: {d['sequence_ratio']}",
            "",
            "| reduction | objective |",
            "|---|---|",
        ]
        lines += [f"| {name} | {_fmt(value, 6)} |" for name, value in d["reductions"].items()]
    lines.append("")
    return lines


def _report_rloo(d: Mapping[str, Any]) -> list[str]:
    history = d["history"]
    rewards = history.get("evaluation_mean_reward") or [None]
    successes = history.get("success_rate") or [None]
    lines = [
        (f"Seed {d['seed']}, profile {d['config']}; {d['wall_seconds']:.1f} s. Evaluation reward "
        f"{_fmt(rewards[0], 3)} before training, {_fmt(d['final_mean_reward'], 3)} after; exact-response success "
        f"{_fmt(successes[0], 3)} before, {_fmt(d['final_success_rate'], 3)} after."),
        "",
        "First rows of the initial rollout (reward from the verifier, RLOO advantage, response mask):",
        "",
        "```",
    ]
    lines += [f"prompt={r['prompt']} | {r['text']} | reward={r['reward']:.2f} | advantage={r['advantage']:+.3f} | "
              f"mask={r['mask']}" for r in d["first_rows"]]
    sums = ", ".join(f"{total:.1e}" for total in d["group_advantage_sums"])
    lines += ["```", "", f"Per-prompt sums of the first rollout's RLOO advantages: [{sums}].", "",
              "Greedy responses after training:", "", "```"]
    lines += [f"prompt={r['prompt']} | {r['text']} | reward={r['reward']:.2f}" for r in d["greedy"]]
    lines += ["```", ""]
    return lines


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if digits == 0 else f"{value:.{digits}f}"
    return str(value)


def _band(seeds: int) -> str:
    """What the learning curve's band is (kata.lab.plots.learning_curve draws the same)."""
    if seeds >= FEWEST_SEEDS_FOR_QUARTILES:
        return "the interquartile range"
    return "the range from the lowest to the highest seed" if seeds > 1 else "no band (one seed)"
