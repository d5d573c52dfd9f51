"""`kata diagnose`: a catalogued mistake is named, the reference, a valid variant and a stub get no diagnosis, and a
function wrong in another way as well gets none (a wrong accusation is worse than silence).

The whole catalogue's recall and precision are measured by ``python -m kata.catalogue.diagnose --evaluate`` (a CI step);
these tests pin the kinds of probe: values, gradients (detach contracts), random streams, private helpers and loops.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from kata.catalogue import diagnose as diagnosis
from kata.concepts.impl import REPOSITORY_ROOT, load
from kata.concepts.manifest import CONCEPTS, concept
from kata.catalogue.observations import agree
from kata.catalogue.probes import PROBES
from kata.grading.diagnoses import diagnose_in_subprocess

pytestmark = pytest.mark.frame


@pytest.fixture(scope="module")
def catalogue():
    return diagnosis.Catalogue()


@pytest.mark.parametrize("mistake", [
    "gae/truncation_as_termination",  # values
    "reinforce/advantages_not_detached",  # the same values, a gradient where there must be none
    "clipped_surrogate/old_log_probs_not_detached",
    "ppo_cartpole/minibatches_with_replacement",  # a random stream: observed as sizes and "is a permutation"
    "ppo_cartpole/no_gradient_clipping",  # a private helper, seen through ppo_update
    "rloo_loop/sampling_from_the_first_position",  # a sampler: greedy rows
    "rloo_loop/old_log_probs_not_frozen",  # a loop: seen in its result and the parameters after it
])
def test_a_catalogued_mistake_is_named(catalogue, mistake):
    owner = concept(mistake.partition("/")[0])
    diagnoses = diagnosis.diagnose(load("solutions", mistake=mistake), [owner], catalogue)
    named = {d.mistake for d in diagnoses}
    assert named == {mistake}, f"binding {mistake} into the reference must be diagnosed as it alone; got {diagnoses}"
    assert all(d.matched == d.probes > 0 for d in diagnoses), "a diagnosis holds on every distinguishing probe"


def test_the_reference_a_variant_and_the_stubs_get_no_diagnosis(catalogue, given_stubs):
    assert diagnosis.diagnose(load("solutions"), CONCEPTS, catalogue) == [], "the reference is never diagnosed"
    variant = load("solutions", variant="ppo_cartpole/argsort_permutation")
    assert diagnosis.diagnose(variant, CONCEPTS, catalogue) == [], (
        "a valid variant drawing its permutation from another random stream must not be accused")
    assert diagnosis.diagnose(load(given_stubs), CONCEPTS, catalogue) == [], (
        "a stub (NotImplementedError) is not diagnosed")


TWO_MISTAKES = '''
import torch
from kata.arrays import as_float_tensor, check_binary_mask, like_inputs


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    """Truncation taken for termination AND lambda ignored: two misunderstandings at once."""
    rewards_t, values_t, next_values_t = (as_float_tensor(x, "x") for x in (rewards, values, next_values))
    carries = (~check_binary_mask("trace_cuts", trace_cuts)).to(rewards_t.dtype)
    deltas = rewards_t + gamma * next_values_t * carries - values_t
    advantages, following = [], torch.zeros_like(deltas[0])
    for t in reversed(range(deltas.shape[0])):
        following = deltas[t] + gamma * carries[t] * following
        advantages.insert(0, following)
    return like_inputs(torch.stack(advantages), rewards, values, next_values)
'''

VECTORISED_TRUNCATION = '''
import numpy as np
from kata.arrays import as_float_tensor, check_binary_mask


def gae_advantages(rewards, values, next_values, terminated, trace_cuts, gamma, gae_lambda):
    """The truncation mistake written another way: NumPy, float64 throughout, a discount matrix."""
    rewards_a, values_a, next_values_a = (as_float_tensor(x, "x").numpy() for x in (rewards, values, next_values))
    cut = check_binary_mask("trace_cuts", trace_cuts).numpy()
    deltas = rewards_a + np.where(cut, 0.0, gamma * next_values_a) - values_a
    result = np.zeros_like(deltas)
    following = np.zeros_like(deltas[0])
    for t in range(len(deltas) - 1, -1, -1):
        following = deltas[t] + np.where(cut[t], 0.0, gamma * gae_lambda * following)
        result[t] = following
    return result
'''


def submission(tmp_path, name, gae_source):
    folder = tmp_path / name
    shutil.copytree(REPOSITORY_ROOT / "solutions", folder)
    (folder / "gae.py").write_text(textwrap.dedent(gae_source))
    return load(folder)


def test_another_way_of_writing_the_mistake_is_named_and_two_mistakes_at_once_are_not(catalogue, tmp_path):
    [named] = diagnosis.diagnose(submission(tmp_path, "vectorised", VECTORISED_TRUNCATION), [concept("gae")],
                                 catalogue)
    assert named.mistake == "gae/truncation_as_termination", "the diagnosis is by behaviour, not by code"
    [silent] = diagnosis.diagnose(submission(tmp_path, "two", TWO_MISTAKES), [concept("gae")], catalogue)
    assert silent.function == "gae_advantages" and silent.mistake is None, (
        "code that differs from every catalogued mistake somewhere must get no diagnosis")


def test_json_and_the_student_sentence(capsys):
    code = diagnosis.main(["gae", "--impl", "solutions", "--mistake", "gae/lambda_not_applied", "--json"])
    report = json.loads(capsys.readouterr().out)
    [entry] = report["diagnoses"]
    assert code == 0 and {key: value for key, value in entry.items() if key != "sentence"} == {
        "concept": "gae", "function": "gae_advantages", "mistake": "gae/lambda_not_applied",
        "matched": entry["probes"], "probes": entry["probes"]}, (
        f"--json exits 0 and gives the one diagnosis with every probe matched: {code}, {report}")
    sentence = entry["sentence"]
    assert sentence == diagnosis.Diagnosis(**{k: v for k, v in entry.items() if k != "sentence"}).sentence(), (
        f"--json carries the sentence a student reads: {sentence!r}")
    assert sentence.startswith("your gae_advantages behaves like the catalogued mistake 'the recursion decays by "
                               "gamma only, ignoring lambda' on "), (
        f"the sentence names the function and the catalogued misunderstanding: {sentence!r}")
    gae = concept("gae")
    assert sentence.endswith(f"probes: {gae.guide_section}, `kata hint gae --level 3`"), (
        f"the sentence ends with the probe count and where the hint is: {sentence!r}")


def test_every_mistake_points_at_an_existing_hint():
    for c in CONCEPTS:
        for mistake in c.mistakes:
            assert 1 <= mistake.hint <= len(c.hints), f"{c.name}/{mistake.name}: hint level {mistake.hint}"


def test_probes_are_drawn_once_and_always_the_same():
    probe = PROBES["gae_advantages"]
    first = probe.cases()
    again = probe.draw_cases()
    assert len(first) == len(again) and all(
        agree(tuple(a[k] for k in sorted(a)), tuple(b[k] for k in sorted(b)), 0.0, 0.0) for a, b in zip(first, again)
    ), "the probes must not depend on what was drawn or imported before"


def test_every_export_is_probed_or_says_why_not():
    from kata.catalogue.probes import STRATEGIES, UNPROBED

    for c in CONCEPTS:
        module = importlib.import_module(f"{STRATEGIES}.{c.name}")
        named = sorted([probes.function for probes in module.PROBES] + list(module.UNPROBED))
        assert named == sorted(c.exports), (
            f"{module.__name__} gives each public function of {c.name} a probe set or an UNPROBED reason, once: "
            f"it names {named}, the concept exports {sorted(c.exports)}")
        assert all(reason.strip() for reason in module.UNPROBED.values()), f"{module.__name__}: a reason is empty"
        for name in c.exports:
            assert (name in PROBES) != (name in UNPROBED), f"{name}: probed, or listed in UNPROBED with a reason"
            assert name not in PROBES or PROBES[name].concept == c.name, (
                f"{name} is probed under {PROBES[name].concept!r}, not under its concept {c.name!r}")


def test_the_probe_machinery_names_no_concept_and_no_function():
    source = (REPOSITORY_ROOT / "kata" / "catalogue" / "probes.py").read_text()
    named = [name for c in CONCEPTS for name in (c.name, *c.exports) if re.search(rf"\b{name}\b", source)]
    assert not named, (f"kata/catalogue/probes.py only collects each concept's probes from its module of "
                       f"kata/testing/strategies/, so that a new concept never edits it; it names {named}")


def test_evaluate_one_concept(catalogue, capsys):
    # gae: the cheapest catalogue to evaluate (2.2 s; baselines' simulations 4.8 s), and its observations are the
    # module's already; CI's `python -m kata.catalogue.diagnose --evaluate` evaluates every concept.
    scores = diagnosis.evaluate([concept("gae")], catalogue)
    assert diagnosis.passes(scores) and scores[0].recall == 1.0 and scores[0].precision == 1.0, capsys.readouterr().out


def test_only_started_modules_are_worth_a_diagnosis(tmp_path, given_stubs):
    from kata.concepts.sources import started

    shutil.copy2(given_stubs / "gae.py", tmp_path / "gae.py")  # untouched
    shutil.copy2(REPOSITORY_ROOT / "solutions" / "baselines.py", tmp_path / "baselines.py")  # written
    assert started(tmp_path, ["gae", "baselines"], REPOSITORY_ROOT / "solutions") == ["baselines"], (
        "an untouched stub is left out of the diagnosis; a written module is kept")


def test_check_asks_for_a_diagnosis_only_of_a_started_module_and_prints_the_named_mistakes(monkeypatch, tmp_path):
    from kata.student import commands

    asked = []
    monkeypatch.setattr(commands, "started", lambda folder, names, reference: [])
    monkeypatch.setattr(commands.status, "all_states", lambda: [])
    assert commands.pytest_arguments(concept("gae"), slow=False)[-2:] != ["-p", commands.DIAGNOSIS_PLUGIN], (
        "without a diagnosis file, no plugin is asked for")
    monkeypatch.setattr(commands, "run_check", commands.run_check)

    def runner(arguments):
        asked.append(arguments)
        return 5  # stop right after pytest: only the arguments matter here

    commands.run_check(concept("gae"), run_pytest=runner)
    assert not any(commands.DIAGNOSIS_PLUGIN in argument for argument in asked[-1]), (
        f"an untouched stub is not diagnosed: no plugin is asked for ({asked[-1]})")
    monkeypatch.setattr(commands, "started", lambda folder, names, reference: list(names))  # the student wrote gae
    commands.run_check(concept("gae"), run_pytest=runner)
    assert commands.DIAGNOSIS_PLUGIN in asked[-1] and any(a.startswith("--kata-diagnose=") for a in asked[-1]), (
        f"a started module's check asks pytest for the diagnosis plugin: {asked[-1]}")

    found = [diagnosis.Diagnosis("gae", "gae_advantages", "gae/truncation_as_termination", 7, 7),
             diagnosis.Diagnosis("gae", "gae_advantages", None, 3, 9)]
    report = tmp_path / "diagnosis.json"
    report.write_text(json.dumps({"diagnoses": [{**vars(d), "sentence": d.sentence()} for d in found]}))
    assert commands.diagnosis_sentences(report) == [found[0].sentence()], (
        "one line per named mistake; silence where none is named")
    assert commands.diagnosis_sentences(tmp_path / "missing.json") == [], "no diagnosis file prints nothing"


@pytest.mark.e2e
def test_the_plugin_diagnoses_a_failed_concept_in_the_test_process(tmp_path):
    report = tmp_path / "diagnosis.json"
    # One failure is enough (-x), and its smallest example is not needed (no shrinking): the diagnosis runs on the
    # concept whatever test failed first.
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_gae.py", "--impl=solutions", "--mistake=gae/lambda_not_applied",
         "-m", "gae and not slow", "-q", "-x", "-p", "no:cacheprovider", "-p", "kata.catalogue.pytest_plugin",
         f"--kata-diagnose={report}", "--kata-no-progress"], cwd=REPOSITORY_ROOT, capture_output=True, text=True,
        env=dict(os.environ, KATA_HYPOTHESIS_PROFILE="ci-no-shrink"))
    assert completed.returncode == 1, f"the bound mistake fails the gae tests: {completed.stdout[-1500:]}"
    [entry] = json.loads(report.read_text())["diagnoses"]
    assert entry["mistake"] == "gae/lambda_not_applied" and entry["sentence"].startswith("your gae_advantages"), (
        f"the plugin names the mistake the failed concept behaves like, in the student's sentence: {entry}")


@pytest.mark.e2e
def test_a_child_process_diagnoses_submitted_code():
    [found] = diagnose_in_subprocess("solutions", ["gae"], extra=("--mistake", "gae/lambda_not_applied"))
    completed = subprocess.run([sys.executable, "-m", "kata.catalogue.diagnose", "gae", "--impl", "solutions", "--json",
                                "--mistake", "gae/lambda_not_applied"], capture_output=True, text=True, check=True,
                               cwd=REPOSITORY_ROOT)
    assert json.loads(completed.stdout)["diagnoses"][0]["sentence"] == found.sentence(), (
        "--json carries each diagnosis's sentence, the line kata check prints")
    assert found.mistake == "gae/lambda_not_applied", (
        f"the child process names the mistake bound into the reference: {found}")
    assert diagnose_in_subprocess("solutions", ["gae"], timeout=0.01) == [], "no answer in time: none"


def test_no_diagnosis_never_reads_like_a_verdict(capsys, given_stubs):
    assert diagnosis.main(["gae", "--impl", str(given_stubs)]) == 0, "kata diagnose on the stubs exits 0"
    stubs = capsys.readouterr().out
    assert "not implemented yet" in stubs and "behaves like the reference" not in stubs, (
        f"on untouched stubs the diagnosis says they are stubs, never that they behave like the reference: {stubs}")
    assert diagnosis.main(["gae", "--impl", "solutions"]) == 0, "kata diagnose on the reference exits 0"
    same = capsys.readouterr().out
    assert "behaves like the reference" in same and "not the tests" in same and "kata check gae" in same, (
        f"where no probe tells the code from the reference, the diagnosis says the probes are no test: {same}")
