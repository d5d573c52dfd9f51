"""pytest plugin for grading runs (``-p kata.grading.guard``): the answers cannot be imported.

A submission graded by ``kata grade`` that imports ``solutions`` (or the mistake or variant catalogues) gets an
ImportError naming the import, so its module does not load and its concept is an ``error``. The grading run's
folder holds no copy of them (see kata.grading.workspace); this closes the other way in, an installed checkout.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence

FORBIDDEN = ("solutions", "mistakes", "variants")


class ForbiddenImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: object = None) -> None:
        top = fullname.partition(".")[0]
        if top in FORBIDDEN:
            raise ImportError(f"import {fullname}: grading forbids importing {top} (the answers); "
                              f"use only your own modules and kata", name=fullname)
        return None


for _name in [name for name in sys.modules if name.partition(".")[0] in FORBIDDEN]:
    del sys.modules[_name]  # nothing imported them yet in a grading run; be sure of it
sys.meta_path.insert(0, ForbiddenImport())
