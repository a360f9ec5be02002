"""The claims of the paper the affine chapter tests (Section 3, Appendices A, C and G.3:
Theorems 1 and 2, Lemmas 1 and A.2, Corollaries 1 and 2, Figures 1 and G.3), each with the
paper's words and the chapter's rows (:mod:`i2o.verdicts.paper_claims` says how they are written
and merged into the claims page), and how the book reads them."""

from __future__ import annotations

from i2o.verdicts.paper_claims import PaperClaim, Reading, paper, rows

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    paper("theorem-1", "Inner Iterations Overfitting for affine inner problems",
          "Section 3, Theorem 1", rows(FIGURE, "theorem1")),
    paper("lemma-a2", "the iterates of the fixed-point iteration method with fixed step size η "
          "have the following expression", "Appendix A, Lemma A.2", rows(FIGURE, "lemma_a2")),
    paper("corollary-1", "Overparametrization in θ … if U is surjective, we have for all ΔN",
          "Section 3, Corollary 1, Figure 1 (left)", rows(FIGURE, "corollary1")),
    paper("corollary-2", "Average case", "Section 3, Corollary 2",
          rows(FIGURE, "corollary2", "corollary2_nonnormal")),
    paper("figure-1-right-shrinks", "the lower bound decreases in magnitude as the inner problem "
          "is more and more overparametrized in θ", "Section 3, Figure 1 (right)",
          rows(FIGURE, "right_shrinks")),
    paper("figure-1-right-zero", "An edge case of Corollary 2 is the situation where … because "
          "the left term cancels", "Section 3, after Corollary 2 (d_x ≤ d_θ)",
          rows(FIGURE, "right_zero")),
    paper("figure-1-right-flat", "the lower bound of Theorem 1 does not vary significantly for "
          "different numbers of inner iterations", "Section 3, Figure 1 (right)",
          rows(FIGURE, "right_flat_large_n", "right_flat_all_n")),
    paper("figure-g3", "the lower bound can reach 0 for a much smaller θ dimension when the inner "
          "and outer problem are not strongly convex than when they are",
          "Appendix G.3, Figure G.3", rows(FIGURE, "figure_g3")),
    paper("lemma-1", "Convergence of the practical IFT gradient descent", "Section 3, Lemma 1",
          rows(FIGURE, "lemma1")),
    paper("theorem-2", "Equivalence of IFT and unrolled solutions for affine inner problems",
          "Section 3, Theorem 2", rows(FIGURE, "theorem2")),
)

#: How the book reads the claims this chapter declares (READING.md's table): none written.
READINGS: dict[str, Reading] = {}
