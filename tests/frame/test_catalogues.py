"""The mistake and variant catalogues: patches and manifest agree, every patch applies to its reference and says
only how the code differs, and the runner asks for what the profiles promise (fresh seeds for random profiles, no
shrinking, no example database)."""

from __future__ import annotations

import io
import tokenize

import pytest
from hypothesis import Phase, settings

from kata.catalogue.runs import Run, catalogue_entries, catalogue_problems, hypothesis_profile
from kata.concepts.impl import CATALOGUES, REPOSITORY_ROOT, patched_source
from kata.concepts.manifest import CONCEPTS

pytestmark = pytest.mark.frame
NAMES = [c.name for c in CONCEPTS]


def test_mistake_patches_and_manifest_agree_and_every_patch_applies():
    problems = catalogue_problems("mistake", NAMES, lambda c: (m.name for m in c.mistakes))
    assert problems == [], ("every mistake listed in kata/concepts/course.toml has its patch under mistakes/, every "
                            "patch is listed, and each applies to the reference as it is now:\n" + "\n".join(problems))


def test_variant_patches_and_manifest_agree_and_every_patch_applies():
    problems = catalogue_problems("variant", NAMES, lambda c: (v.name for v in c.variants))
    assert problems == [], ("every variant listed in kata/concepts/course.toml has its patch under variants/, every "
                            "patch is listed, and each applies to the reference as it is now:\n" + "\n".join(problems))


def comments(text: str) -> set[str]:
    return {token.string for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT}


def test_every_entry_is_explained_once_in_the_course_data():
    for c in CONCEPTS:
        for mistake in c.mistakes:
            assert mistake.misunderstanding, f"{c.name}/{mistake.name}: the course data says what was misunderstood"
        for variant in c.variants:
            assert variant.summary and variant.reason, (
                f"{c.name}/{variant.name}: the course data says what the variant does and why it is valid")
    solutions = REPOSITORY_ROOT / "solutions"
    for kind in ("mistake", "variant"):
        for entry in catalogue_entries(kind, NAMES):
            reference = (solutions / f"{entry.partition('/')[0]}.py").read_text(encoding="utf-8")
            patched = patched_source(solutions, entry, kind)
            added = comments(patched) - comments(reference)
            assert not added, (f"{CATALOGUES[kind].name}/{entry}.diff adds the comments {sorted(added)}: the {kind} "
                               "is explained in kata/concepts/course.toml, once; its patch changes code only")
            long = [number for number, line in enumerate(patched.splitlines(), start=1) if len(line) > 120]
            assert not long, f"{CATALOGUES[kind].name}/{entry}.diff writes lines over 120 characters: {long}"


def test_a_listed_file_that_is_missing_is_a_problem():
    problems = catalogue_problems("variant", ["gae"], lambda c: ("no_such_variant", *(v.name for v in c.variants)))
    assert problems == ["gae/no_such_variant: listed in kata/concepts/course.toml but "
                        "variants/gae/no_such_variant.diff is missing"], (
        f"a listed variant without its patch is reported by name and path: {problems}")


@pytest.mark.parametrize("name", ["dev", "ci", "thorough"])
def test_no_shrink_profiles_keep_the_examples_and_drop_shrinking_and_the_database(name):
    profile = settings.get_profile(hypothesis_profile(name, shrink=False))
    parent = settings.get_profile(name)
    assert profile.max_examples == parent.max_examples and profile.derandomize == parent.derandomize, (
        f"no-shrink keeps {name}'s examples, derandomisation: {profile.max_examples}, {profile.derandomize}")
    assert Phase.shrink not in profile.phases and profile.database is None, (
        f"{name}-no-shrink drops shrinking and the example database: {profile.phases}, {profile.database!r}")


def test_a_run_names_its_seed_its_entry_and_whether_slow_tests_run():
    mistake = Run("mistake", "gae/lambda_not_applied", "dev-no-shrink", seed=123)
    arguments = mistake.arguments("solutions")
    assert "--mistake=gae/lambda_not_applied" in arguments and "--hypothesis-seed=123" in arguments, (
        f"a mistake run asks for its entry and its seed: {arguments}")
    assert arguments[arguments.index("-m") + 1] == "gae and not slow" and "-x" in arguments, (
        f"a mistake run selects its concept's fast tests and stops at the first failure (-x): {arguments}")
    variant = Run("variant", "gae/discount_matrix", "ci-no-shrink", slow=True)
    arguments = variant.arguments("solutions")
    assert arguments[arguments.index("-m") + 1] == "gae" and "-x" not in arguments, (
        f"a slow variant run selects all its concept's tests and runs them all (no -x): {arguments}")
    assert not any(a.startswith("--hypothesis-seed") for a in arguments), (
        f"a run without a seed leaves Hypothesis its own seed: {arguments}")


def test_a_run_asks_for_the_report_its_first_message_is_read_from(tmp_path):
    from kata.catalogue.runs import Outcome, _first_message

    run = Run("mistake", "gae/lambda_not_applied", "ci-no-shrink")
    report = tmp_path / "report.json"
    assert f"--kata-report={report}" in run.arguments("solutions", str(report)), (
        "a run given a report file asks kata.testing.progress to write it")
    assert not any(a.startswith("--kata-report") for a in run.arguments("solutions")), (
        "a run given no report file asks for none")
    report.write_text('{"concepts": {"gae": {"message": "AssertionError: lambda weighs each later TD error"}}}')
    assert _first_message(run, str(report)) == "AssertionError: lambda weighs each later TD error", (
        "the first message is the run's concept's message in the report")
    assert _first_message(run, str(tmp_path / "missing.json")) == "", "no report, no message (never an error)"
    assert Outcome(run, 1, "", 0.1).first_message == "", "an outcome without a report has no first message"
