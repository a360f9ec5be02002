"""The stability chapter's conclusions, written from its claim rows (:mod:`.claims`); shown by
:func:`i2o.verdicts.prose.conclusions`."""

from __future__ import annotations

from i2o.chapters.stability.claims import LABELS
from i2o.verdicts.claims import Claims
from i2o.verdicts.prose import paragraph, sentence


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """The summary of the chapter, one paragraph: a sentence per decided (or undecided) claim.
    The chapter has one section of conclusions (``section`` is ignored)."""
    parts = []
    if claims["health"].holds is False:
        parts.append(f"**Warning: training diverged** ({claims['health'].value}); the claims that "
                     "depend on these models are undecided.")
    fit = claims["fit"]
    if fit.holds is False:
        parts.append(f"Too few models of this run fit their training set ({fit.check}), so the "
                     "paper's claims, which are about models that do, are not decided here.")
    elif fit.facts.not_fitting:
        parts.append(f"Not every model fits its training set; the claims below use those that "
                     f"do ({fit.check}).")
    else:
        parts.append(f"Every model fits its training set ({fit.check}).")
    parts.append(sentence(
        claims["not_more_stable"],
        "In this run the IFT-trained networks are **not more stable** than the unrolled ones "
        f"({claims['not_more_stable'].value}), as the paper's Figure 5 claims.",
        "In this run the IFT-trained networks are **more stable** than the unrolled ones by more "
        f"than the margin ({claims['not_more_stable'].value}), against the paper's Figure 5 claim.",
        "This run cannot say whether IFT-trained networks are more stable than unrolled ones"))
    if claims["not_more_stable"].holds is not None:
        parts.append(sentence(
            claims["equally_stable"],
            "Their accuracy changes are also equal within the margin (the book's own, stronger "
            "statement).",
            "Their accuracy changes differ by more than the margin (the book's own, stronger "
            "statement than the paper's).",
            "Whether their accuracy changes are equal within the margin (the book's own "
            "statement) is open"))
    for arm, label in LABELS.items():
        gain, residual = claims[f"{arm}_no_gain"], claims[f"{arm}_residual"]
        falling = residual.holds is True
        parts.append(sentence(
            gain,
            f"More test iterations than in training do not improve the {label} networks beyond "
            "the margin" + (" although the residual of the last iterate keeps falling beyond "
                            "N: a better solution of the inner problem does not give a better "
                            "classifier." if falling else "."),
            f"More test iterations than in training do improve the {label} networks beyond the "
            f"margin ({gain.value}): no inner-iterations overfitting in this run.",
            f"Whether more test iterations improve the {label} networks is undecided"))
        parts.append(sentence(
            claims[f"{arm}_fewer_hurt"],
            f"Fewer iterations than in training lower their accuracy, none of the counts below "
            f"N raising it by more than the margin ({claims[f'{arm}_fewer_hurt'].value}).",
            f"Fewer iterations than in training do not always lower their accuracy "
            f"({claims[f'{arm}_fewer_hurt'].value}).",
            "Whether fewer iterations lower their accuracy is undecided"))
        if residual.holds is False:
            parts.append(f"The paper's solver guard fails for {label}: "
                         f"{residual.check.split('; ')[-1]} ({residual.value}), so the rows on "
                         "more iterations are left undecided.")
    return [paragraph(parts)]
