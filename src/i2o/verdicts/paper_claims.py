"""The paper's claims, each mapped to the claim rows of the chapters that test it, and how the
book reads each of them.

Each chapter declares the claims its rows test in its own package (``i2o.chapters.<name>.
paper_claims``: ``CLAIMS`` and ``READINGS``); the book merges them in the chapters' order
(:func:`merged`, :func:`i2o.book.claims_page.registry`). A claim is one statement of *Test like
you Train in Implicit Deep Learning* (or of the companion paper, *Separation and Bias of Deep
Equilibrium Models*, for the chapter ``separation``) that the book tests, or one the book adds
(``book_own``):

- ``quote`` is the paper's own words, exactly as in its text under ``/work/shared/papers``
  (fragments joined by `` … ``; a Markdown link of the text counts as its label, emphasis marks
  are ignored). For a claim of the book's own it is the paper's sentence that the claim extends,
  and ``statement`` says what the book adds; ``""`` when no sentence of the paper is extended.
- ``where`` is the section, theorem or figure of the quote.
- ``rows`` are :class:`RowPattern` s: a chapter and a glob (:func:`fnmatch.fnmatchcase`) over the
  ids of that chapter's claim rows (``i2o.verdicts.claims.Claim.id``); a chapter names only its
  own rows.
- ``regime`` marks the book's gates and sanity checks: rows that say whether the other rows are
  decided in the regime of the paper's statements (models fit, solvers converge, the setup is
  what it should be). They are the book's own and state no claim of the paper.

A claim several chapters test is declared here once, without rows (:data:`FEWER_HURT` and the
book's gates); each chapter adds its rows with :meth:`PaperClaim.on`, and :func:`merged` joins
them. A :class:`Reading` says what the claim's sentence asserts as the book reads it, the
statistic, the guards, the function that decides it and the commit that fixed it (READING.md's
table); the claims page shows it, so that a reviewer can check that each reading predates its
verdicts.

A row that states more than the paper (another model, a stronger equivalence, a corrected sign, a
regime check) belongs to a ``book_own`` claim, never to a claim of the paper. ``tests/
test_paper_claims.py`` checks that every quote is in its paper and that every row id of the
published summaries (``published/``) is matched by some claim, so that a new row cannot be left
off the page without a failing test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

#: the papers' texts, by the name a :class:`PaperClaim` cites them with
PAPER = "test-like-you-train"
COMPANION = "separation-and-bias-of-deqs-openreview"
ELLIPSIS = " … "
#: the function most readings are decided by
RULE = "i2o.verdicts.rule.decide"


@dataclass(frozen=True)
class RowPattern:
    """The claim rows of ``chapter`` whose id matches the glob ``pattern``."""

    chapter: str
    pattern: str

    def matches(self, chapter: str, row_id: str) -> bool:
        return chapter == self.chapter and fnmatchcase(row_id, self.pattern)


@dataclass(frozen=True)
class PaperClaim:
    """One claim: the paper's words, where they are, and the rows that test them."""

    id: str
    quote: str
    where: str
    rows: tuple[RowPattern, ...]
    book_own: bool = False
    statement: str = ""
    regime: bool = False
    source: str = PAPER

    def fragments(self) -> list[str]:
        """The quote's fragments (each verbatim in the paper)."""
        return [part for part in self.quote.split(ELLIPSIS) if part]

    def tests(self, chapter: str, row_id: str) -> bool:
        """Whether the row ``row_id`` of ``chapter`` is one of this claim's rows."""
        return any(pattern.matches(chapter, row_id) for pattern in self.rows)

    def on(self, *found: Iterable[RowPattern]) -> PaperClaim:
        """This claim tested by the rows ``found`` (a chapter's share of a shared claim)."""
        return replace(self, rows=tuple(p for group in found for p in group))


@dataclass(frozen=True)
class Reading:
    """What a claim's sentence asserts as the book reads it, the statistic that decides it, its
    guards, the function that applies it and the commit that fixed it."""

    asserts: str
    statistic: str
    guards: str
    decided_by: str
    fixed_in: str


def rows(chapter: str, *patterns: str) -> tuple[RowPattern, ...]:
    """``RowPattern(chapter, p)`` for each pattern."""
    return tuple(RowPattern(chapter, pattern) for pattern in patterns)


def paper(id: str, quote: str, where: str, *found: Iterable[RowPattern],
          source: str = PAPER) -> PaperClaim:
    """A claim of the paper (``source``), tested by the rows ``found``."""
    return PaperClaim(id, quote, where, tuple(p for group in found for p in group), source=source)


def own(id: str, statement: str, quote: str, where: str, *found: Iterable[RowPattern],
        regime: bool = False, source: str = PAPER) -> PaperClaim:
    """A claim of the book's own: ``statement``, extending the paper's ``quote``."""
    return PaperClaim(id, quote, where, tuple(p for group in found for p in group), True,
                      statement, regime, source)


def merged(declared: Iterable[Sequence[PaperClaim]]) -> tuple[PaperClaim, ...]:
    """The claims of several chapters as one registry, in the order they are first declared:
    a claim declared by several (a shared one, :meth:`PaperClaim.on`) tested by all their rows.
    ``ValueError`` when two declarations of one id differ in anything but their rows."""
    found: dict[str, PaperClaim] = {}
    for claims in declared:
        for claim in claims:
            first = found.get(claim.id)
            if first is None:
                found[claim.id] = claim
            elif replace(first, rows=()) != replace(claim, rows=()):
                raise ValueError(f"claim {claim.id!r} is declared twice with different words")
            else:
                found[claim.id] = replace(first, rows=first.rows + claim.rows)
    return tuple(found.values())


def merged_readings(declared: Iterable[Mapping[str, Reading]]) -> dict[str, Reading]:
    """The readings of several chapters (and :data:`SHARED_READINGS`) as one mapping;
    ``ValueError`` when two give different readings of one claim."""
    found: dict[str, Reading] = {}
    for readings in declared:
        for id, reading in readings.items():
            if found.setdefault(id, reading) != reading:
                raise ValueError(f"claim {id!r} has two readings")
    return found


def claim_of(chapter: str, row_id: str, registry: Sequence[PaperClaim]) -> PaperClaim | None:
    """The first claim of ``registry`` that ``row_id`` of ``chapter`` tests, or ``None``."""
    return next((claim for claim in registry if claim.tests(chapter, row_id)), None)


def unmapped(found: Iterable[tuple[str, str]],
             registry: Sequence[PaperClaim]) -> list[tuple[str, str]]:
    """The ``(chapter, row id)`` pairs of ``found`` that no claim of ``registry`` tests."""
    return [(chapter, row_id) for chapter, row_id in found
            if claim_of(chapter, row_id, registry) is None]


# -- claims several chapters test (each adds its rows with .on) --------------------------------

FEWER_HURT = paper("figure-2-fewer-hurt", "using fewer iterations at inference is almost always "
                   "detrimental", "Section 4, Figure 2")
REGIME_FIT = own("regime-fit", "The models are in the regime of the claims: they fit their "
                 "training data and none diverged", "DEQs, which are overparametrized (e.g. "
                 "reaching 90% training accuracy on ImageNet compared to 80% test accuracy)",
                 "Section 4", regime=True)
REGIME_RESIDUAL = own("regime-residual", "Sanity check: the solver's residual keeps falling "
                      "beyond N (it is neither converged already nor stuck)", "not artefacts of "
                      "the convergence being already attained or stuck", "Section 4",
                      regime=True)
OWN_TENFOLD = own("own-residual-tenfold", "The book's own stricter solver check, gating "
                  "nothing: the residual falls at least tenfold beyond N", "increasing the "
                  "number of iterations above N produces better approximation of the inner "
                  "problem", "Section 4")
OWN_NEAR_EQUILIBRIUM = own("own-near-equilibrium", "The book's own, gating nothing: each model "
                           "was near its equilibrium where \"no improvement\" was read (mean "
                           "relative residual ≤ 0.05 at N and at the largest count; and a solve "
                           "run to convergence improves on N by less than δ)", "", "")

_ISSUE_61 = "40e5e6a"

#: The readings of the claims declared here.
SHARED_READINGS: dict[str, Reading] = {
    FEWER_HURT.id: Reading(
        "no N′ < N is better than N, and the fewest are worse",
        "every N′ < N: upper bound of improvement(N′) < δ (Bonferroni); the fewest's cost beyond "
        "the metric's floor (a direction)", "the fit quorum", RULE, _ISSUE_61),
    REGIME_RESIDUAL.id: Reading(
        "the residual keeps falling beyond N, and was not at its floor at N",
        "mean relative residual at N above 100 × float32's epsilon; 90 % interval of "
        "log10(r(N′max)/r(N)) below 0 (a fall of any size)",
        "gates the rows on more iterations; the tenfold fall is the book's own and gates nothing",
        "i2o.verdicts.questions.falling", _ISSUE_61),
    OWN_NEAR_EQUILIBRIUM.id: Reading(
        "each model was near its equilibrium where \"no improvement\" was read; a solve run to "
        "convergence does not improve on N beyond δ (deq_gaps, stability)",
        "mean relative residual at N and at N′max against 0.05; a solve of the training solver "
        "until relative residual ≤ 1e-4 or reference_factor × N steps: 90 % interval of "
        "performance(converged) − performance(N) below δ (test data's δ; stability: the arm's "
        "no_gain δ), fails above it",
        "gates nothing; undecided when some batch's reference solve did not converge",
        "i2o.verdicts.converged.reference_check", "5b5791b"),
}
