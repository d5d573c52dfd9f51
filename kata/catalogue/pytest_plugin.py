"""pytest plugin: after the run, the diagnosis of each failed concept, in the same process (``-p
kata.catalogue.pytest_plugin --kata-diagnose FILE``).

``kata check`` and ``kata watch`` load it where the catalogue is installed. Once the tests have run, each concept
with a failed test whose module is not an untouched stub is diagnosed (:func:`kata.catalogue.diagnose.diagnose`) on
the implementation the tests ran on, beside the reference and the catalogued mistakes, and FILE receives
``{"diagnoses": [{"concept", "function", "mistake", "matched", "probes", "sentence"}]}``, as ``kata diagnose
--json`` prints it. Torch, the reference and the student's modules are imported already: the diagnosis costs only
its probes. A diagnosis that runs past ``DIAGNOSIS_SECONDS`` (student code may loop) is left out, never waited for.
"""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

from kata.catalogue.diagnose import Catalogue, diagnose
from kata.concepts import impl as implementations
from kata.concepts.manifest import CONCEPTS, concept
from kata.concepts.platforms import has_sigalrm, interrupt_after
from kata.concepts.sources import started
from kata.testing.record import write_json_atomically

DIAGNOSIS_SECONDS = 60


class _TooLong(BaseException):
    """The diagnosis outlived its time (a BaseException, so that no student code's ``except Exception`` eats it)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("kata").addoption(
        "--kata-diagnose", default=None, metavar="FILE",
        help="after the run, diagnose each failed concept (not an untouched stub) and write the result to FILE")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--kata-diagnose"):
        config.pluginmanager.register(_Diagnosis(config), "kata-diagnosis")


class _Diagnosis:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.failed: set[str] = set()
        self.names = {c.name for c in CONCEPTS}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.update(name for name in report.keywords if name in self.names)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        path = Path(self.config.getoption("--kata-diagnose"))
        found: list[dict] = []
        try:
            spec = self.config.getoption("--impl") or implementations.default_spec()
            bound = dict(mistake=self.config.getoption("--mistake"), variant=self.config.getoption("--variant"))
            implementation = implementations.load(spec, **bound)  # what the impl fixture gave the tests
            reference = implementations.REPOSITORY_ROOT / "solutions"
            names = sorted(self.failed)
            if not any(bound.values()):  # a module that is still an untouched stub is not worth a diagnosis
                names = started(implementation.root, names, reference)
            if names:
                with _deadline(DIAGNOSIS_SECONDS):
                    diagnoses = diagnose(implementation, [concept(name) for name in names], Catalogue())
                found = [{**asdict(d), "sentence": d.sentence()} for d in diagnoses]
        except (_TooLong, Exception):  # noqa: BLE001 - no diagnosis is better than a broken check
            found = []
        write_json_atomically(path, {"diagnoses": found})


class _deadline:
    """_TooLong after ``seconds``, from the main thread: by SIGALRM, or a timer thread where there is none
    (Windows); nothing in another thread."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        main = threading.current_thread() is threading.main_thread()
        self.armed = has_sigalrm() and main
        self.timer = interrupt_after(seconds, _TooLong, repeat=None) if main and not self.armed else None

    def __enter__(self) -> None:
        if self.armed:
            self.previous = signal.signal(signal.SIGALRM, self._expire)
            signal.alarm(self.seconds)
        elif self.timer is not None:
            self.timer.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.previous)
        elif self.timer is not None:
            self.timer.__exit__(*exc)

    @staticmethod
    def _expire(signum: int, frame: object) -> None:
        raise _TooLong
