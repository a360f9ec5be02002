"""The affine chapter's conclusions written from its claims
(:func:`i2o.verdicts.prose.conclusions`).

The chapter concludes in its own text (the notebook's summary, which points to the claims table
for this run's verdicts): no sentence of it is generated, so :func:`paragraphs` has none.
"""

from __future__ import annotations

from i2o.verdicts.claims import Claims


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """No generated sentences (see the module's docstring)."""
    return []
