"""The lab (kata/lab/, kata/lab/plots.py): every section end to end on the reference, and what stubs and errors do.

The runs are the smoke plan shrunk to seconds (a few hundred PPO steps, two RLOO iterations): they check that every
section runs, draws and reports, not that the agents learn (the concepts' slow tests and the benchmarks do that).
"""

from __future__ import annotations

import dataclasses
import doctest
import inspect
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from kata.concepts.impl import REPOSITORY_ROOT, load
from kata.lab.outcome import plain
from kata.lab.plan import GAE_EXAMPLE, GAE_EXPECTED, SECTION_FIGURES, SECTION_TITLES, plan_for
from kata.lab.run import main, run_lab
from kata.concepts.manifest import concept, concept_of_export

pytestmark = [pytest.mark.frame, pytest.mark.lab]

TINY = dataclasses.replace(
    plan_for("smoke"),
    baseline_groups=2_000,
    ppo_overrides={"total_steps": 512, "num_envs": 8, "evaluation_every": 1, "evaluation_episodes": 2},
    sequence_overrides={"iterations": 2, "evaluation_every": 1, "evaluation_samples": 4},
)
SKIP_LINE = re.compile(r"^skipped: (\w+) is not implemented yet — GUIDE\.md §(\d) \(run `kata hint (\w+)`\)$")
STUB_GAE = '''"""gae_advantages left as a stub."""
from kata.concepts.stub import not_implemented


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    raise not_implemented("gae_advantages")
'''


def test_the_docstring_example_of_gae_advantages_is_the_labs():
    """The example is written once, in kata.lab.plan; the docstring (a doctest, copied into the stub) shows it."""
    function = load("solutions").gae_advantages
    examples = doctest.DocTestParser().get_examples(function.__doc__)
    calls = []
    namespace = {"gae_advantages": lambda *args, **kwargs: calls.append(
        inspect.signature(function).bind(*args, **kwargs).arguments)}
    for example in examples:
        exec(example.source, namespace)
    assert len(calls) == 1 and plain(dict(calls[0])) == GAE_EXAMPLE, (
        f"gae_advantages' docstring example calls it once, on kata.lab.plan.GAE_EXAMPLE {GAE_EXAMPLE}: {calls}")
    shown = eval(examples[-1].want, {"array": np.array})  # noqa: S307 (the reference's own docstring)
    np.testing.assert_allclose(shown, GAE_EXPECTED, err_msg="the docstring shows kata.lab.plan.GAE_EXPECTED")


def _lab(tmp_path: Path, impl: str, plan=TINY, jobs: int = 1) -> tuple[int, Path, list[str], dict]:
    stream = io.StringIO()
    code, folder = run_lab(plan, impl=impl, out=tmp_path / "out", jobs=jobs, stream=stream, progress=False)

    def no_nan(constant: str) -> None:
        raise AssertionError(f"results.json holds {constant}: NaN and infinity must be written as null")

    results = json.loads((folder / "results.json").read_text(encoding="utf-8"), parse_constant=no_nan)
    return code, folder, stream.getvalue().splitlines(), results


def _solutions_with(tmp_path: Path, **modules: str) -> str:
    """A copy of solutions/ in which each keyword names a concept module replaced by the given source."""
    folder = tmp_path / "submission"
    shutil.copytree(REPOSITORY_ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    return str(folder)


def _backward() -> None:
    """A backward() in this process, as a notebook's earlier cell or an earlier test runs one (on a CUDA build with a
    GPU visible it starts autograd's device threads, which a forked child's own backward() cannot live with)."""
    import torch

    weight = torch.ones(3, requires_grad=True)
    (weight * 2.0).sum().backward()
    assert weight.grad is not None, "the backward() ran"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, list[str], dict]:
    # Two worker processes (the path `kata lab` takes on a two-core machine), started after a backward() here.
    _backward()
    return _lab(tmp_path_factory.mktemp("reference"), "solutions", jobs=2)


def _timeless(value):
    """``value`` without its wall-clock figures (seconds, elapsed and wall times), which no seed fixes."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()
                if not any(word in k for word in ("seconds", "elapsed", "wall"))}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.mark.e2e
def test_the_training_runs_give_the_same_numbers_however_their_workers_start(monkeypatch):
    from kata.lab import sections
    from kata.lab.workers import Runner

    _backward()
    results = {}
    for method in ("fork", "forkserver", "spawn"):
        monkeypatch.setenv("KATA_START_METHOD", method)
        runner = Runner(2)
        try:
            assert runner.start_method == method, (
                f"$KATA_START_METHOD={method} starts the workers: {runner.start_method}")
            jobs = [runner.submit(sections.rloo_job, "solutions", TINY),
                    runner.submit(sections.ppo_job, "solutions", TINY, 11)]
            outcomes = [job() for job in jobs]
        finally:
            runner.close()
        assert all(o.error is None and o.skipped is None for o in outcomes), (
            f"the runs end without error in workers started by {method}: {[o.error for o in outcomes]}")
        results[method] = [_timeless(plain(o.value)) for o in outcomes]
    assert results["forkserver"] == results["fork"] and results["spawn"] == results["fork"], (
        "the seed-fixed RLOO and PPO runs give the same numbers, bit for bit, in forked, forkserver and spawned "
        "workers")


def test_every_section_runs_on_the_reference_and_writes_its_figures(reference):
    code, folder, lines, results = reference
    assert code == 0, "the lab on the reference must exit 0:\n" + "\n".join(lines)
    assert list(results["sections"]) == list(SECTION_TITLES), "sections must run in the seed notebook's order"
    for key, record in results["sections"].items():
        assert record["status"] == "ran", f"section {key} did not run on the reference: {record['message']}"
        assert all(check["passed"] for check in record["checks"]), f"a check of section {key} failed"
        assert record["figures"] == list(SECTION_FIGURES[key]), (
            f"section {key} must draw {SECTION_FIGURES[key]}"
        )
        for name in record["figures"]:
            assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    assert not any(line.startswith(("skipped:", "failed:", "check failed:")) for line in lines), (
        "no skip, failure or failed-check line on the reference:\n" + "\n".join(lines))


def test_results_hold_the_seed_notebooks_numbers(reference):
    _, _, _, results = reference
    np.testing.assert_allclose(results["gae"]["advantages"], GAE_EXPECTED,
                               err_msg=f"the lab's GAE section reproduces the two-mask worked example, {GAE_EXPECTED}")
    target = GAE_EXAMPLE["values"][0] + GAE_EXPECTED[0]
    assert results["gae"]["first_record_target"] == pytest.approx(target), (
        f"the first record's target is V_0 + A_0 = {target}: {results['gae']['first_record_target']}")
    masks = results["masks"]
    assert masks["mask"] == [[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], (
        f"the seed notebook's padding mask: {masks['mask']}")
    np.testing.assert_allclose(masks["sequence_log_ratio"], [-0.1, -0.1],
                               err_msg="the lab's sequence log-ratio is the sum of the token log-ratios, -0.1 per row")
    np.testing.assert_allclose(masks["sequence_ratio"], [0.9048, 0.9048],
                               err_msg="the lab's sequence ratio is exp(-0.1) = 0.9048 per row")
    np.testing.assert_allclose(
        [masks["reductions"][r] for r in ("token_mean", "sequence_mean", "sequence_sum_mean")],
        [0.530272, 0.307133, 1.325681],
        atol=1e-6,
        err_msg="the lab's three reductions give the worked example's values",
    )
    baselines = results["baselines"]["result"]
    for key in ("plain_std", "same_group_std", "rloo_std", "predicted_scale", "observed_scale"):
        assert isinstance(baselines[key], float), f"baselines result lacks {key}"
    assert baselines["predicted_scale"] == pytest.approx(7 / 8), (
        f"the predicted RLOO scale is 7/8 for groups of 8: {baselines['predicted_scale']}")
    ppo = results["ppo"]
    assert [run["seed"] for run in ppo["runs"]] == [11, 37], (
        f"PPO runs with the plan's seeds 11 and 37: {[run['seed'] for run in ppo['runs']]}")
    assert [run["environment_steps"] for run in ppo["runs"]] == [512, 512], (
        f"each PPO run takes the 512 steps asked for: {[run['environment_steps'] for run in ppo['runs']]}")
    assert np.shape(ppo["curve"]["all_curves"]) == (2, len(ppo["curve"]["environment_steps"])), (
        f"one curve per run, one point per evaluation: {np.shape(ppo['curve']['all_curves'])}")
    assert len(ppo["diagnostics"]["approx_kl"]) == len(ppo["diagnostics"]["update"]) == 2, (
        f"one diagnostics record per update, two updates: {len(ppo['diagnostics']['approx_kl'])}")
    rloo = results["rloo"]
    assert len(rloo["first_rows"]) == TINY.rows_shown and len(rloo["greedy"]) == 3, (
        f"{TINY.rows_shown} first rows and 3 greedy rows: {len(rloo['first_rows'])}, {len(rloo['greedy'])}")
    assert all(abs(total) <= 1e-9 for total in rloo["group_advantage_sums"]), (
        f"RLOO advantages sum to zero in every group: {rloo['group_advantage_sums']}")


def test_report_shows_the_results_numbers_and_links_every_figure(reference):
    _, folder, _, results = reference
    report = (folder / "report.md").read_text(encoding="utf-8")
    for record in results["sections"].values():
        assert f"## {record['title']}" in report, f"report.md has a heading for section {record['title']!r}"
        for name in record["figures"]:
            assert f"![{name}]({name})" in report, f"report.md does not show {name}"
    for value in results["masks"]["reductions"].values():
        assert f"{value:.6f}" in report, f"report.md shows the masks reduction {value:.6f}"
    for run in results["ppo"]["runs"]:
        assert (
            f"| {run['seed']} | {run['final_evaluation_mean']:.2f} ± {run['final_evaluation_std']:.2f} |"
            in report
        ), f"report.md has a row for PPO seed {run['seed']} with its final evaluation mean ± std"
    assert f"{results['baselines']['result']['observed_scale']:.6f}" in report, (
        "report.md shows the observed baseline scale")
    for row in results["rloo"]["greedy"]:
        assert row["text"] in report, f"report.md shows the greedy row {row['text']!r}"


def test_stubs_give_one_skip_line_per_section_and_the_lab_goes_on(tmp_path, given_stubs):
    code, folder, lines, results = _lab(tmp_path, str(given_stubs))
    assert code == 0, "a stub that is not implemented yet is not a failure of the lab:\n" + "\n".join(lines)
    assert (folder / "report.md").exists(), "the lab writes report.md when sections are skipped"
    assert list(results["sections"]) == list(SECTION_TITLES), (
        "every section must be reached, whatever is skipped"
    )
    skip_lines = [line for line in lines if line.startswith("skipped:")]
    skipped = [key for key, record in results["sections"].items() if record["status"] == "skipped"]
    assert len(skip_lines) == len(skipped), (
        "each skipped section prints exactly one skip line:\n" + "\n".join(lines)
    )
    for line in skip_lines:
        match = SKIP_LINE.match(line)
        assert match, (
            f"a skip line must read 'skipped: NAME is not implemented yet — GUIDE.md §N (...)': {line!r}"
        )
        owner = concept_of_export(match.group(1))
        assert (str(owner.number), owner.name) == (match.group(2), match.group(3)), (
            f"the skip line names the owner's section and concept {(owner.number, owner.name)}: {line!r}")
    for key in skipped:
        record = results["sections"][key]
        assert record["figures"] == [] and record["skipped_figures"] == list(SECTION_FIGURES[key]), (
            f"skipped: no figure drawn, the skipped ones listed: {record['figures']}, {record['skipped_figures']}")
        assert SKIP_LINE.match(record["message"]), (
            f"a skipped section's message is its skip line: {record['message']!r}")


def test_a_stub_skips_what_needs_it_and_an_error_fails_only_its_section(tmp_path, reference):
    # gae_advantages left as a stub; sequence_probability_ratio raising, as a student's bug would.
    broken = (REPOSITORY_ROOT / "solutions" / "token_objectives.py").read_text(encoding="utf-8") + (
        "\n\ndef sequence_probability_ratio(new_log_probs, old_log_probs, mask):\n"
        "    raise RuntimeError('a bug in the student code')\n"
    )
    code, _, lines, results = _lab(tmp_path, _solutions_with(tmp_path, gae=STUB_GAE, token_objectives=broken))
    status = {key: record["status"] for key, record in results["sections"].items()}
    assert status == {
        "baselines": "ran",
        "gae": "skipped",
        "ppo": "skipped",
        "masks": "failed",
        "rloo": "ran",
    }, f"the stub skips GAE and PPO, the error fails only masks, the rest runs: {status}"
    line = f"skipped: gae_advantages is not implemented yet — {concept('gae').guide_section} (run `kata hint gae`)"
    assert lines.count(line) == 2, (
        "the GAE example and PPO (which needs GAE) must each say why they are skipped"
    )
    assert "failed: RuntimeError: a bug in the student code" in lines, (
        "the failed section prints its error:\n" + "\n".join(lines))
    assert code == 1, "a section that raises must make the lab exit 1"
    assert results["masks"]["mask"] == [[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]], (
        "what ran before the error is kept"
    )
    # The same seeds in this process and in the reference's worker processes: the same numbers, bit for bit.
    assert results["baselines"] == reference[3]["baselines"], (
        "baselines in this process equal the reference's from worker processes, bit for bit")
    timeless = [
        {k: v for k, v in r["rloo"]["history"].items() if k != "elapsed_seconds"}
        for r in (results, reference[3])
    ]
    assert timeless[0] == timeless[1], "the RLOO history (elapsed time aside) equals the reference's, bit for bit"
    assert results["rloo"]["first_rows"] == reference[3]["rloo"]["first_rows"], (
        "the RLOO first rows equal the reference's")


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert main(profile="medium") == 2, "an unknown profile exits 2"
    assert "profile must be one of smoke, full" in capsys.readouterr().err, (
        "an unknown profile is named on stderr with the valid ones")
    code, _ = run_lab(TINY, impl=str(tmp_path / "missing"), out=tmp_path / "out")
    assert code == 2 and "--impl" in capsys.readouterr().err, (
        f"a missing --impl folder exits 2 and names --impl on stderr: {code}")


def test_the_notebook_script_compiles_and_its_ipynb_is_in_step():
    from kata.lab import notebook

    compile(notebook.SCRIPT.read_text(encoding="utf-8"), str(notebook.SCRIPT), "exec")
    pytest.importorskip("jupytext", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
    assert notebook.check() == [], "notebooks/lab.ipynb is out of step: run python -m kata.lab.notebook --write"
