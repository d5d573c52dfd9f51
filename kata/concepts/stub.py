"""The one error every untouched stub raises, and the one place that recognises it."""

from __future__ import annotations

from kata.concepts.manifest import concept as concept_named
from kata.concepts.manifest import concept_of_export

NOT_IMPLEMENTED_PREFIX = "not implemented yet:"


def not_implemented(function_name: str, concept: str | None = None) -> NotImplementedError:
    """The error a stub raises: names the function, its concept, the GUIDE section and the hint command.

    ``raise not_implemented("gae_advantages")`` reads, for a student:
    ``not implemented yet: gae_advantages — GUIDE.md §3 (run `kata hint gae`)``, where §3 is the section of
    gae, the concept that exports the function (its number comes from the course data).
    """
    owner = concept_named(concept) if concept else concept_of_export(function_name)
    return NotImplementedError(
        f"{NOT_IMPLEMENTED_PREFIX} {function_name} — {owner.guide_section} (run `kata hint {owner.name}`)"
    )


def is_stub_error(error: BaseException) -> bool:
    """``error`` is what an untouched stub raises: the NotImplementedError of :func:`not_implemented`."""
    return isinstance(error, NotImplementedError) and str(error).startswith(NOT_IMPLEMENTED_PREFIX)


def leaf_exceptions(error: BaseException) -> list[BaseException]:
    """The exceptions inside ``error``, exception groups (Hypothesis raises one for several failures) unpacked."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_exceptions(inner)]
    return [error]
