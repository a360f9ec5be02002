"""The separation chapter's conclusions, written from its claims table (:mod:`.claims`).

Each section of the notebook ends with its claims as Markdown bullets
(:func:`i2o.verdicts.prose.bullet`): the statement, the verdict and the reason behind it (the row's
``check``, which quotes the measurement and says why an undecided claim is undecided). A row's
section is its ``section``, the first part of its id (``"gotu/f1-deq-vs-fnn"``).
"""

from __future__ import annotations

from i2o.verdicts.claims import Claims
from i2o.verdicts.prose import bullet

SECTIONS = ("sawtooth", "steep", "diagonal", "gotu")


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """The bullets of ``section`` (one of :data:`SECTIONS`) as one paragraph; every section's,
    one paragraph each, when ``section`` is empty."""
    if section and section not in SECTIONS:
        raise ValueError(f"section must be one of {', '.join(SECTIONS)}; got {section!r}")
    return ["\n".join(bullet(row) for row in claims.rows if row.section == name)
            for name in ((section,) if section else SECTIONS)]
