"""The separation chapter's conclusions, written from its claims table (:mod:`.claims`).

Each section of the notebook ends with its claims as Markdown bullets: the statement, the verdict
and the measured value behind it (the row's ``value``, which already says why an undecided claim
is undecided; :func:`i2o.prose.sentence` would add "run the 'quick' profile" to it, even in the
quick profile, so the bullets are written here). A row's section is the first part of its id
(``"gotu/f1-deq-vs-fnn"``).
"""

from __future__ import annotations

from i2o.claims import Claim, Claims

SECTIONS = ("sawtooth", "steep", "diagonal", "gotu")
_VERDICTS = {True: "**holds**", False: "**fails**", None: "is **undecided**"}


def bullet(row: Claim) -> str:
    """One claim as a Markdown bullet: statement, verdict, measured value."""
    return f"- {row.claim}: {_VERDICTS[row.holds]} — {row.value}."


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """The bullets of ``section`` (one of :data:`SECTIONS`) as one paragraph; every section's,
    one paragraph each, when ``section`` is empty."""
    if section and section not in SECTIONS:
        raise ValueError(f"section must be one of {', '.join(SECTIONS)}; got {section!r}")
    return ["\n".join(bullet(row) for row_id, row in claims.by_id.items()
                      if row_id.split("/", 1)[0] == name)
            for name in ((section,) if section else SECTIONS)]
