"""The meta-learning chapter's conclusions, written from its claims
(:func:`i2o.verdicts.prose.conclusions`).

Each section of the chapter (``claims.SECTIONS``: the meta-gradient noise, Figure 3, Figure 4,
the ablation) concludes with one bullet per claim of the section
(:func:`i2o.verdicts.prose.bullet`), in the order of the rows: the claim, its verdict in this run
and the reason its row gives.
"""

from __future__ import annotations

from i2o.verdicts import prose
from i2o.verdicts.claims import Claims

EMPTY = "- (no claim in this section for these parameters)"


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """One Markdown list per section (of ``section`` only, when given): a line per claim."""
    sections: dict[str, list[str]] = claims.facts["sections"]
    chosen = [section] if section else list(sections)
    return ["\n".join(prose.bullet(claims[id]) for id in sections[name]) or EMPTY
            for name in chosen]
