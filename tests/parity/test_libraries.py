"""The libraries under comparison are installed, at exactly the versions the ``parity`` extra pins."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from .libraries import INSTALL, MISSING

pytestmark = pytest.mark.parity

if MISSING:
    pytest.skip(f"the parity libraries are not installed (missing: {', '.join(MISSING)}); {INSTALL}",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def test_every_pin_of_the_parity_extra_is_the_installed_version():
    """A version the suite did not run against would make every verdict below a statement about another release."""
    pins = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["parity"]
    wrong = {}
    for pin in pins:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^;\s]+)", pin)
        assert match, f"every requirement of the parity extra is pinned with ==; {pin!r} is not"
        name, _, version = match.groups()
        installed = importlib.metadata.version(name)
        if installed.split("+")[0] != version:
            wrong[name] = f"pinned {version}, installed {installed}"
    assert not wrong, f"reinstall with {INSTALL}: {wrong}"


def test_torch_is_the_repositorys_pin():
    """The extra never installs torch (it must not replace the CPU build); the suite's verdicts are about the torch
    that requirements.txt pins, so that is the one it must find."""
    pin = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), flags=re.MULTILINE)
    assert pin, "requirements.txt pins torch with =="
    installed = importlib.metadata.version("torch")
    assert installed.split("+")[0] == pin.group(1), f"torch {installed} is installed; requirements.txt pins {pin[1]}"
