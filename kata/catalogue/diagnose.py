"""Which catalogued misunderstanding does this code behave like? A diagnosis by behaviour, never by reading code.

    python -m kata.catalogue.diagnose [CONCEPT ...] [--impl SPEC] [--mistake CONCEPT/NAME] [--variant CONCEPT/NAME]
                                      [--json]
    python -m kata.catalogue.diagnose --evaluate [CONCEPT ...]

For every public function of the concepts that behaves differently from the reference on its probes (written beside
its concept's strategies, kata/testing/strategies/<concept>.py, and collected by kata/catalogue/probes.py), the
function, the reference and every catalogued mistake of its concept (each bound into a fresh copy of the reference,
as ``pytest --mistake`` does) run on the same probes. The diagnosis names the one mistake
the function agrees with on every probe (within the probe set's tolerance) while disagreeing with the reference on at
least one; when none does, or several do alike, it names none. A wrong accusation is worse than silence, so a function
that differs from the reference in any other way as well gets no diagnosis. A stub (NotImplementedError) gets none
either. Nothing of the reference's code or outputs is printed: only counts of probes.

``--evaluate`` measures the diagnosis on the catalogues themselves: every mistake bound into the reference must be
named (recall), no other mistake may be named (precision), and the reference and every valid variant in variants/
must get no diagnosis at all. It prints both figures per concept and exits non-zero below 90 % recall or on any
wrong accusation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from kata.concepts.impl import (
    ENTRY_SUFFIX,
    VARIANTS_ROOT,
    Implementation,
    ImplementationImportError,
    default_spec,
    load,
)
from kata.concepts.manifest import CONCEPTS, Concept, catalogued_mistake, concept
from kata.catalogue.observations import Observation, StubCalled, agree
from kata.catalogue.probes import PROBES, ProbeSet
from kata.rl import torch_threads

REFERENCE = "solutions"
MINIMUM_RECALL = 0.9


@dataclass(frozen=True)
class Diagnosis:
    """One public function that behaves differently from the reference.

    ``mistake`` is ``"concept/name"`` or None. ``probes`` counts the probes on which that mistake (when None: the
    closest one, if any) differs from the reference; ``matched``, on how many of them the function behaves like it.
    """

    concept: str
    function: str
    mistake: str | None
    matched: int
    probes: int

    def sentence(self) -> str:
        """One line for a student: the misunderstanding in the manifest's words and where to read about it."""
        owner = concept(self.concept)
        if self.mistake is None:
            return (f"your {self.function} differs from the reference, but like none of the catalogued mistakes of "
                    f"{owner.name}")
        mistake = catalogued_mistake(self.mistake)
        return (f"your {self.function} behaves like the catalogued mistake '{mistake.misunderstanding}' on "
                f"{self.matched} of {self.probes} probes: {owner.guide_section}, "
                f"`kata hint {owner.name} --level {mistake.hint}`")


class Catalogue:
    """The reference's and every catalogued mistake's observations, computed once per function and kept."""

    def __init__(self, reference: str = REFERENCE) -> None:
        self.reference_spec = reference
        self._implementations: dict[str | None, Implementation] = {}
        self._observations: dict[tuple[str | None, str], list[Observation] | None] = {}

    def implementation(self, mistake: str | None = None) -> Implementation:
        if mistake not in self._implementations:
            self._implementations[mistake] = load(self.reference_spec, mistake=mistake)
        return self._implementations[mistake]

    def observations(self, probe: ProbeSet, mistake: str | None = None) -> list[Observation]:
        key = (mistake, probe.function)
        if key not in self._observations:
            self._observations[key] = observe(self.implementation(mistake), probe)
        observations = self._observations[key]
        assert observations is not None, f"{self.reference_spec} ({mistake or 'reference'}) is a stub"
        return observations


def observe(implementation: Implementation, probe: ProbeSet) -> list[Observation] | None:
    """The function's observation on every probe; None if it is missing, does not import, or is a stub."""
    try:
        function = getattr(implementation, probe.function)
    except (AttributeError, ImplementationImportError):
        return None
    try:
        return [probe.observe(function, case) for case in probe.cases()]
    except StubCalled:
        return None


def diagnose_function(observed: list[Observation], probe: ProbeSet, catalogue: Catalogue) -> Diagnosis | None:
    """The diagnosis of one function's observations, or None when it behaves like the reference."""
    reference = catalogue.observations(probe)
    same = [agree(o, r, probe.rtol, probe.atol) for o, r in zip(observed, reference)]
    if all(same):
        return None
    full_matches: list[tuple[str, int]] = []
    closest: tuple[float, int, int] = (-1.0, 0, 0)
    for mistake in concept(probe.concept).mistakes:
        entry = f"{probe.concept}/{mistake.name}"
        wrong = catalogue.observations(probe, entry)
        distinguishing = [i for i, (w, r) in enumerate(zip(wrong, reference))
                          if not agree(w, r, probe.rtol, probe.atol)]
        if not distinguishing:
            continue  # this mistake does not show in this function
        like = [agree(o, w, probe.rtol, probe.atol) for o, w in zip(observed, wrong)]
        matched = sum(like[i] for i in distinguishing)
        if all(like):
            full_matches.append((entry, matched))
        closest = max(closest, (matched / len(distinguishing), matched, len(distinguishing)))
    if len(full_matches) == 1:
        entry, matched = full_matches[0]
        return Diagnosis(probe.concept, probe.function, entry, matched, matched)
    return Diagnosis(probe.concept, probe.function, None, closest[1], closest[2])


def diagnose(implementation: Implementation, concepts: Iterable[Concept], catalogue: Catalogue) -> list[Diagnosis]:
    """A diagnosis for every probed public function of ``concepts`` that behaves differently from the reference."""
    with torch_threads(1):  # tiny tensors: a second thread only adds hand-offs, and one fixes every sum's order
        return [d for c in concepts for d in _diagnose_concept(implementation, c, catalogue)]


def _diagnose_concept(implementation: Implementation, c: Concept, catalogue: Catalogue) -> list[Diagnosis]:
    diagnoses = []
    for name in c.exports:
        probe = PROBES.get(name)
        observed = observe(implementation, probe) if probe is not None else None
        diagnosis = diagnose_function(observed, probe, catalogue) if observed is not None else None
        if diagnosis is not None:
            diagnoses.append(diagnosis)
    return diagnoses


# ---- measuring the diagnosis on the catalogues ---------------------------------------------------------------------


@dataclass
class ConceptScore:
    concept: str
    mistakes: int = 0
    named: int = 0  # the bound mistake named, and nothing else
    wrong: int = 0  # bindings with another mistake named
    accusations: int = 0  # diagnoses of the reference or a valid variant
    variants: int = 0

    @property
    def recall(self) -> float:
        return self.named / self.mistakes if self.mistakes else 1.0

    @property
    def precision(self) -> float:
        claims = self.named + self.wrong + self.accusations
        return self.named / claims if claims else 1.0


def variant_entries(concept_name: str) -> list[str]:
    folder = VARIANTS_ROOT / concept_name
    return [f"{concept_name}/{p.stem}" for p in sorted(folder.glob(f"*{ENTRY_SUFFIX}"))]


def evaluate(concepts: list[Concept], catalogue: Catalogue, out=sys.stdout) -> list[ConceptScore]:
    """Bind each catalogued mistake and each valid variant into the reference and diagnose; print what happened."""
    scores = []
    reference = {d.concept: d for d in diagnose(catalogue.implementation(), CONCEPTS, catalogue) if d.mistake}
    for c in concepts:
        score = ConceptScore(c.name)
        for mistake in c.mistakes:
            entry = f"{c.name}/{mistake.name}"
            diagnoses = diagnose(catalogue.implementation(entry), [c], catalogue)
            named = {d.mistake for d in diagnoses if d.mistake}
            score.mistakes += 1
            if named == {entry}:
                score.named += 1
                verdict = "named   "
            elif named - {entry}:
                score.wrong += 1
                verdict = "WRONG   "
            else:
                verdict = "silent  "
            where = ", ".join(f"{d.function} {d.mistake or '-'} {d.matched}/{d.probes}" for d in diagnoses)
            print(f"{verdict}{entry:<52} {where or 'no function differs from the reference'}", file=out)
        for entry in variant_entries(c.name):
            score.variants += 1
            accused = [d for d in diagnose(load(catalogue.reference_spec, variant=entry), CONCEPTS, catalogue)
                       if d.mistake]
            score.accusations += len(accused)
            verdict = "ACCUSED " if accused else "clean   "
            print(f"{verdict}variant {entry:<44} {', '.join(d.mistake for d in accused) or ''}", file=out)
        if c.name in reference:
            score.accusations += 1
            print(f"ACCUSED the reference: {reference[c.name].mistake}", file=out)
        scores.append(score)
    return scores


def print_scores(scores: list[ConceptScore], seconds: float, out=sys.stdout) -> None:
    print(f"\n{'concept':<18} {'mistakes':>8} {'named':>6} {'wrong':>6} {'variants':>8} {'accused':>8} "
          f"{'recall':>7} {'precision':>9}", file=out)
    for s in scores:
        print(f"{s.concept:<18} {s.mistakes:>8} {s.named:>6} {s.wrong:>6} {s.variants:>8} {s.accusations:>8} "
              f"{s.recall:>7.1%} {s.precision:>9.1%}", file=out)
    total = ConceptScore("all", *(sum(getattr(s, f) for s in scores)
                                  for f in ("mistakes", "named", "wrong", "accusations", "variants")))
    print(f"{'all':<18} {total.mistakes:>8} {total.named:>6} {total.wrong:>6} {total.variants:>8} "
          f"{total.accusations:>8} {total.recall:>7.1%} {total.precision:>9.1%}", file=out)
    print(f"diagnose: recall {total.recall:.1%}, precision {total.precision:.1%} "
          f"({total.named} of {total.mistakes} mistakes named, {total.wrong} wrongly, {total.accusations} "
          f"accusations of the reference and {total.variants} valid variants) in {seconds:.1f} s", file=out)


def passes(scores: list[ConceptScore]) -> bool:
    mistakes = sum(s.mistakes for s in scores)
    named = sum(s.named for s in scores)
    clean = all(s.wrong == 0 and s.accusations == 0 for s in scores)
    return clean and (mistakes == 0 or named / mistakes >= MINIMUM_RECALL)


# ---- the command -------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kata diagnose", description=__doc__.split("\n\n")[0])
    parser.add_argument("concepts", nargs="*", metavar="CONCEPT", help="concepts to diagnose (default: all)")
    parser.add_argument("--impl", default=None, metavar="SPEC",
                        help="exercises (default, or $KATA_IMPL), solutions, or a folder laid out like exercises/")
    parser.add_argument("--mistake", default=None, metavar="CONCEPT/NAME", help="bind a catalogued mistake in")
    parser.add_argument("--variant", default=None, metavar="CONCEPT/NAME", help="bind a valid variant in")
    parser.add_argument("--json", action="store_true", help='print {"diagnoses": [...]}')
    parser.add_argument("--evaluate", action="store_true",
                        help="measure recall and precision on the mistake and variant catalogues")
    args = parser.parse_args(argv)
    try:
        concepts = [concept(name) for name in args.concepts] or list(CONCEPTS)
    except ValueError as error:
        parser.error(str(error))
    catalogue = Catalogue()
    started = time.perf_counter()
    if args.evaluate:
        scores = evaluate(concepts, catalogue)
        print_scores(scores, time.perf_counter() - started)
        return 0 if passes(scores) else 1
    try:
        implementation = load(args.impl or default_spec(), mistake=args.mistake, variant=args.variant)
    except (ValueError, ImportError) as error:
        print(f"kata diagnose: {error}", file=sys.stderr)
        return 2
    diagnoses = diagnose(implementation, concepts, catalogue)
    if args.json:
        print(json.dumps({"diagnoses": [{**asdict(d), "sentence": d.sentence()} for d in diagnoses]}))
        return 0
    for c in concepts:
        for line in concept_lines(c, [d for d in diagnoses if d.concept == c.name], implementation):
            print(line)
    return 0


def concept_lines(c: Concept, diagnoses: list[Diagnosis], implementation: Implementation) -> list[str]:
    """What `kata diagnose` says of one concept: a line per function that differs; when none does, whether its
    functions are still stubs or simply agree with the reference on the probes, which is no verdict on its tests."""
    if diagnoses:
        return [d.sentence() for d in diagnoses]
    probed = [name for name in c.exports if name in PROBES]
    observed = [name for name in probed if observe(implementation, PROBES[name]) is not None]
    if probed and not observed:
        return [f"{c.name}: not implemented yet (its functions are stubs): nothing to diagnose; `kata hint {c.name}` "
                "to begin"]
    stubs = [name for name in probed if name not in observed]
    written = ", ".join(observed)
    return [f"{c.name}: on the diagnosis's probes, {written} behave{'s' if len(observed) == 1 else ''} like the "
            "reference" + (f" ({', '.join(stubs)}: still stubs)" if stubs else "") + ". The probes are a few fixed "
            f"inputs, not the tests: `kata check {c.name}` says whether its tests pass."]


if __name__ == "__main__":
    sys.exit(main())
