"""A concept test's failure reads as its message alone: pytest's assertion rewriting is turned off for the concept
test modules (``tests/test_<concept>.py``).

Rewriting appends its introspection to the message an assertion carries: for ``assert torch.isfinite(x).all(),
"entropy is not finite ..."`` a student reads, under the message, ``assert tensor(False)`` and four lines of ``+
where tensor(False) = <built-in method all of Tensor object at 0x...>()``, which say nothing the message does not.
Every assertion of a concept test carries a message (a frame test holds it), so plain assertions lose nothing
there; the frame's own tests keep pytest's introspection. The alternative, cutting those lines out of each report
afterwards, would have to tell them apart from a message's own lines; declining to rewrite the module is exact.

pytest decides per module through its import hook's ``_should_rewrite``; the documented opt-out,
``PYTEST_DONT_REWRITE`` in a module's docstring, would have to be repeated in every concept module. Where a pytest
release no longer has that hook, nothing changes but the noise.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import PurePath


def concept_test_module(path: str, concept_names: Iterable[str]) -> bool:
    """Whether ``path`` is a concept's test module: ``tests/test_<concept>.py``, wherever the tests were copied."""
    pure = PurePath(path)
    return pure.parent.name == "tests" and pure.name in {f"test_{name}.py" for name in concept_names}


def leave_concept_tests_unrewritten(concept_names: Iterable[str]) -> bool:
    """Make pytest's rewriting hook pass over the concept test modules; True when the hook was found."""
    names = tuple(concept_names)
    try:
        from _pytest.assertion.rewrite import AssertionRewritingHook
    except ImportError:
        return False
    found = False
    for finder in sys.meta_path:
        should_rewrite = getattr(finder, "_should_rewrite", None)
        if not isinstance(finder, AssertionRewritingHook) or should_rewrite is None:
            continue
        if getattr(should_rewrite, "leaves_concept_tests", False):
            found = True
            continue

        def decide(name: str, fn: str, state, _original=should_rewrite) -> bool:
            return not concept_test_module(fn, names) and _original(name, fn, state)

        decide.leaves_concept_tests = True  # type: ignore[attr-defined]
        finder._should_rewrite = decide  # type: ignore[method-assign]
        found = True
    return found
