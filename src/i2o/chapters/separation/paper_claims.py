"""The claims of the companion paper (*Separation and Bias of Deep Equilibrium Models*) the
separation chapter tests, each with the paper's words and the chapter's rows
(:mod:`i2o.verdicts.paper_claims` says how they are written and merged into the claims page),
and how the book reads them."""

from __future__ import annotations

from i2o.verdicts.paper_claims import COMPANION, PaperClaim, Reading, own, paper, rows

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    paper("companion-linear-regions", "we claim that DEQ … can potentially generate a larger "
          "number of linear regions compared to FFNs with the same number of neurons",
          "Companion: Theorem 1, Proposition 1 (the authors' response)",
          rows(FIGURE, "sawtooth/construction"), source=COMPANION),
    paper("companion-table-1", "DEQ can achieve better performance with similar FLOPs per "
          "iteration compared to various FFNs", "Companion: rebuttal Table 1",
          rows(FIGURE, "sawtooth/adam-*", "sawtooth/lbfgs-*"), source=COMPANION),
    paper("companion-steep", "the infinity norm of FFNs increases as we apply larger … while the "
          "infinity norm of DEQs remains lower than that of FFNs, consistent with Theorem 2",
          "Companion: Theorem 2, rebuttal Figure 1", rows(FIGURE, "steep/*"),
          source=COMPANION),
    paper("companion-theorem-3", "The implicit regularization caused by gradient flow from a "
          "diagonal linear DEQ is characterized", "Companion: abstract (3), Theorem 3 as printed",
          rows(FIGURE, "diagonal/argmin-minus"), source=COMPANION),
    paper("companion-density", "They claim that the implicit bias implies that GF (or GD) learns "
          "a dense feature.", "Companion: Section 5, as a review summarizes it",
          rows(FIGURE, "diagonal/density"), source=COMPANION),
    paper("companion-feature-density", "indicating the features are indeed dense",
          "Companion: rebuttal Figure 2", rows(FIGURE, "diagonal/feature-density"),
          source=COMPANION),
    paper("companion-gotu-relu", "with specific examples showing the benefits brought by such "
          "regularization", "Companion: abstract (3), Section 4 (GOTU)",
          rows(FIGURE, "gotu/f*-deq-vs-fnn"), source=COMPANION),
    paper("companion-gotu-linear", "linear DEQ with a bias term achieves a smaller GOTU error "
          "than a diagonal linear neural network", "Companion: GOTU, as a review summarizes it",
          rows(FIGURE, "gotu/frozen-c*"), source=COMPANION),
    own("companion-theorem-3-sign", "Theorem 3 with the sign implied by the authors' own closed "
        "form of the gradient flow (not the sign printed)", "The implicit regularization caused "
        "by gradient flow from a diagonal linear DEQ is characterized",
        "Companion: abstract (3), Theorem 3", rows(FIGURE, "diagonal/argmin-plus"),
        source=COMPANION),
    own("regime-companion-setup", "Checks of the companion chapter's setups: each trained "
        "affine model reaches the unseen MSE its gradient flow predicts", "", "",
        rows(FIGURE, "gotu/*-prediction"), regime=True),
)

#: How the book reads the claims this chapter declares (READING.md's table).
READINGS: dict[str, Reading] = {
    "companion-steep": Reading(
        "the FNN's max |weight| grows with d faster than the DEQ's (a sign)",
        "slope of log2 max|weight| against d, FNN − DEQ over seeds, beyond the floor 0.001",
        "both kinds reach the loss level at every d",
        "i2o.chapters.separation.claims_expressivity.steep_claim", "eb1348e"),
}
