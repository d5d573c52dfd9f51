"""Which of the compared libraries are importable, and the command that installs them."""

from __future__ import annotations

import importlib.util

# The distributions whose code the tests call, by the module name they import.
LIBRARIES = {"stable_baselines3": "stable-baselines3", "verl": "verl", "trl": "trl"}
MISSING = [distribution for module, distribution in LIBRARIES.items() if importlib.util.find_spec(module) is None]
INSTALL = 'pip install -e ".[parity]"'
