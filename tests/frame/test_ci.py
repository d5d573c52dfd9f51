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


WINDOWS_LINES = ("python -m venv .venv", ".venv\\Scripts\\python -m pip install -r requirements.txt",
                 ".venv\\Scripts\\python -m pytest --impl solutions -n auto")
TORCH_CPU = ("python3 -m venv .venv && .venv/bin/python -m pip install torch==2.13.0 --index-url "
             "https://download.pytorch.org/whl/cpu")


def test_readme_warns_of_the_cuda_wheel_before_its_first_command_and_gives_windows_its_lines():
    readme = (ROOT / "README.md").read_text()
    setup = ci_variable("SETUP")
    assert "python3.11" not in setup, "the set-up works with whatever python3 is (3.11 or newer), not only python3.11"
    assert TORCH_CPU in readme and readme.index(TORCH_CPU) < readme.index(setup), (
        "README gives the CPU-build install before the first command that would install torch")
    for line in WINDOWS_LINES:
        assert f"\n{line}\n" in readme, f"README gives Windows its own line: {line}"


def test_the_workflow_runs_readmes_commands_on_three_systems_and_four_pythons():
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert f"run: {ci_variable('SETUP')} && {ci_variable('TESTS')}\n" in workflow, (
        "the workflow runs README's POSIX set-up and test command, as .ci/run's SETUP && TESTS")
    assert f"run: {TORCH_CPU}\n" in workflow, "on Linux the workflow installs torch's CPU build first, as README says"
    for line in WINDOWS_LINES:
        assert f" {line}\n" in workflow, f"the workflow runs README's Windows line: {line}"
    assert f"run: {ci_variable('E2E_TESTS')}\n" in workflow, "the workflow runs the end-to-end tests (on Linux)"
    assert "os: [ubuntu-latest, macos-latest, windows-latest]" in workflow, "Linux, macOS and Windows"
    assert 'python: ["3.11", "3.12", "3.13", "3.14"]' in workflow, "Python 3.11 to 3.14"
    assert ".venv/bin/actionlint -no-color .github/workflows/ci.yml" in (ROOT / ".ci" / "run").read_text(), (
        ".ci/run checks the workflow with actionlint")


def test_ci_installs_the_floors_and_runs_the_concept_tests_on_them():
    run = (ROOT / ".ci" / "run").read_text()
    assert 'run_pytest "$FLOORS_TESTS"' in run and ci_variable("FLOORS_TESTS").startswith(".venv-floors/bin/python"), (
        ".ci/run runs the concept tests in the floors' own environment")
    assert 'replace(">=", "==")' in run, ".ci/run pins every dependency at its declared floor"


def test_torch_is_pinned_to_its_cpu_build():
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0" in requirements, "requirements.txt must pin the CPU build's release"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch = [d for d in project["dependencies"] if d.startswith("torch")]
    assert torch == ["torch==2.13.0"], ("pyproject declares the one torch CI installs and tests (the pinned CPU "
                                        f"build's release): neither a newer nor an untested older one; got {torch}")


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
