"""Load the implementation the tests, the lab and the grader run against.

``load("exercises")`` and ``load("solutions")`` import the repository's packages. ``load(PATH)`` imports any folder
laid out like ``exercises/`` (``~/submissions/student-7``) under a private package name, so it never shadows or
disturbs the installed packages and two submissions can be loaded side by side. ``load("solutions",
mistake="gae/truncation_as_termination")`` loads a fresh copy of the reference whose ``gae`` module is the
reference's text patched by ``mistakes/gae/truncation_as_termination.diff`` (kata.concepts.patches); the copy's other
modules import that one, so the loops call the wrong code too. ``variant="ppo_cartpole/argsort_permutation"`` loads
a patch from ``variants/`` the same way.

Concept modules are imported one at a time, when first needed: one that does not import fails its own concept's
tests with a readable message and leaves the others alone.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import linecache
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from kata.concepts.manifest import CONCEPTS, FRAME_EXPORTS, concept, concept_of_export
from kata.concepts.patches import apply

ENVIRONMENT_VARIABLE = "KATA_IMPL"
DEFAULT_IMPL = "exercises"
REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
MISTAKES_ROOT = REPOSITORY_ROOT / "mistakes"
VARIANTS_ROOT = REPOSITORY_ROOT / "variants"
CATALOGUES = {"mistake": MISTAKES_ROOT, "variant": VARIANTS_ROOT}
ENTRY_SUFFIX = ".diff"  # a catalogue entry is a patch of its concept's reference: <root>/<concept>/<name>.diff
NAMED_PACKAGES = ("exercises", "solutions")
VIEWS_MARKER = "kata-concept-views.txt"  # a folder holding it is a folder of per-concept views (kata.grading.workspace)


class ImplementationImportError(ImportError):
    """A concept module of the implementation could not be imported; the message says where and why."""


class Implementation:
    """One implementation of the kata: attribute access resolves a public name through the manifest.

    ``impl.gae_advantages`` imports only ``<package>.gae``; ``impl.module("gae")`` returns that module.
    """

    def __init__(self, label: str, package_name: str, root: Path) -> None:
        self.label = label
        self.package_name = package_name
        self.root = root

    def __repr__(self) -> str:
        return f"Implementation({self.label!r} from {self.root})"

    def module(self, concept_name: str) -> types.ModuleType:
        concept(concept_name)  # a clear error for a misspelt concept
        qualified = f"{self.package_name}.{concept_name}"
        if qualified in sys.modules:
            return sys.modules[qualified]
        try:
            return importlib.import_module(qualified)
        except Exception as error:
            where = self.root / f"{concept_name}.py"
            last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
            line = getattr(error, "lineno", None) or (last[0].lineno if last else "?")
            raise ImplementationImportError(
                f"{where} could not be imported ({type(error).__name__} near line {line}: {error}); "
                f"fix it to run the {concept_name} tests"
            ) from error

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in FRAME_EXPORTS:  # the frame's, the same for every implementation
            return getattr(importlib.import_module(FRAME_EXPORTS[name]), name)
        try:
            owner = concept_of_export(name)
        except KeyError:
            raise AttributeError(f"{name!r} is not a public name of the kata (see kata/concepts/course.toml)") from None
        module = self.module(owner.name)
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(
                f"{self.root / (owner.name + '.py')} does not define {name}; keep the stub's name and signature"
            ) from None


def default_spec() -> str:
    return os.environ.get(ENVIRONMENT_VARIABLE, DEFAULT_IMPL) or DEFAULT_IMPL


def spec_problem(spec: str, *, mistake: str | None = None, variant: str | None = None,
                 given_as: str = "--impl") -> str | None:
    """Why ``spec`` (with ``mistake`` or ``variant``) names no implementation, in one line, or None; checked
    without importing anything, so a command can stop at start-up instead of failing every test. ``given_as``: where
    the spec came from, as the line names it (``--impl``, ``$KATA_IMPL``)."""
    if mistake is not None and variant is not None:
        return "give --mistake or --variant, not both"
    for kind, entry in (("mistake", mistake), ("variant", variant)):
        if entry is not None:
            try:
                catalogue_path(entry, kind)
            except ValueError as error:
                return f"--{kind} {entry}: {error}"
    if spec in NAMED_PACKAGES:
        found = importlib.util.find_spec(spec)
        if found is None:
            return (f"{given_as} {spec}: there is no package {spec} here (a student edition holds no reference: "
                    "give exercises, or a folder laid out like exercises/)")
        return _entry_problem(Path(found.origin or "").parent, mistake, variant)
    folder = Path(spec).expanduser()
    if not folder.exists():
        return f"{given_as} {spec}: no such folder (give exercises, solutions, or a folder laid out like exercises/)"
    if not folder.is_dir():
        return f"{given_as} {spec}: not a folder (give exercises, solutions, or a folder laid out like exercises/)"
    if (folder / VIEWS_MARKER).is_file() or any((folder / f"{c.name}.py").exists() for c in CONCEPTS):
        return _entry_problem(folder, mistake, variant)
    expected = ", ".join(f"{c.name}.py" for c in CONCEPTS)
    return f"{given_as} {spec}: the folder holds none of the concept modules ({expected})"


def _entry_problem(root: Path, mistake: str | None, variant: str | None) -> str | None:
    """Why the catalogue entry does not apply to the concept module in ``root`` (the message of its PatchError),
    or None."""
    for kind, entry in (("mistake", mistake), ("variant", variant)):
        if entry is not None:
            try:
                patched_source(root, entry, kind)
            except (ValueError, OSError) as error:
                return f"--{kind} {entry}: {error}"
    return None


def reference_or_exercises() -> str:
    """The implementation the lab runs by default: the reference where it is installed (the instructor's
    repository), else the student's exercises (a student edition)."""
    return "solutions" if importlib.util.find_spec("solutions") is not None else "exercises"


def load(
    spec: str | os.PathLike[str] | None = None, *, mistake: str | None = None, variant: str | None = None
) -> Implementation:
    """The implementation named by ``spec``: ``exercises``, ``solutions`` or a folder's path.

    ``mistake`` or ``variant`` (``"concept/name"``, at most one) binds that catalogue entry into a fresh copy.
    """
    spec = str(spec) if spec is not None else default_spec()
    if mistake is not None and variant is not None:
        raise ValueError("give --mistake or --variant, not both")
    if mistake is not None:
        return _load_with_entry(spec, mistake, "mistake")
    if variant is not None:
        return _load_with_entry(spec, variant, "variant")
    if spec in NAMED_PACKAGES:
        package = importlib.import_module(spec)
        return Implementation(spec, spec, Path(package.__file__).resolve().parent)
    folder = Path(spec).expanduser()
    if (folder / VIEWS_MARKER).is_file():
        return ConceptViews(spec, folder.resolve())
    return _load_folder(folder, label=spec)


class ConceptViews(Implementation):
    """Per-concept views of one submission (see kata.grading.workspace): ``root/<concept>/`` is a package laid out
    like ``exercises/``. ``module(c)`` and every name ``c`` exports come from view ``c``, so a concept's tests, which
    use only their own concept's names, run on that view."""

    def __init__(self, label: str, root: Path) -> None:
        digest = hashlib.sha1(str(root).encode()).hexdigest()[:12]
        super().__init__(label, f"kata_views_{digest}", root)

    def module(self, concept_name: str) -> types.ModuleType:
        folder = self.root / concept(concept_name).name
        try:
            view = _load_folder(folder, label=self.label, prefix="kata_view")
        except Exception as error:  # the submission's own __init__.py fails: no concept of it can load
            raise ImplementationImportError(
                f"{folder / '__init__.py'} could not be imported ({type(error).__name__}: {error})") from error
        return view.module(concept_name)


def _load_folder(folder: Path, label: str, prefix: str = "kata_submission") -> Implementation:
    folder = folder.resolve()
    if not folder.is_dir():
        raise ValueError(
            f"--impl must be 'exercises', 'solutions' or a folder laid out like exercises/; {folder} is not a folder"
        )
    if not any((folder / f"{c.name}.py").exists() for c in CONCEPTS):
        expected = ", ".join(f"{c.name}.py" for c in CONCEPTS)
        raise ValueError(f"--impl folder {folder} holds none of the concept modules ({expected})")
    digest = hashlib.sha1(str(folder).encode()).hexdigest()[:12]
    package_name = f"{prefix}_{digest}"
    if package_name not in sys.modules:
        init = folder / "__init__.py"
        if init.exists():
            module_spec = importlib.util.spec_from_file_location(
                package_name, init, submodule_search_locations=[str(folder)]
            )
            assert module_spec is not None and module_spec.loader is not None
            package = importlib.util.module_from_spec(module_spec)
            sys.modules[package_name] = package
            try:
                module_spec.loader.exec_module(package)
            except Exception:
                del sys.modules[package_name]
                raise
        else:  # a bare folder of concept modules: a package with nothing at its top
            package = types.ModuleType(package_name)
            package.__path__ = [str(folder)]
            package.__file__ = None
            sys.modules[package_name] = package
    return Implementation(label, package_name, folder)


def catalogue_path(entry: str, kind: str = "mistake") -> Path:
    """``"gae/truncation_as_termination"`` -> its patch in the mistake (or variant) catalogue; ValueError if none."""
    root = CATALOGUES[kind]
    concept_name, _, name = entry.partition("/")
    concept(concept_name)
    path = root / concept_name / f"{name}{ENTRY_SUFFIX}"
    if not name or not path.exists():
        raise ValueError(f"{kind} must be 'concept/name' with a patch {root.name}/<concept>/<name>{ENTRY_SUFFIX} in "
                         f"{root}; got {entry!r}")
    return path


def patched_source(root: Path, entry: str, kind: str = "mistake") -> str:
    """The text of ``root/<concept>.py`` with the entry's patch applied; a PatchError (a ValueError) names the entry
    and shows the hunk that does not apply."""
    path = catalogue_path(entry, kind)
    target = root / f"{entry.partition('/')[0]}.py"
    name = f"{CATALOGUES[kind].name}/{entry}{ENTRY_SUFFIX}"
    return apply(target.read_text(encoding="utf-8"), path.read_text(encoding="utf-8"), name, str(target))


def _load_with_entry(spec: str, entry: str, kind: str) -> Implementation:
    """A fresh copy of ``spec`` whose module of the entry's concept is its text patched by the entry."""
    concept_name = entry.partition("/")[0]
    base = load(spec)
    text = patched_source(base.root, entry, kind)
    tag = entry.replace("/", "__")
    implementation = _load_folder(base.root, label=f"{spec}+{entry}", prefix=f"kata_{kind}_{tag}")
    module_name = f"{implementation.package_name}.{concept_name}"
    if module_name not in sys.modules:
        # The patched text is what runs, and what tracebacks show: linecache holds it under a name of its own.
        filename = f"{base.root / concept_name}.py+{CATALOGUES[kind].name}/{entry}{ENTRY_SUFFIX}"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        module_spec = importlib.util.spec_from_loader(module_name, loader=None, origin=filename)
        assert module_spec is not None
        module = importlib.util.module_from_spec(module_spec)
        module.__file__ = filename
        sys.modules[module_name] = module  # before it runs: its dataclasses, and the copy's other modules, find it
        try:
            exec(compile(text, filename, "exec"), module.__dict__)  # noqa: S102 - the reference, patched
        except BaseException:
            del sys.modules[module_name]
            raise
    return implementation
