"""One verdict everywhere: under the derandomized ``ci`` profile, what grading runs, every concept test draws the same
examples in this repository, in a fresh student edition, and with a module full of constants imported (a student's
module may hold any). Hypothesis would otherwise also draw the constants it finds in local modules, so the same
file could fail in the edition and pass here (kata.testing.drawing.only_global_constants)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kata.concepts.impl import REPOSITORY_ROOT as ROOT
from kata.grading import release

pytestmark = [pytest.mark.frame, pytest.mark.e2e]

# A plugin for the runs below: per test, a sha256 of the examples its @given drew, in order (Hypothesis's
# observability callback sees each test case's representation), written per process to $KATA_DIGEST_DIR. The test
# bodies are replaced by a no-op (Hypothesis's documented hook for that, inner_test): what is drawn does not depend
# on them while no example fails, and the three runs then take seconds, not minutes.
DIGEST_PLUGIN = '''
import dataclasses, hashlib, json, os
import pytest
from hypothesis.internal import observability

digests, running = {}, [None]


def record(observation):
    data = observation if isinstance(observation, dict) else dataclasses.asdict(observation)
    if data.get("type") == "test_case" and running[0] is not None:
        digests.setdefault(running[0], hashlib.sha256()).update(str(data.get("representation")).encode() + b"\\n")


if hasattr(observability, "add_observability_callback"):
    observability.add_observability_callback(record)
else:
    observability.TESTCASE_CALLBACKS.append(record)


def pytest_collection_modifyitems(items):
    for item in items:
        hypothesis = getattr(getattr(item, "obj", None), "hypothesis", None)
        if hypothesis is not None:
            hypothesis.inner_test = lambda *args, **kwargs: None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    running[0] = item.nodeid
    try:
        return (yield)
    finally:
        running[0] = None


def pytest_sessionfinish(session):
    path = os.path.join(os.environ["KATA_DIGEST_DIR"], f"{os.getpid()}.json")  # a worker's name is inherited
    with open(path, "w") as out:
        json.dump({test: digest.hexdigest() for test, digest in digests.items()}, out)
'''
# What a student's module might hold: constants Hypothesis would otherwise draw (a long T, a huge id, the smallest
# normal float, a string).
CONSTANTS_MODULE = '''
LONG_EPISODE = 5000
BIG_ID = 65538
RESPONSE_LENGTH = 2049
SMALLEST = 2.2250738585072014e-308
HUGE = 1e300
NEGATIVE = -987654.321
EPSILON = 0.1234567
NAME = "a constant a submission may hold"
'''


def example_digests(repository: Path, reference: Path, plugins: Path, out: Path, *extra: str) -> dict[str, str]:
    """The digest of every concept test's drawn examples, run in ``repository`` with ``reference`` as --impl."""
    out.mkdir()
    environment = dict(os.environ, KATA_HYPOTHESIS_PROFILE="ci", KATA_DIGEST_DIR=str(out),
                       PYTHONPATH=os.pathsep.join([str(plugins), str(repository)]))
    command = [sys.executable, "-m", "pytest", f"--impl={reference}", "-m", "not frame", "-q",
               "-n", "2", "-p", "kata_example_digest", *extra, "tests"]
    run = subprocess.run(command, cwd=repository, env=environment, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"the concept tests failed on the reference in {repository}:\n{run.stdout[-3000:]}"
    digests: dict[str, str] = {}
    for path in out.glob("*.json"):
        digests.update(json.loads(path.read_text()))
    return digests


@pytest.fixture(scope="module")
def setting(tmp_path_factory) -> dict:
    """The plugins, the reference as a submission's folder (the edition has no solutions/), and the digests of a
    run in this repository."""
    root = tmp_path_factory.mktemp("one-verdict")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "kata_example_digest.py").write_text(DIGEST_PLUGIN)
    (plugins / "kata_constants_galore.py").write_text(CONSTANTS_MODULE)
    reference = root / "reference"
    shutil.copytree(ROOT / "solutions", reference, ignore=shutil.ignore_patterns("__pycache__"))
    here = example_digests(ROOT, reference, plugins, root / "here")
    assert len(here) > 100, f"the digests cover too few tests to compare: {len(here)}"
    return dict(root=root, plugins=plugins, reference=reference, here=here)


def assert_same_examples(here: dict[str, str], there: dict[str, str], where: str) -> None:
    differ = sorted(test for test in here if there.get(test) != here[test])
    assert not differ, (f"{len(differ)} of {len(here)} concept tests draw other examples {where} than in this "
                        f"repository, so the same file could get another verdict there: {differ[:5]}")


def test_a_module_full_of_constants_changes_no_example(setting):
    there = example_digests(ROOT, setting["reference"], setting["plugins"], setting["root"] / "constants",
                            "-p", "kata_constants_galore")
    assert_same_examples(setting["here"], there, "with a module full of constants imported")


def test_the_student_edition_draws_the_same_examples(setting):
    edition, _ = release.release(setting["root"] / "edition")
    there = example_digests(edition, setting["reference"], setting["plugins"], setting["root"] / "edition-run")
    assert_same_examples(setting["here"], there, "in a fresh student edition")
