"""The repository's promises about installation and CI, checked where they are written."""

from __future__ import annotations

import re
import tomllib

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT

pytestmark = pytest.mark.frame


def ci_variable(name: str) -> str:
    match = re.search(rf"^{name}='([^']*)'$", (ROOT / ".ci" / "run").read_text(), flags=re.MULTILINE)
    assert match, f".ci/run must define {name}='...'"
    return match.group(1)


def test_readme_opens_with_the_two_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    setup, tests = ci_variable("SETUP"), ci_variable("TESTS")
    assert f"{setup} && .venv/bin/kata lab --impl solutions" in readme, "README's lab command must use .ci/run's SETUP"
    assert f"{setup} && {tests}" in readme, "README's test command must be .ci/run's SETUP && TESTS"


def test_torch_is_pinned_to_its_cpu_build():
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0" in requirements, "requirements.txt must pin the CPU build's release"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch = [d for d in project["dependencies"] if d.startswith("torch")]
    assert torch == ["torch>=2.4,<=2.13.0"], ("pyproject must not admit a newer torch than the pinned CPU build, nor "
                                             "one older than 2.4, whose fused Adam has no CPU kernel")


def test_ci_runs_readmes_test_command_and_treats_no_tests_as_a_failure():
    run = (ROOT / ".ci" / "run").read_text()
    assert '"$status" -eq 5' in run and "exit 1" in run, (
        "`.ci/run` turns pytest's exit status 5 (no tests collected) into a failure (exit 1)")
    for name in ("TESTS", "E2E_TESTS", "RELEASE_TESTS", "PARITY_TESTS"):
        ci_variable(name)
        assert f'run_pytest "${name}"' in run, f".ci/run runs ${name} through the guard against exit 5"
    assert run.index('run_pytest "$TESTS"') < run.index('run_pytest "$PARITY_TESTS"'), (
        "the parity suite runs after the reference suite")
    assert ci_variable("E2E_TESTS") == f"{ci_variable('TESTS')} -m e2e", (
        "the end-to-end tests README's test command leaves out run in CI, on the same implementation and workers")
    assert run.index("export KATA_REQUIRE_SANDBOX=1") < run.index('run_pytest "$E2E_TESTS"'), (
        "the end-to-end tests of the sandbox run where it is required, so they fail rather than skip")


def test_ci_installs_bubblewrap_and_requires_the_sandboxed_tests_to_run():
    run = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install -y bubblewrap" in run, ".ci/run installs bubblewrap when bwrap is missing"
    assert "export KATA_REQUIRE_SANDBOX=1" in run, (
        ".ci/run sets $KATA_REQUIRE_SANDBOX, so that a sandboxed test fails there instead of skipping")


def test_readme_is_a_front_page_whose_links_lead_somewhere():
    readme = (ROOT / "README.md").read_text()
    assert len(readme) <= 12_000, (
        f"README.md is a front page of at most 12,000 characters ({len(readme)}): reference material goes in docs/")
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert links and not missing, f"every page README.md links is in the repository: missing {missing}"
