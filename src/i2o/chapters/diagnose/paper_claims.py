"""The book's own claims of the diagnosis chapter (the paper's check applied to two DEQs it did
not study) and its share of the book's gates, each with the paper's sentence it extends and the
chapter's rows (:mod:`i2o.verdicts.paper_claims`)."""

from __future__ import annotations

from i2o.verdicts.paper_claims import REGIME_FIT, REGIME_RESIDUAL, PaperClaim, Reading, own, rows

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    own("diagnose-more", "The paper's check applied to two DEQs it did not study (a torchdeq "
        "ConvDEQ and the book's MDEQ): whether more iterations than N help, hurt or make no "
        "difference beyond δ", "do not benefit from increasing the number of iterations at "
        "inference", "Abstract", rows(FIGURE, "*_help", "*_hurt", "*_same")),
    own("diagnose-fewer", "The same two DEQs: fewer iterations than N hurt",
        "using fewer iterations at inference is almost always detrimental", "Section 4",
        rows(FIGURE, "*_fewer")),
    own("diagnose-recommendation", "The test-time N′ the book's diagnosis recommends for each "
        "of the two DEQs", "one should use the same number of inner iterations as in training",
        "Section 1", rows(FIGURE, "*_recommendation")),
    REGIME_FIT.on(rows(FIGURE, "*_fit")),
    REGIME_RESIDUAL.on(rows(FIGURE, "*_residual")),
)

#: How the book reads the claims this chapter declares (READING.md's table): none written.
READINGS: dict[str, Reading] = {}
