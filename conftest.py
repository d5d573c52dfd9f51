"""pytest configuration: the --impl switch, Hypothesis profiles, one marker per concept, readable stub failures.

    pytest                          the student's exercises/ (or $KATA_IMPL)
    pytest --impl solutions         the reference
    pytest --impl ~/submissions/s7  any folder laid out like exercises/
    pytest -m gae                   one concept
    pytest --hypothesis-profile ci  derandomized, no deadline (also: KATA_HYPOTHESIS_PROFILE=ci)
"""

from __future__ import annotations

import os
import re

import pytest
from _pytest.doctest import DoctestItem
from hypothesis import HealthCheck, Phase, Verbosity, settings

from kata.concepts import impl as implementations
from kata.concepts.manifest import CONCEPTS
from kata.concepts.stub import is_stub_error, leaf_exceptions
from kata.testing.calls import noted
from kata.testing.drawing import only_global_constants
from kata.testing.plain_asserts import leave_concept_tests_unrewritten

# kata.testing.options: --impl, --mistake, --variant (also a pytest11 entry point, so that pytest knows them before it
# reads its arguments); kata.testing.progress: records results for `kata status` and reports them to `kata grade`.
pytest_plugins = ["kata.testing.options", "kata.testing.progress"]
# ---- Hypothesis profiles ---------------------------------------------------------------------------------------
# dev: what a student runs many times an hour (grading's examples, then 5 random ones: see GRADING_FIRST). ci: the
# same 15 examples per test on every run (derandomized), no deadline on a loaded machine; at 15, as at 25 and 40,
# every catalogued mistake is caught (under ci and on 5 dev runs) and every concept's mutation score is unchanged
# (docs/mutation.md; the time saved: docs/benchmarks.md). thorough: many more examples, for an instructor before a
# release.
# The explain phase traces coverage of every failing example: seconds per failing test, for a line of output a
# student does not need. Shrinking stays: the smallest counterexample is what a failure message should show.
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
_COMMON = dict(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors], print_blob=False, phases=_PHASES
)
settings.register_profile("dev", max_examples=5, deadline=None, **_COMMON)
settings.register_profile("ci", max_examples=15, deadline=None, derandomize=True, database=None, **_COMMON)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, database=None, verbosity=Verbosity.normal, **_COMMON
)
# <profile>-no-shrink: the same examples without shrinking and without an example database, for the catalogue runs
# (kata/catalogue/runs.py), which only need to know whether a test fails; each repetition draws afresh.
for _name in ("dev", "ci", "thorough"):
    settings.register_profile(
        f"{_name}-no-shrink", parent=settings.get_profile(_name), database=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
    )
settings.load_profile(os.environ.get("KATA_HYPOTHESIS_PROFILE", "dev"))
# One verdict everywhere: a test draws the same examples in this repository, the student edition, the autograder and
# the Classroom workflow, whatever modules the submission or the tooling imported (kata.testing.drawing says why).
only_global_constants()
# The student's profiles run, before their own random examples, every example that the derandomized profile grading
# uses runs: code that fails under grading fails `kata check` on every run, with the same smallest counterexample,
# and the random examples after them look further than grading does.
GRADING_FIRST = {"dev": "ci", "dev-no-shrink": "ci-no-shrink"}

FRAME_MARKER = "frame"
PARITY_MARKER = "parity"  # tests/parity: the reference against the libraries (docs/parity.md)
SLOW_MARKER = "slow"
# e2e: a test of the kata's tooling that runs it end to end in fresh interpreters (grading runs, the sandbox, the
# autograder, watch, pytest started anew). Each costs seconds, together about 50 of the whole suite's 70 s on 2 cores,
# and none tests the reference: README's test command leaves them out, and `--e2e` (or an -m that names e2e) runs
# them, as CI does.
E2E_MARKER = "e2e"
CONCEPT_MARKERS = tuple(concept.name for concept in CONCEPTS)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # `-n auto` hands tests out in fixed chunks (pytest-xdist's "load"), and two PPO trainings of 4 s each can end
    # up last on one worker while the other idles. "worksteal" lets an idle worker take queued tests from a busy
    # one: README's test command, 17.7 s -> 13.9 s on 2 cores (docs/benchmarks.md). Runs before xdist's own hook
    # (a conftest's is called first), and an explicit --dist is left as given.
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no" and not config.option.distload:
        config.option.dist = "worksteal"


def pytest_configure(config: pytest.Config) -> None:
    # An implementation that cannot exist (a mistyped folder) stops the run here, in one line, instead of failing
    # the set-up of every test with the same traceback.
    given = config.getoption("--impl")
    problem = implementations.spec_problem(
        given or implementations.default_spec(), mistake=config.getoption("--mistake"),
        variant=config.getoption("--variant"),
        given_as="--impl" if given else f"${implementations.ENVIRONMENT_VARIABLE}")
    if problem is not None:
        raise pytest.UsageError(problem)
    # A concept test's failure is its message, without pytest's "+ where tensor(False) = ..." lines under it.
    leave_concept_tests_unrewritten(c.name for c in CONCEPTS)
    # Imported here, after that check, and only where tests run: a run that stops at start-up, and pytest-xdist's
    # controller (`-n`: its workers run the tests), do not pay the second that torch takes to import.
    if not (getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")):
        import torch

        # The kata's tensors are tiny: on a 2-core machine a second intra-op thread only adds hand-offs and waiting.
        torch.set_num_threads(1)
    for concept in CONCEPTS:
        config.addinivalue_line("markers", f"{concept.name}: concept {concept.number}, {concept.title}")
    config.addinivalue_line("markers", f"{FRAME_MARKER}: tests of the kata's own frame (not a concept)")
    config.addinivalue_line("markers", f"{PARITY_MARKER}: the reference against TRL, verl and SB3 (tests/parity)")
    config.addinivalue_line("markers", f"{SLOW_MARKER}: integration runs (training); -m 'not slow' skips them")
    config.addinivalue_line("markers", "lab: runs the lab end to end")
    config.addinivalue_line("markers", f"{E2E_MARKER}: the tooling end to end in fresh interpreters; --e2e runs them")
    # `pytest -m gea` would deselect every test and say nothing: an -m that names no marker is a usage error.
    expression = config.option.markexpr or ""
    known = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    unknown = sorted(marker_words(expression) - known - {"and", "or", "not"})
    if unknown:
        concepts = ", ".join(CONCEPT_MARKERS)
        raise pytest.UsageError(f"-m {expression!r}: no test is marked {', '.join(unknown)}. The markers: the "
                                f"concepts ({concepts}), {FRAME_MARKER}, {SLOW_MARKER}, {E2E_MARKER}, {PARITY_MARKER}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every test belongs to exactly one concept, to the frame or to the parity suite: the stub check and the grader
    # rely on it. A docstring example (pytest --doctest-modules solutions) is the reference's documentation.
    for item in items:
        if isinstance(item, DoctestItem):
            continue
        owners = [m.name for m in item.iter_markers() if m.name in (*CONCEPT_MARKERS, FRAME_MARKER, PARITY_MARKER)]
        if len(set(owners)) != 1:
            raise pytest.UsageError(
                f"{item.nodeid} must carry exactly one concept marker, 'frame' or 'parity'; has {owners}")
        if item.get_closest_marker(E2E_MARKER) and owners != [FRAME_MARKER]:
            # kata check and the grader select a concept's tests by its marker alone: an e2e one would go ungraded
            raise pytest.UsageError(f"{item.nodeid}: only a test of the frame may carry '{E2E_MARKER}'; has {owners}")
    if not end_to_end_wanted(config):
        left_out = [item for item in items if item.get_closest_marker(E2E_MARKER)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(E2E_MARKER)]


def end_to_end_wanted(config: pytest.Config) -> bool:
    """Whether the run includes the e2e tests: asked for by --e2e, or by an -m expression that names them."""
    return config.getoption("--e2e") or E2E_MARKER in marker_words(config.option.markexpr or "")


def marker_words(expression: str) -> set[str]:
    """The names in an -m expression (``"gae and not slow"``: gae, and, not, slow)."""
    return set(re.findall(r"[A-Za-z_]\w*", expression))


def pytest_report_header(config: pytest.Config) -> str:
    spec = config.getoption("--impl") or implementations.default_spec()
    mistake = config.getoption("--mistake")
    variant = config.getoption("--variant")
    profile = settings._current_profile  # noqa: SLF001 - the profile's name is only kept here
    header = f"kata: implementation {spec}" + (f" with mistake {mistake}" if mistake else "") + (
        f" with variant {variant}" if variant else "") + f" | hypothesis profile {profile}"
    if (config.rootpath / "tests" / "frame").is_dir():  # the tooling's tests (a student edition has none)
        header += " | tooling's end-to-end tests " + ("included" if end_to_end_wanted(config) else
                                                     "left out (--e2e runs them)")
    return header


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest) -> implementations.Implementation:
    """The implementation under test (see --impl); its public names resolve through the manifest, and a failing
    example shows each call made with it (kata.testing.calls)."""
    spec = request.config.getoption("--impl") or implementations.default_spec()
    return noted(implementations.load(
        spec, mistake=request.config.getoption("--mistake"), variant=request.config.getoption("--variant")
    ))


# The first failure a student reads shows the smallest counterexample; shrinking the failures after it (a wrong
# function fails several tests, about 0.3 s of shrinking each) would make a wrong answer's check the slowest. So under
# the student's profiles only the session's first failing test shrinks; a later one stops at the example that failed
# it. The verdict is the same either way: shrinking only chooses which failing example is shown.
_FAILED_ALREADY = pytest.StashKey[bool]()
_WITHOUT_SHRINKING = tuple(phase for phase in _PHASES if phase is not Phase.shrink)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    first = GRADING_FIRST.get(settings._current_profile)  # noqa: SLF001 - the profile's name is only kept here
    test = pyfuncitem.obj
    if first is None or not getattr(test, "is_hypothesis_test", False):
        return (yield)
    stash = pyfuncitem.config.stash
    own = test._hypothesis_internal_use_settings
    # Hypothesis reads a test's settings when the test is called; a test that set its own keeps them, derandomized
    # as grading's are.
    profile = settings.get_profile(settings._current_profile)  # noqa: SLF001
    grading = settings.get_profile(first) if own is profile else settings(own, derandomize=True, database=None)
    later = stash.get(_FAILED_ALREADY, False)
    try:
        test._hypothesis_internal_use_settings = settings(grading, phases=_WITHOUT_SHRINKING) if later else grading
        test(**{name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames})
        test._hypothesis_internal_use_settings = settings(own, phases=_WITHOUT_SHRINKING) if later else own
        return (yield)
    except BaseException:
        stash[_FAILED_ALREADY] = True
        raise
    finally:
        test._hypothesis_internal_use_settings = own


# ---- readable failures -----------------------------------------------------------------------------------------


def _student_lines(error: BaseException) -> tuple[list[str], bool]:
    """The one-line messages of untouched stubs and modules that do not import among ``error``'s exceptions, and
    whether a genuine failure is among them too."""
    lines, genuine = [], False
    for leaf in leaf_exceptions(error):
        if is_stub_error(leaf) or isinstance(leaf, implementations.ImplementationImportError):
            lines.append(str(leaf))
        else:
            genuine = True
    return lines, genuine


def _student_line(error: BaseException) -> str | None:
    """One line for an untouched stub or a module that does not import; None when a genuine failure is among the
    errors (a Hypothesis ExceptionGroup): that one must be shown, never hidden behind a stub's line."""
    lines, genuine = _student_lines(error)
    return lines[0] if lines and not genuine else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        lines, genuine = _student_lines(call.excinfo.value)
        if lines and not genuine:
            report.longrepr = lines[0]
        elif lines:  # the genuine failures stay the report; the stub's line follows them
            report.sections.append(("kata: also", lines[0]))
