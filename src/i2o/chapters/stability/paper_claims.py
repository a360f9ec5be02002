"""The claims of the paper the stability chapter tests (Figure 5, Sections 3 and 5; its share of
Figure 2's "fewer hurt" and of the book's gates), each with the paper's words and the chapter's
rows (:mod:`i2o.verdicts.paper_claims` says how they are written and merged into the claims
page), and how the book reads them."""

from __future__ import annotations

from i2o.verdicts.paper_claims import (
    FEWER_HURT,
    OWN_NEAR_EQUILIBRIUM,
    OWN_TENFOLD,
    REGIME_FIT,
    REGIME_RESIDUAL,
    PaperClaim,
    Reading,
    own,
    paper,
    rows,
)

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    paper("ift-not-less-prone", "Implicit Deep Learning trained with IFT is not less prone to I2O "
          "than if it is trained through unrolling in this case. We confirm this empirically in "
          "Section 5 for practical cases with DEQs.", "Section 3, after Theorem 2; Section 5",
          rows(FIGURE, "ift_no_gain", "unrolled_no_gain")),
    paper("figure-5", "there is no gain of stability when using IFT gradient descent over "
          "unrolling", "Section 5, Figure 5", rows(FIGURE, "not_more_stable")),
    paper("unrolled-memory", "for the unrolled network, we backpropagate through the Broyden "
          "iterates which has a high memory requirement", "Section 5",
          rows(FIGURE, "memory")),
    FEWER_HURT.on(rows(FIGURE, "ift_fewer_hurt", "unrolled_fewer_hurt")),
    own("equally-stable", "IFT and unrolled networks are equally stable: their accuracy changes "
        "away from N differ by less than ±δ (the paper says only that IFT is not more stable)",
        "there is no gain of stability when using IFT gradient descent over unrolling",
        "Section 5, Figure 5", rows(FIGURE, "equally_stable")),
    REGIME_FIT.on(rows(FIGURE, "health", "fit")),
    REGIME_RESIDUAL.on(rows(FIGURE, "*_residual")),
    OWN_TENFOLD.on(rows(FIGURE, "*_tenfold")),
    OWN_NEAR_EQUILIBRIUM.on(rows(FIGURE, "*_near", "*_reference")),
)

_ISSUE_61 = "40e5e6a"

#: How the book reads the claims this chapter declares (READING.md's table).
READINGS: dict[str, Reading] = {
    "figure-5": Reading(
        "IFT's change away from N is not smaller than unrolled's by more than δ",
        "mean over N′ ≠ N of |acc(N′) − acc(N)| per model, IFT − unrolled over seed pairs, "
        "one-sided above −δ; δ = ¼ × unrolled's mean change; resolution of the compared mean",
        "both arms fit; power only where the interval straddles −δ",
        "i2o.chapters.stability.claims", _ISSUE_61),
}
