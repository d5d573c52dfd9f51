"""One lab run: the sections in order, each printed as it finishes, then results.json and report.md.

Each section computes through :mod:`kata.lab.sections`, guarded: a stub not implemented yet skips what needs it
with one line, an error or a failed check fails its section only, and the rest goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from kata.lab import sections
from kata.lab.outcome import Outcome, guarded, plain, skip_line
from kata.lab.plan import (
    DEFAULT_OUTPUT_ROOT,
    GAE_EXAMPLE,
    GAE_EXPECTED,
    MASK_EXAMPLE,
    SECTION_FIGURES,
    SECTION_TITLES,
    LabPlan,
    plan_for,
)
from kata.lab.report import render_report
from kata.lab.workers import Runner, available_cores, default_jobs, load_average


@dataclass
class LabRun:
    """The state of one lab run: its results (what results.json holds) and where it writes."""

    plan: LabPlan
    spec: str
    out: Path
    jobs: int
    stream: TextIO
    results: dict[str, Any] = field(default_factory=dict)

    def say(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)

    def section(self, key: str) -> dict[str, Any]:
        record = {"title": SECTION_TITLES[key], "status": "ran", "message": None, "seconds": None,
                  "figures": [], "skipped_figures": [], "checks": []}
        self.results["sections"][key] = record
        self.say(SECTION_TITLES[key])
        return record

    def skip(self, record: dict[str, Any], message: str, key: str) -> None:
        record["status"] = "skipped"
        record["message"] = skip_line(message)
        record["skipped_figures"] = list(SECTION_FIGURES[key])
        self.say(record["message"])
        if SECTION_FIGURES[key]:
            self.say(f"    (not drawn, they need this section's results: {', '.join(SECTION_FIGURES[key])})")

    def fail(self, record: dict[str, Any], error: str, key: str) -> None:
        record["status"] = "failed"
        record["message"] = error
        record["skipped_figures"] = list(SECTION_FIGURES[key])
        first, _, rest = error.partition("\n")
        self.say(f"failed: {first}")
        if rest:
            self.say("    " + rest.replace("\n", "\n    "))

    def check(self, record: dict[str, Any], name: str, passed: bool, detail: str) -> None:
        record["checks"].append({"name": name, "passed": bool(passed), "detail": detail})
        if not passed:
            self.say(f"check failed: {name}: {detail}")

    def figure(self, record: dict[str, Any], name: str, make: Callable[[], Any]) -> None:
        from kata.lab.plots import save

        outcome = guarded(lambda: save(make(), self.out / name))
        if outcome.error is not None:
            record["skipped_figures"].append(name)
            self.say(f"failed: figure {name}: {outcome.error.splitlines()[0]}")
            record.setdefault("figure_errors", {})[name] = outcome.error
        else:
            record["figures"].append(name)


def _machine() -> dict[str, Any]:
    import torch

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cores_available": available_cores(),
        "load_average_at_start": load_average(),
    }


def run_lab(plan: LabPlan, impl: str = "solutions", out: str | os.PathLike[str] | None = None,
            jobs: int | None = None, stream: TextIO | None = None, progress: bool | None = None) -> tuple[int, Path]:
    """Run every section of ``plan`` on the implementation ``impl`` and write the figures, report.md and
    results.json to ``out`` (default: a fresh ``lab-output/<timestamp>``).

    ``progress``: tqdm bars on the training runs (None: only when the stream is a terminal).
    Returns ``(exit code, output folder)``: 0 when every section ran or was skipped as not implemented yet,
    1 when a section failed (an error, or a check that did not hold), 2 when ``impl`` cannot be loaded.
    """
    stream = stream or sys.stdout
    started = time.perf_counter()
    try:
        from kata.concepts.impl import load

        implementation = load(impl)
    except (ValueError, ImportError) as error:
        print(f"kata lab: {error}", file=sys.stderr)
        return 2, Path(out) if out is not None else DEFAULT_OUTPUT_ROOT
    folder = _output_folder(out)
    training_runs = len(plan.ppo_seeds) + 1
    jobs = default_jobs(training_runs) if jobs is None else max(1, min(int(jobs), training_runs))
    run = LabRun(plan, impl, folder, jobs, stream)
    run.results = {
        "lab": {"profile": plan.profile, "implementation": impl, "implementation_root": str(implementation.root),
                "started": time.strftime("%Y-%m-%d %H:%M:%S"), "jobs": jobs, "plan": plain(dataclasses.asdict(plan))},
        "machine": _machine(),
        "sections": {},
    }
    where = "in this process" if jobs == 1 else f"in {jobs} worker processes"
    run.say(f"kata lab: profile {plan.profile}, implementation {impl}; training runs {where}; writing to {folder}")

    runner = Runner(jobs)
    run.results["lab"]["start_method"] = runner.start_method  # how the workers started (None: in this process)
    try:
        # Start every training run first: the workers train while this process does the quick sections.
        rloo = runner.submit(sections.rloo_job, impl, plan)
        ppo = [runner.submit(sections.ppo_job, impl, plan, seed) for seed in plan.ppo_seeds]
        _timed(run, "baselines", lambda record: _baselines(run, implementation, record))
        _timed(run, "gae", lambda record: _gae(run, implementation, record))
        _timed(run, "ppo", lambda record: _ppo(run, implementation, record, ppo, progress))
        _timed(run, "masks", lambda record: _masks(run, implementation, record))
        _timed(run, "rloo", lambda record: _rloo(run, record, rloo, progress))
    except KeyboardInterrupt:
        runner.close(cancel=True)
        raise
    finally:
        runner.close()

    failed = [key for key, record in run.results["sections"].items() if record["status"] == "failed"
              or not all(check["passed"] for check in record["checks"])
              or record.get("figure_errors")]
    code = 1 if failed else 0
    run.results["lab"].update(wall_seconds=time.perf_counter() - started, exit_code=code)
    run.results["machine"]["load_average_at_end"] = load_average()
    data = plain(run.results)
    (folder / "results.json").write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(render_report(data), encoding="utf-8")
    skipped = [key for key, record in run.results["sections"].items() if record["status"] == "skipped"]
    figures = sum(len(record["figures"]) for record in run.results["sections"].values())
    ran = len(SECTION_TITLES) - len(skipped) - len(failed)
    summary = f"{ran} section{'' if ran == 1 else 's'} ran"
    if skipped:
        summary += f", {len(skipped)} skipped ({', '.join(skipped)})"
    if failed:
        summary += f", {len(failed)} failed ({', '.join(failed)})"
    run.say(f"\n{summary}; {figures} figure{'' if figures == 1 else 's'}, report.md and results.json in {folder} "
            f"({run.results['lab']['wall_seconds']:.1f} s)")
    return code, folder


def _output_folder(out: str | os.PathLike[str] | None) -> Path:
    if out is not None:
        folder = Path(out)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = DEFAULT_OUTPUT_ROOT / stamp
        suffix = 1
        while folder.exists():
            suffix += 1
            folder = DEFAULT_OUTPUT_ROOT / f"{stamp}-{suffix}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _timed(run: LabRun, key: str, body: Callable[[dict[str, Any]], None]) -> None:
    record = run.section(key)
    started = time.perf_counter()
    outcome = guarded(body, record)
    if outcome.error is not None and record["status"] == "ran":
        run.fail(record, outcome.error, key)
    record["seconds"] = time.perf_counter() - started


def _settle(run: LabRun, record: dict[str, Any], key: str, outcome: Outcome) -> bool:
    """True if ``outcome`` has a value; otherwise records and prints why the section stops here."""
    if outcome.skipped is not None:
        run.skip(record, outcome.skipped, key)
        return False
    if outcome.error is not None:
        run.fail(record, outcome.error, key)
        return False
    return True


# ---- the sections -------------------------------------------------------------------------------------------------


def _baselines(run: LabRun, impl: Any, record: dict[str, Any]) -> None:
    plan = run.plan
    outcome = guarded(sections.baselines, impl, plan)
    if not _settle(run, record, "baselines", outcome):
        return
    result = outcome.value
    run.results["baselines"] = {"group_size": plan.baseline_group_size, "groups": plan.baseline_groups,
                                "seed": plan.baseline_seed, "result": result}
    run.say(f"    std of the group gradient: no baseline {result['plain_std']:.4f}, same-group mean "
            f"{result['same_group_std']:.4f}, RLOO {result['rloo_std']:.4f}")
    run.say(f"    (G-1)/G predicted {result['predicted_scale']:.4f}, observed {result['observed_scale']:.4f}")
    from kata.lab import plots

    run.figure(record, "baseline_spread.png", lambda: plots.baseline_spread(result, plan.baseline_group_size))


def _gae(run: LabRun, impl: Any, record: dict[str, Any]) -> None:
    outcome = guarded(sections.gae_example, impl)
    if not _settle(run, record, "gae", outcome):
        return
    advantages, target = outcome.value["advantages"], outcome.value["first_record_target"]
    run.results["gae"] = {"inputs": GAE_EXAMPLE, "advantages": advantages, "expected": GAE_EXPECTED,
                          "first_record_target": target}
    run.say(f"    advantages {np.round(advantages, 6).tolist()} (expected {GAE_EXPECTED}); "
            f"first record's value target {target:g}")
    run.check(record, f"the seed's GAE example gives {GAE_EXPECTED}",
              advantages.shape == (2,) and bool(np.allclose(advantages, GAE_EXPECTED)),
              f"got {np.round(advantages, 6).tolist()}: record 0 must bootstrap from next_values (it is not "
              "terminated) and its recursion must stop at its trace cut")


def _ppo(run: LabRun, impl: Any, record: dict[str, Any], handles: Sequence[Callable[[], Outcome]],
         progress: bool | None) -> None:
    plan = run.plan
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with _progress_bar(run, len(handles), "PPO seeds", progress) as bar:
        for seed, handle in zip(plan.ppo_seeds, handles):
            outcome = handle()
            if not _settle(run, record, "ppo", outcome):
                return
            result = outcome.value
            runs.append(result)
            bar.update(1)
            bar.clear()
            run.say(f"    seed {seed:3d}: final greedy return {result['final_evaluation_mean']:7.2f} ± "
                    f"{result['final_evaluation_std']:6.2f} after {result['environment_steps']:,} steps "
                    f"({result['wall_seconds']:.1f} s)")
    waited = time.perf_counter() - started
    summary = sections.ppo_summary(impl, runs)
    first = runs[0]["history"]
    run.results["ppo"] = {
        "seeds": list(plan.ppo_seeds),
        "config_overrides": dict(plan.ppo_overrides),
        "runs": summary["runs"],
        "training_wait_seconds": waited,
        "training_seconds_summed": sum(r["wall_seconds"] for r in runs),
        "solved_seeds": summary["solved_seeds"],
        "curve": summary["curve"],
        "diagnostics": {"seed": plan.ppo_seeds[0], **{key: first[key] for key in (
            "update", "approx_kl", "active_clip_fraction", "ratio_outside_fraction")}},
    }
    from kata.lab import plots

    run.figure(record, "ppo_learning_curve.png",
               lambda: plots.learning_curve(summary["curve"], plan.ppo_seeds, plan.profile))
    run.figure(record, "ppo_diagnostics.png", lambda: plots.ppo_diagnostics(first, plan.ppo_seeds[0]))


class _NoBar:
    def __enter__(self) -> _NoBar:  # noqa: PYI034 - a private stand-in, never subclassed
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def update(self, _: int) -> None:
        return None

    def clear(self) -> None:
        return None


def _progress_bar(run: LabRun, total: int, what: str, progress: bool | None) -> Any:
    show = progress if progress is not None else (sys.stderr.isatty() and run.stream is sys.stdout)
    if not show:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=f"    training {what}", unit="run", leave=False, file=sys.stderr,
                bar_format="{desc}: {n_fmt}/{total_fmt} {bar} {elapsed}")


def _masks(run: LabRun, impl: Any, record: dict[str, Any]) -> None:
    outcome = guarded(sections.mask_example, impl)
    if not _settle(run, record, "masks", outcome):
        return
    mask = outcome.value
    results: dict[str, Any] = {"inputs": MASK_EXAMPLE, "mask": mask.astype(int)}
    run.results["masks"] = results
    run.say(f"    response mask (aligned with input_ids[:, 1:]): {mask.astype(int).tolist()}")
    outcome = guarded(sections.token_terms_example, impl, mask)
    if not _settle(run, record, "masks", outcome):
        return
    ratio, pessimistic = outcome.value
    results.update(ratio=np.round(ratio, 4), pessimistic=np.round(pessimistic, 6))
    run.say(f"    local ratios: {np.round(ratio, 4).tolist()}")
    outcome = guarded(sections.sequence_example, impl, mask)
    if not _settle(run, record, "masks", outcome):
        return
    log_ratio, sequence_ratio, reductions = outcome.value
    results.update(sequence_log_ratio=np.round(log_ratio, 4), sequence_ratio=np.round(sequence_ratio, 4),
                   reductions=reductions)
    run.say(f"    exact sequence log-ratios {results['sequence_log_ratio'].tolist()}, ratios "
            f"{results['sequence_ratio'].tolist()}")
    run.say("    objective: " + ", ".join(f"{name} {value:.6f}" for name, value in reductions.items()))
    masked = mask == 0
    run.check(record, "masked positions contribute nothing to the pessimistic term",
              bool(np.all(pessimistic[masked] == 0.0)),
              "a prompt, padding or post-EOS column has a non-zero term: the mask does not remove it")
    run.check(record, "masked positions have ratio 1", bool(np.all(ratio[masked] == 1.0)),
              "a masked column's ratio is not the multiplicative identity 1")


def _rloo(run: LabRun, record: dict[str, Any], handle: Callable[[], Outcome], progress: bool | None) -> None:
    with _progress_bar(run, 1, "RLOO run", progress) as bar:
        outcome = handle()
        bar.update(1)
        bar.clear()
    if not _settle(run, record, "rloo", outcome):
        return
    result = outcome.value
    run.results["rloo"] = result
    history = result["history"]
    run.say(f"    profile {result['config']}")
    run.say("    first rows of the initial rollout:")
    for row in result["first_rows"]:
        run.say(f"      prompt={row['prompt']} | {row['text']} | reward={row['reward']:.2f} | "
                f"advantage={row['advantage']:+.3f} | mask={row['mask']}")
    rewards = history.get("evaluation_mean_reward") or [None]
    run.say(f"    evaluation reward {_number(rewards[0])} -> {result['final_mean_reward']:.3f}; success rate "
            f"{result['final_success_rate']:.3f} ({result['wall_seconds']:.1f} s)")
    run.say("    greedy responses: " + "; ".join(f"p{r['prompt']}: {r['text']} ({r['reward']:.2f})"
                                                 for r in result["greedy"]))
    run.check(record, "the initial rollout is recorded (first_batch)", result["first_batch_present"],
              "train_tiny_sequence_policy returned first_batch=None")
    sums = result["group_advantage_sums"]
    run.check(record, "RLOO advantages sum to zero within every prompt group",
              bool(sums) and all(abs(s) <= 1e-9 for s in sums),
              f"per-group sums {sums}: a sample is in its own baseline, or groups mix prompts")
    from kata.lab import plots

    run.figure(record, "rloo_reward.png", lambda: plots.sequence_reward_curve(history))
    run.figure(record, "rloo_success.png", lambda: plots.sequence_success_curve(history))


def _number(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


# ---- entry points ----------------------------------------------------------------------------------------------


def main(profile: str = "smoke", impl: str = "solutions", out: str | None = None, jobs: int | None = None) -> int:
    """Run the lab on ``profile``'s plan (see :mod:`kata.lab`); the exit code (2: a profile that does not exist)."""
    try:
        plan = plan_for(profile)
    except ValueError as error:
        print(f"kata lab: {error}", file=sys.stderr)
        return 2
    code, _ = run_lab(plan, impl=impl, out=out, jobs=jobs)
    return code

