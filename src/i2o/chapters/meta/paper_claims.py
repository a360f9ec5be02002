"""The claims of the paper the meta chapter tests (Figures 3 and 4, Section 4; the book's Figure
B2), each with the paper's words and the chapter's rows (:mod:`i2o.verdicts.paper_claims` says
how they are written and merged into the claims page), and how the book reads them."""

from __future__ import annotations

from i2o.verdicts.paper_claims import PaperClaim, Reading, own, paper, rows

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    paper("figure-3-more-steps", "the best performance at test time is achieved for a number of "
          "inner iterations much larger than the one used during training", "Section 4, Figure 3",
          rows(FIGURE, "figure3/*/more-steps")),
    paper("figure-3-before-convergence", "the best MSE is reached before convergence",
          "Section 4, Figure 3", rows(FIGURE, "figure3/*/best-before-convergence")),
    paper("figure-4", "the better the model is at overfitting the training dataset … the less it "
          "benefits from more iterations at inference", "Section 4, Figure 4",
          rows(FIGURE, "figure4/fit-ordering")),
    own("meta-ablation", "Figure 3's claims with per-set batch normalization in place of the "
        "paper's transductive batch normalization", "transductive batch normalization (i.e. the "
        "batch statistics are not stored)", "Appendix F.3 (the book's Figure B2)",
        rows(FIGURE, "ablation/*/more-steps", "ablation/*/best-before-convergence")),
    own("meta-mechanism", "Why the outer training loss of some Figure 4 iMAML models rose: "
        "the mechanism their checkpoint-by-checkpoint probes name (the hypergradient not a "
        "descent direction, an inner problem not strongly convex, the line search exhausted, "
        "or Adam's step)", "This formula is heuristic and does not necessarily provide a "
        "descent direction for arbitrary", "Section 3, on Eq. 12",
        rows(FIGURE, "figure4/mechanism")),
    own("figure-4-size", "Figure 4 read on the training-set size B, the lever the experiment "
        "varies: the fewer meta-batches, the higher D̄ (the paper measures overparametrization "
        "by ℓ(z_N), the row figure-4 reads)", "Generally, the more meta-batches there are in the "
        "training set, the higher this loss", "Figure 4 (caption)",
        rows(FIGURE, "figure4/size-ordering")),
    own("regime-meta-floor", "Sanity check: the per-set batch-normalization ablation never goes "
        "below its test-MSE floor", "", "", rows(FIGURE, "ablation/*/above-floor"), regime=True),
    own("regime-meta-noise", "Check of iMAML's λ: at initialization its meta-gradient is not "
        "dominated by noise", "", "", rows(FIGURE, "noise/*"), regime=True),
)

_ISSUE_61 = "40e5e6a"

#: How the book reads the claims this chapter declares (READING.md's table).
READINGS: dict[str, Reading] = {
    "figure-3-before-convergence": Reading(
        "the test MSE at convergence is higher than the best",
        "MAML: convergence = k_last where the median task's support-gradient norm ≤ 10⁻³ × at "
        "k = 0; k* chosen on half the tasks, MSE(k_last) − MSE(k*) on the other half beyond the "
        "floor 10⁻⁴. iMAML: against the converged L-BFGS solution",
        "the model's gates; an unsolved inner problem leaves it undecided",
        "i2o.chapters.meta.claims_figure3.best_before_convergence", "80593f3"),
    "figure-4": Reading(
        "across models, lower ℓ(z_N) goes with higher D",
        "Kendall τ between ℓ(z_N) and D̄, the mean of D(N, ΔN) over the ΔN > 0 grid; exact "
        "one-sided p ≤ 0.05", "each model at its best point; none set aside",
        "i2o.chapters.meta.claims_figure4.fit_ordering", _ISSUE_61),
    "figure-4-size": Reading(
        "the book's own: across models, fewer meta-batches B go with higher D̄",
        "Kendall τ-b between B and D̄, normal approximation, one-sided p ≤ 0.05",
        "≥ 10 models over ≥ 2 sizes", "i2o.chapters.meta.claims_figure4.size_ordering",
        _ISSUE_61),
    "meta-mechanism": Reading(
        "the book's own: which sign accompanies the onsets of the Figure 4 models' rises",
        "a sign at ≥ half of the onsets (rises starting within 2 × the lowest loss so far) and "
        "more often there than at calm intervals, Fisher's exact one-sided p ≤ 0.05; else "
        "Adam's step when −ĝ descends at every onset",
        "≥ 5 onsets; every Figure 4 model that rose more than twofold probed",
        "i2o.chapters.meta.mechanism.judge", "812106b"),
}
