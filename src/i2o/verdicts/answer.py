"""A chapter's answer, for the top of its page: what its run says about each claim of the paper.

Generated from the chapter's claims table and the claims of the paper its rows test (the
chapter's ``paper_claims.CLAIMS``, which its table carries: ``Claims.paper``): a tally of the
rows, then one line per claim of the paper the chapter tests, with the verdicts of its rows,
then the same tally for the book's own checks. :meth:`i2o.verdicts.claims.Claims.report` glues
it as ``<figure>-answer``, so that the chapter's first cell can show, above everything it
computes, what it found (the glue is resolved when the page is built, after the notebook ran).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from i2o.verdicts.paper_claims import PaperClaim, claim_of


class Row(Protocol):
    """What the answer reads of a claim row (:class:`i2o.verdicts.claims.Claim`)."""

    id: str
    holds: bool | None


class Table(Protocol):
    """What the answer reads of a claims table (:class:`i2o.verdicts.claims.Claims`)."""

    figure: str
    profile: str
    rows: list
    paper: tuple[PaperClaim, ...]

#: The glue name of a chapter's answer (:data:`i2o.provenance.numbers.ANSWER_SUFFIX` keeps it out
#: of the chapter's numbers).
GLUE = "{figure}-answer"
#: A quote longer than this is cut at a word, with an ellipsis.
QUOTE_CHARACTERS = 110


def counts(rows: Iterable[Row]) -> str:
    """``"3 hold, 1 fails, 2 undecided"`` (the verdicts present, in that order)."""
    found = Counter("holds" if r.holds else "fails" if r.holds is False else "undecided"
                    for r in rows)
    words = {"holds": ("holds", "hold"), "fails": ("fails", "fail"),
             "undecided": ("undecided", "undecided")}
    return ", ".join(f"{found[v]} {words[v][found[v] != 1]}"
                     for v in ("holds", "fails", "undecided") if found[v]) or "no rows"


def _short(quote: str) -> str:
    text = " ".join(quote.split())
    if len(text) <= QUOTE_CHARACTERS:
        return text
    return text[:QUOTE_CHARACTERS].rsplit(" ", 1)[0] + " …"


#: The glue name of the list under a chapter's answer box: one line per claim of the paper.
LIST_GLUE = "{figure}-claims-answer"


def answer(claims: Table, registry: Sequence[PaperClaim] | None = None) -> str:
    """The Markdown of the chapter's answer (module docstring): the tally, then the list;
    ``registry``: the claims to read the rows by (default: the table's own, ``claims.paper``)."""
    return "\n\n".join(part for part in answer_parts(claims, registry) if part)


def answer_parts(claims: Table, registry: Sequence[PaperClaim] | None = None
                 ) -> tuple[str, str]:
    """The chapter's answer in two parts, the tally for the box at the top of its page and the
    list of the paper's claims it tests (one line each, with their verdicts) shown under it."""
    if registry is None:
        registry = claims.paper
    by_claim: dict[str, list[Row]] = {}
    claimed: dict[str, PaperClaim] = {}
    own: list[Row] = []
    for row in claims.rows:
        found = claim_of(claims.figure, row.id, registry) if row.id else None
        if found is None or found.book_own:
            own.append(row)
            continue
        by_claim.setdefault(found.id, []).append(row)
        claimed[found.id] = found
    tested = sum(map(len, by_claim.values()))
    lines = [f"**What this run found** (profile `{claims.profile}`; every row with its "
             f"measurement and reason: the claims table below): the paper's claims are "
             f"tested by {tested} row{'s' * (tested != 1)}: "
             f"{counts(r for rows in by_claim.values() for r in rows)}; the book's own checks "
             f"({len(own)} row{'s' * (len(own) != 1)}): {counts(own)}."]
    listed = []
    for id, rows in by_claim.items():
        claim = claimed[id]
        where = f"{claim.where}: " if claim.where else ""
        listed.append(f"- {where}“{_short(claim.quote)}” — {counts(rows)}")
    return lines[0], "\n".join(listed)
