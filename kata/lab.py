"""The lab: the seed notebook's whole route as one command, on the reference or on a student's own code.

    kata lab [--profile smoke|full] [--impl exercises|solutions|PATH] [--out DIR]
    python -m kata.lab --profile smoke --impl solutions --out DIR [--jobs N]

Five sections, in the seed notebook's order:

1. the baseline simulation (the three estimators' spread, the predicted and observed ``(G-1)/G``);
2. the GAE example with separate bootstrap and trace masks (``[8.0, 100.0]``);
3. PPO on CartPole over the profile's seeds (learning curve, and the diagnostics of the first seed);
4. the response mask, local and sequence ratios and the three reductions, on the seed's arrays;
5. the tiny RLOO/PPO run of an autoregressive policy (reward and success curves, the first rollout's rows, the
   greedy responses).

It writes PNG figures, ``report.md`` (readable on its own) and ``results.json`` (every number the report shows;
the report is rendered from it) to the output folder. It uses only the seed's public names, taken from the chosen
implementation through :func:`kata.impl.load`, so a student's code is what trains.

A stub that is not implemented yet does not stop the lab: its section prints one line (``skipped: gae_advantages
is not implemented yet — GUIDE.md §3 ...``), what depends on it is skipped with the reason, and the rest goes on.
An error or a failed check in a section is reported and the rest goes on too; the exit code is then 1.

The training runs (each PPO seed and the RLOO run) are independent: with idle cores they run in worker processes,
one per idle core, while the main process computes the quick sections and draws; on a busy machine they run
in-process, which is then faster (see :func:`default_jobs`). ``--jobs N`` decides instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from kata.contracts.token_objectives import REDUCTIONS
from kata.manifest import PROFILES
from kata.ppo_frame import SOLVED_RETURN

DEFAULT_OUTPUT_ROOT = Path("lab-output")

SECTION_TITLES = {
    "baselines": "1. Baselines: variance and the finite-group scale",
    "gae": "2. GAE: two masks for two questions",
    "ppo": "3. PPO on CartPole",
    "masks": "4. Response tokens: shift, mask, ratios and reductions",
    "rloo": "5. A tiny autoregressive policy trained with RLOO and token-level PPO",
}
# What each section draws: skipped with the reason when its section cannot run.
SECTION_FIGURES = {
    "baselines": ("baseline_spread.png",),
    "gae": (),
    "ppo": ("ppo_learning_curve.png", "ppo_diagnostics.png"),
    "masks": (),
    "rloo": ("rloo_reward.png", "rloo_success.png"),
}


# ---- the plan: what a profile runs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LabPlan:
    """Everything a lab run computes, fixed by the profile (tests shrink it with ``dataclasses.replace``).

    ``ppo_overrides`` are fields of the PPO config replaced after ``profile_config(profile, seed)``;
    ``sequence_overrides`` update ``sequence_profile_config(profile)``.
    """

    profile: str
    baseline_groups: int
    ppo_seeds: tuple[int, ...]
    ppo_overrides: Mapping[str, Any] = field(default_factory=dict)
    sequence_overrides: Mapping[str, Any] = field(default_factory=dict)
    baseline_group_size: int = 8
    baseline_seed: int = 2026
    sequence_seed: int = 5
    rows_shown: int = 6


def plan_for(profile: str) -> LabPlan:
    """The seed notebook's plan for ``profile``: smoke (seeds 11, 37; evaluation every second update) or full."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    if profile == "smoke":
        return LabPlan("smoke", baseline_groups=80_000, ppo_seeds=(11, 37), ppo_overrides={"evaluation_every": 2})
    return LabPlan("full", baseline_groups=400_000, ppo_seeds=(11, 37, 71, 101, 131))


# ---- outcomes: a value, a stub's skip, or an error ------------------------------------------------------------


@dataclass
class Outcome:
    """What running one part of the lab gave: its value, or why it has none (picklable, for worker processes)."""

    value: Any = None
    skipped: str | None = None  # the stub's (or the import error's) one-line message
    error: str | None = None  # "Type: message" and the end of the traceback


def guarded(function: Callable[..., Any], *args: Any) -> Outcome:
    """Run ``function(*args)``; a stub's NotImplementedError or a module that does not import becomes a skip."""
    from kata.impl import ImplementationImportError
    from kata.stub import is_stub_error

    try:
        return Outcome(value=function(*args))
    except NotImplementedError as error:
        if is_stub_error(error):
            return Outcome(skipped=str(error))
        return Outcome(error=_error_text(error))
    except ImplementationImportError as error:
        return Outcome(skipped=str(error))
    except Exception as error:  # noqa: BLE001 - a student's bug must not stop the other sections
        return Outcome(error=_error_text(error))


def _error_text(error: BaseException) -> str:
    frames = traceback.format_tb(error.__traceback__)[-3:]
    return f"{type(error).__name__}: {error}\n" + "".join(frames).rstrip()


def skip_line(message: str) -> str:
    """``not implemented yet: gae_advantages — GUIDE.md §3 (...)`` -> ``skipped: gae_advantages is not
    implemented yet — GUIDE.md §3 (...)``; any other message is kept after ``skipped:``."""
    from kata.stub import NOT_IMPLEMENTED_PREFIX

    if message.startswith(NOT_IMPLEMENTED_PREFIX):
        name, dash, where = message[len(NOT_IMPLEMENTED_PREFIX):].strip().partition(" — ")
        if dash:
            return f"skipped: {name} is not implemented yet — {where}"
    return f"skipped: {message}"


# ---- plain data --------------------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: arrays and tensors become lists, NumPy scalars numbers, NaN and inf None."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def _floats(values: Any) -> np.ndarray:
    """A float64 array of ``values`` in which None (a NaN in results.json) is NaN again."""
    return np.array([math.nan if v is None else v for v in np.asarray(values, dtype=object).ravel()],
                    dtype=np.float64).reshape(np.shape(values))


# ---- the training runs (worker processes or in-process) -------------------------------------------------------


def _load(spec: str) -> Any:
    from kata.impl import load

    return load(spec)


def ppo_job(spec: str, profile: str, seed: int, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Train PPO on CartPole for one seed with the implementation ``spec``; plain data (no networks)."""
    impl = _load(spec)
    config = impl.profile_config(profile, seed=seed)
    if overrides:
        config = dataclasses.replace(config, **dict(overrides))
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


def rloo_job(spec: str, profile: str, seed: int, overrides: Mapping[str, Any], rows_shown: int) -> dict[str, Any]:
    """Train the tiny sequence policy with the implementation ``spec``; its rows decoded, its curves as lists."""
    impl = _load(spec)
    config = impl.sequence_profile_config(profile)
    config.update(dict(overrides))
    started = time.perf_counter()
    run = impl.train_tiny_sequence_policy(seed=seed, **config)
    wall = time.perf_counter() - started
    first = run["first_batch"]
    rows: list[dict[str, Any]] = []
    group_sums: list[float] = []
    if first is not None:
        classes = np.asarray(first.prompt_classes)
        advantages = _as_numpy(first.advantages).astype(np.float64)
        for i in range(min(rows_shown, len(classes))):
            rows.append({
                "prompt": int(classes[i]),
                "text": impl.decode_sequence(_as_numpy(first.input_ids[i])),
                "reward": float(_as_numpy(first.rewards)[i]),
                "advantage": float(advantages[i]),
                "mask": [int(x) for x in _as_numpy(first.response_mask[i]).astype(int).tolist()],
            })
        group_sums = [float(advantages[classes == k].sum()) for k in np.unique(classes)]
    greedy = impl.evaluate_sequence_policy(run["model"], samples_per_prompt=1, deterministic=True)
    greedy_rows = [
        {"prompt": int(p), "text": impl.decode_sequence(_as_numpy(row)), "reward": float(r)}
        for p, row, r in zip(greedy["prompt_classes"], greedy["input_ids"], greedy["rewards"])
    ]
    final = run["final_evaluation"]
    return {
        "seed": seed,
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


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _worker_setup() -> None:
    # One intra-op thread per worker: the networks are tiny, and the workers already fill the cores.
    import torch

    torch.set_num_threads(1)


class Runner:
    """Runs the training jobs: in ``jobs`` worker processes, or lazily in this process when ``jobs == 1``."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.pool: ProcessPoolExecutor | None = None
        if jobs > 1:
            # On Linux a forked worker starts at once, with torch and the implementation already imported (a new
            # interpreter spends seconds importing torch). Elsewhere fork is unsafe or missing: spawn.
            method = "fork" if sys.platform.startswith("linux") else "spawn"
            context = multiprocessing.get_context(method)
            self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_setup)

    def submit(self, function: Callable[..., Any], *args: Any) -> Callable[[], Outcome]:
        """Start ``function(*args)``; returns a callable that waits for its :class:`Outcome`."""
        if self.pool is None:
            cache: list[Outcome] = []

            def compute() -> Outcome:
                if not cache:
                    cache.append(guarded(function, *args))
                return cache[0]

            return compute
        future: Future[Outcome] = self.pool.submit(guarded, function, *args)
        return lambda: _future_outcome(future)

    def close(self, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)
            self.pool = None


def _future_outcome(future: Future[Outcome]) -> Outcome:
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - the worker died (killed, out of memory) or its result did not pickle
        return Outcome(error=_error_text(error))


def default_jobs(training_runs: int) -> int:
    """Worker processes for the training runs: one per idle core, no more than there are runs; 1 means in-process.

    Idle cores are measured over a quarter of a second of the kernel's CPU counters where there are any (Linux);
    elsewhere they are the available cores minus the 1-minute load average. The load average can mislead: on the
    virtual machine these figures come from it stays near 1 while both cores are idle. Measured there
    (benchmarks/lab.py): with the other core busy, two workers were slower than one process (42-60 s against
    32-46 s for the smoke lab: the workers share one core's worth of time and each pays its own start-up); with both
    cores idle, two workers took 13.1 and 16.2 s against 18.0 and 20.3 s in-process.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    idle_fraction = _idle_fraction()
    if idle_fraction is not None:
        idle = cores * idle_fraction
    else:
        load = _load_average()
        idle = cores - load[0] if load else cores
    return max(1, min(cores, training_runs, round(idle)))


def _idle_fraction(seconds: float = 0.25) -> float | None:
    """The share of CPU time spent idle over ``seconds``, from /proc/stat; None where it cannot be read."""

    def counters() -> tuple[float, float]:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [float(value) for value in stat.readline().split()[1:9]]  # user .. steal
        return fields[3] + fields[4], sum(fields)  # idle + iowait, all

    try:
        idle_before, total_before = counters()
        time.sleep(seconds)
        idle_after, total_after = counters()
    except (OSError, ValueError, IndexError):
        return None
    if total_after <= total_before:
        return None
    return (idle_after - idle_before) / (total_after - total_before)


# ---- one lab run ------------------------------------------------------------------------------------------------


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
        from kata.plots import save

        outcome = guarded(lambda: save(make(), self.out / name))
        if outcome.error is not None:
            record["skipped_figures"].append(name)
            self.say(f"failed: figure {name}: {outcome.error.splitlines()[0]}")
            record.setdefault("figure_errors", {})[name] = outcome.error
        else:
            record["figures"].append(name)


def _machine() -> dict[str, Any]:
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cores_available": cores,
        "load_average_at_start": _load_average(),
    }


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


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
        implementation = _load(impl)
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
    try:
        # Start every training run first: the workers train while this process does the quick sections.
        rloo = runner.submit(rloo_job, impl, plan.profile, plan.sequence_seed, dict(plan.sequence_overrides),
                             plan.rows_shown)
        ppo = [runner.submit(ppo_job, impl, plan.profile, seed, dict(plan.ppo_overrides)) for seed in plan.ppo_seeds]
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
    run.results["machine"]["load_average_at_end"] = _load_average()
    data = plain(run.results)
    (folder / "results.json").write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(render_report(data), encoding="utf-8")
    skipped = [key for key, record in run.results["sections"].items() if record["status"] == "skipped"]
    figures = sum(len(record["figures"]) for record in run.results["sections"].values())
    summary = f"{len(SECTION_TITLES) - len(skipped) - len(failed)} sections ran"
    if skipped:
        summary += f", {len(skipped)} skipped ({', '.join(skipped)})"
    if failed:
        summary += f", {len(failed)} failed ({', '.join(failed)})"
    run.say(f"\n{summary}; {figures} figures, report.md and results.json in {folder} "
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
    outcome = guarded(lambda: impl.simulate_group_baseline_bias(
        group_size=plan.baseline_group_size, groups=plan.baseline_groups, seed=plan.baseline_seed))
    if not _settle(run, record, "baselines", outcome):
        return
    result = {key: float(value) for key, value in outcome.value.items()}
    run.results["baselines"] = {"group_size": plan.baseline_group_size, "groups": plan.baseline_groups,
                                "seed": plan.baseline_seed, "result": result}
    run.say(f"    std of the group gradient: no baseline {result['plain_std']:.4f}, same-group mean "
            f"{result['same_group_std']:.4f}, RLOO {result['rloo_std']:.4f}")
    run.say(f"    (G-1)/G predicted {result['predicted_scale']:.4f}, observed {result['observed_scale']:.4f}")
    from kata import plots

    run.figure(record, "baseline_spread.png", lambda: plots.baseline_spread(result, plan.baseline_group_size))


GAE_EXAMPLE = {
    "rewards": [1.0, 100.0],
    "values": [2.0, 0.0],
    "next_values": [10.0, 0.0],
    "terminated": [False, True],
    "trace_cuts": [True, True],
    "gamma": 0.9,
    "gae_lambda": 1.0,
}
GAE_EXPECTED = [8.0, 100.0]


def _gae(run: LabRun, impl: Any, record: dict[str, Any]) -> None:
    e = GAE_EXAMPLE
    outcome = guarded(lambda: impl.gae_advantages(
        np.array(e["rewards"]), np.array(e["values"]), np.array(e["next_values"]), np.array(e["terminated"]),
        np.array(e["trace_cuts"]), gamma=e["gamma"], gae_lambda=e["gae_lambda"]))
    if not _settle(run, record, "gae", outcome):
        return
    advantages = _as_numpy(outcome.value).astype(np.float64)
    target = e["values"][0] + float(advantages[0])
    run.results["gae"] = {"inputs": e, "advantages": advantages, "expected": GAE_EXPECTED,
                          "first_record_target": target}
    run.say(f"    advantages {np.round(advantages, 6).tolist()} (expected {GAE_EXPECTED}); "
            f"first record's value target {target:g}")
    run.check(record, "the seed's GAE example gives [8.0, 100.0]",
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
    curve = impl.aggregate_training_runs(runs)
    per_seed = []
    for result in runs:
        steps = _floats(result["history"]["environment_steps"])
        evaluations = _floats(result["history"]["evaluation_mean"])
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
    first = runs[0]["history"]
    run.results["ppo"] = {
        "seeds": list(plan.ppo_seeds),
        "config_overrides": dict(plan.ppo_overrides),
        "runs": per_seed,
        "training_wait_seconds": waited,
        "training_seconds_summed": sum(r["wall_seconds"] for r in runs),
        "solved_seeds": sum(r["final_evaluation_mean"] >= SOLVED_RETURN for r in runs),
        "curve": {key: _as_numpy(curve[key]) for key in ("environment_steps", "median", "q25", "q75", "all_curves")},
        "diagnostics": {"seed": plan.ppo_seeds[0], **{key: first[key] for key in (
            "update", "approx_kl", "active_clip_fraction", "ratio_outside_fraction")}},
    }
    from kata import plots

    run.figure(record, "ppo_learning_curve.png", lambda: plots.learning_curve(curve, plan.ppo_seeds, plan.profile))
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


MASK_EXAMPLE = {
    # Token positions: BOS, prompt_1, prompt_2, response_1, response_2, EOS, PAD.
    "input_ids": [[1, 10, 11, 20, 21, 2, 0], [1, 12, 30, 2, 0, 0, 0]],
    "prompt_lengths": [3, 2],
    "pad_token_id": 0,
    "eos_token_id": 2,
    # Aligned with the labels input_ids[:, 1:]; extreme values where the mask must remove them.
    "old_log_probs": [[-9.0, -8.0, -1.0, -1.2, -0.8, -20.0], [-7.0, -0.7, -0.9, -30.0, -40.0, -50.0]],
    "new_log_probs": [[9.0, 8.0, -0.7, -1.5, -0.9, 20.0], [7.0, -0.5, -1.2, 30.0, 40.0, 50.0]],
    "advantages": [1.5, -0.8],
    "clip_epsilon": 0.2,
}


def _masks(run: LabRun, impl: Any, record: dict[str, Any]) -> None:
    e = MASK_EXAMPLE
    input_ids = np.array(e["input_ids"])
    outcome = guarded(lambda: impl.response_token_mask(input_ids, np.array(e["prompt_lengths"]),
                                                       pad_token_id=e["pad_token_id"],
                                                       eos_token_id=e["eos_token_id"], include_eos=True))
    if not _settle(run, record, "masks", outcome):
        return
    mask = _as_numpy(outcome.value)
    results: dict[str, Any] = {"inputs": e, "mask": mask.astype(int)}
    run.results["masks"] = results
    run.say(f"    response mask (aligned with input_ids[:, 1:]): {mask.astype(int).tolist()}")
    new, old, advantages = np.array(e["new_log_probs"]), np.array(e["old_log_probs"]), np.array(e["advantages"])
    outcome = guarded(lambda: impl.masked_token_ppo_terms(new, old, advantages, mask, clip_epsilon=e["clip_epsilon"]))
    if not _settle(run, record, "masks", outcome):
        return
    ratio, _, _, pessimistic = (_as_numpy(part).astype(np.float64) for part in outcome.value)
    results.update(ratio=np.round(ratio, 4), pessimistic=np.round(pessimistic, 6))
    run.say(f"    local ratios: {np.round(ratio, 4).tolist()}")
    outcome = guarded(lambda: (impl.sequence_log_probability_ratio(new, old, mask),
                               impl.sequence_probability_ratio(new, old, mask),
                               {reduction: float(impl.masked_token_ppo_objective(
                                   new, old, advantages, mask, clip_epsilon=e["clip_epsilon"], reduction=reduction))
                                for reduction in REDUCTIONS}))
    if not _settle(run, record, "masks", outcome):
        return
    log_ratio, sequence_ratio, reductions = outcome.value
    results.update(sequence_log_ratio=np.round(_as_numpy(log_ratio).astype(np.float64), 4),
                   sequence_ratio=np.round(_as_numpy(sequence_ratio).astype(np.float64), 4), reductions=reductions)
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
    from kata import plots

    run.figure(record, "rloo_reward.png", lambda: plots.sequence_reward_curve(history))
    run.figure(record, "rloo_success.png", lambda: plots.sequence_success_curve(history))


def _number(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


# ---- the report -----------------------------------------------------------------------------------------------


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
        "sample in its own baseline, which scales the expected estimate by (G-1)/G; leave-one-out (RLOO) does not."),
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
        (f"Advantages: [{', '.join(_fmt(a, 6) for a in d['advantages'])}] (expected {d['expected']}); the first record's "
        "value "
        f"target is {_fmt(d['first_record_target'], 6)}."),
        "",
    ]


def _report_ppo(d: Mapping[str, Any]) -> list[str]:
    lines = [
        (f"Seeds {d['seeds']}, profile config with overrides {d['config_overrides'] or 'none'}. Greedy evaluation "
        f"return after the last update (ceiling 500; solved at ≥ {SOLVED_RETURN:g}): {d['solved_seeds']} of "
        f"{len(d['seeds'])} seeds solved."),
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
        f"{d['training_wait_seconds']:.1f} s for them. The curves show the median and interquartile range over the "
        "seeds of a deterministic evaluation every few updates; the diagnostics are batch-local measurements of "
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
    lines += ["```", "", (f"Per-prompt sums of the first rollout's RLOO advantages: "
              f"[{', '.join(f'{total:.1e}' for total in d['group_advantage_sums'])}]."), "", "Greedy responses after training:", "",
              "```"]
    lines += [f"prompt={r['prompt']} | {r['text']} | reward={r['reward']:.2f}" for r in d["greedy"]]
    lines += ["```", ""]
    return lines


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if digits == 0 else f"{value:.{digits}f}"
    return str(value)


# ---- entry points ----------------------------------------------------------------------------------------------


def main(profile: str = "smoke", impl: str = "solutions", out: str | None = None, jobs: int | None = None) -> int:
    """Run the lab (see the module's docstring); the exit code."""
    try:
        plan = plan_for(profile)
    except ValueError as error:
        print(f"kata lab: {error}", file=sys.stderr)
        return 2
    code, _ = run_lab(plan, impl=impl, out=out, jobs=jobs)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kata.lab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="smoke",
                        help="smoke: the quick end-to-end check (default); full: five seeds and longer runs")
    parser.add_argument("--impl", default="solutions", metavar="exercises|solutions|PATH",
                        help="implementation to run (default solutions)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: a fresh lab-output/<timestamp>)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes for the training runs (default: one per idle core; 1: in-process)")
    return parser


def cli(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return main(profile=args.profile, impl=args.impl, out=args.out, jobs=args.jobs)


if __name__ == "__main__":
    # Run through the imported module, so worker processes find the jobs under kata.lab, not __main__.
    from kata.lab import cli as _cli

    sys.exit(_cli())
