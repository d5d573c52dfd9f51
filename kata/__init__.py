"""The kata's shared package: what is neither an exercise nor an answer, laid out by role.

    concepts/   the course data (course.toml: concepts, hints, mistakes, variants) and what every implementation
                shares: array conversion, argument contracts, the stub error, the package exports, the loader
    rl/         the RL parts: CartPole, the networks and optimizer, the PPO and RLOO loops, the sequence task
    testing/    what the concept tests run on: the pytest plugins, Hypothesis strategies, training verdicts
    student/    the student's tools: list, hint, status, check, watch
    lab/        the lab: the seed notebook's route as one command, its report and figures
    catalogue/  the instructor's catalogue: stub generator, mistakes, variants, diagnosis, selfcheck
    grading/    the instructor's grading: grader, limits, reports, Gradescope autograder, class report
    cli.py      the ``kata`` command, whose subcommands the tool packages add

Each package imports only the packages listed after it here; ``lint-imports`` (pyproject.toml) holds that. Nothing
here ever imports ``solutions`` on behalf of ``exercises``.

Modules moved when the package was laid out by role: the names a student's file or a script imported before
(``from kata.ppo_frame import PPOConfig``, ``python -m kata.mistakes``) still resolve, to the module's new home,
through the table below. New code imports the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

MOVED = {
    "kata.manifest": "kata.concepts.manifest", "kata.arrays": "kata.concepts.arrays",
    "kata.contracts": "kata.concepts.contracts", "kata.stub": "kata.concepts.stub",
    "kata.package": "kata.concepts.package", "kata.impl": "kata.concepts.impl",
    "kata.cartpole": "kata.rl.cartpole", "kata.networks": "kata.rl.networks", "kata.optim": "kata.rl.networks",
    "kata.ppo_frame": "kata.rl.ppo", "kata.fast": "kata.rl.speedups", "kata.runtime": "kata.concepts.arrays",
    "kata.rloo_frame": "kata.rl.rloo", "kata.sequence_task": "kata.rl.sequence_task",
    "kata.training_checks": "kata.testing.training", "kata.pytest_options": "kata.testing.options",
    "kata.progress": "kata.testing.progress", "kata.status": "kata.student.status", "kata.watch": "kata.student.watch",
    "kata.stubs": "kata.catalogue.stubs", "kata.mistakes": "kata.catalogue.mistakes",
    "kata.variants": "kata.catalogue.variants", "kata.catalogue_runs": "kata.catalogue.runs",
    "kata.diagnose": "kata.catalogue.diagnose", "kata.probes": "kata.catalogue.probes",
    "kata.probe_observations": "kata.catalogue.observations", "kata.selfcheck": "kata.catalogue.selfcheck",
    "kata.grade": "kata.grading.grader", "kata.grade_batch": "kata.grading.batch",
    "kata.grade_guard": "kata.grading.guard", "kata.grade_sandbox": "kata.grading.limits",
    "kata.grade_workspace": "kata.grading.workspace", "kata.grade_results": "kata.grading.results",
    "kata.autograder": "kata.grading.autograder", "kata.class_report": "kata.grading.class_report",
    "kata.plots": "kata.lab.plots", "kata.notebook": "kata.lab.notebook",
}


def moved_to(name: str) -> str | None:
    """The new home of the module ``name`` imported by its old path (``kata.contracts.gae`` too); None if it did not
    move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old path to the module at its new home: the same module object under both names, so that
    ``kata.ppo_frame.PPOConfig is kata.rl.ppo.PPOConfig``; ``python -m`` on an old path runs the new module."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = moved_to(fullname)
        if new is None:
            return None
        target = importlib.util.find_spec(new)
        if target is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, self,
                                               is_package=target.submodule_search_locations is not None)
        spec.loader_state = new
        return spec

    def create_module(self, spec) -> ModuleType:
        return importlib.import_module(spec.loader_state)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module at its new home has run already

    def get_code(self, fullname: str):  # what `python -m kata.mistakes` runs: the new module's code, as __main__
        new = moved_to(fullname)
        return importlib.util.find_spec(new).loader.get_code(new)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())  # before the path finder: an old package path holds the new modules
