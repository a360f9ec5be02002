"""The toy chapter's conclusion, written from its claims
(:func:`i2o.verdicts.prose.conclusions`)."""

from __future__ import annotations

from i2o.verdicts import prose
from i2o.verdicts.claims import Claims

from .claims import MORE_HELP


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """One sentence per verdict of the chapter's claim."""
    return [prose.sentence(
        claims[MORE_HELP],
        holds="Iterating longer at test time than at training helps: the iteration had not "
              "converged at the training number of iterations.",
        fails="Iterating longer at test time than at training does not help: the iteration "
              "had already converged at the training number of iterations.",
        undecided="Whether iterating longer at test time helps is left open")]
