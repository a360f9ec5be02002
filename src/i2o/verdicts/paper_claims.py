"""The paper's claims, each mapped to the claim rows of the chapters that test it.

One :class:`PaperClaim` per statement of *Test like you Train in Implicit Deep Learning* (and of
the companion paper, *Separation and Bias of Deep Equilibrium Models*, for the chapter
``separation``) that the book tests, and one per claim the book adds (``book_own``), in the order
of the page that shows them (:mod:`i2o.book.claims_page`, "The paper's claims at a glance").

- ``quote`` is the paper's own words, exactly as in its text under ``/work/shared/papers``
  (fragments joined by `` … ``; a Markdown link of the text counts as its label, emphasis marks
  are ignored). For a claim of the book's own it is the paper's sentence that the claim extends,
  and ``statement`` says what the book adds; ``""`` when no sentence of the paper is extended.
- ``where`` is the section, theorem or figure of the quote.
- ``rows`` are :class:`RowPattern` s: a chapter and a glob (:func:`fnmatch.fnmatchcase`) over the
  ids of that chapter's claim rows (``i2o.verdicts.claims.Claim.id``).
- ``regime`` marks the book's gates and sanity checks: rows that say whether the other rows are
  decided in the regime of the paper's statements (models fit, solvers converge, the setup is
  what it should be). They are the book's own and state no claim of the paper.

A row states more than the paper (another model, a stronger equivalence, a corrected sign, a
regime check) belongs to a ``book_own`` claim, never to a claim of the paper. ``tests/
test_paper_claims.py`` checks that every quote is in its paper and that every row id of the
published summaries (``published/``) is matched by some claim here, so that a new row cannot be
left off the page without a failing test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

#: the papers' texts, by the name a :class:`PaperClaim` cites them with
PAPER = "test-like-you-train"
COMPANION = "separation-and-bias-of-deqs-openreview"
ELLIPSIS = " … "


@dataclass(frozen=True)
class RowPattern:
    """The claim rows of ``chapter`` whose id matches the glob ``pattern``."""

    chapter: str
    pattern: str

    def matches(self, chapter: str, row_id: str) -> bool:
        return chapter == self.chapter and fnmatchcase(row_id, self.pattern)


@dataclass(frozen=True)
class PaperClaim:
    """One claim: the paper's words, where they are, and the rows that test them."""

    id: str
    quote: str
    where: str
    rows: tuple[RowPattern, ...]
    book_own: bool = False
    statement: str = ""
    regime: bool = False
    source: str = PAPER

    def fragments(self) -> list[str]:
        """The quote's fragments (each verbatim in the paper)."""
        return [part for part in self.quote.split(ELLIPSIS) if part]

    def tests(self, chapter: str, row_id: str) -> bool:
        """Whether the row ``row_id`` of ``chapter`` is one of this claim's rows."""
        return any(pattern.matches(chapter, row_id) for pattern in self.rows)


def rows(chapter: str, *patterns: str) -> tuple[RowPattern, ...]:
    """``RowPattern(chapter, p)`` for each pattern."""
    return tuple(RowPattern(chapter, pattern) for pattern in patterns)


def _paper(id: str, quote: str, where: str, *found: Iterable[RowPattern],
           source: str = PAPER) -> PaperClaim:
    return PaperClaim(id, quote, where, tuple(p for group in found for p in group), source=source)


def _own(id: str, statement: str, quote: str, where: str, *found: Iterable[RowPattern],
         regime: bool = False, source: str = PAPER) -> PaperClaim:
    return PaperClaim(id, quote, where, tuple(p for group in found for p in group), True,
                      statement, regime, source)


CLAIMS: tuple[PaperClaim, ...] = (
    # -- Section 3 and Appendices A, C, G.3: the affine theory (chapter affine) ------------------
    _paper("theorem-1", "Inner Iterations Overfitting for affine inner problems",
           "Section 3, Theorem 1", rows("affine", "theorem1")),
    _paper("lemma-a2", "the iterates of the fixed-point iteration method with fixed step size η "
           "have the following expression", "Appendix A, Lemma A.2", rows("affine", "lemma_a2")),
    _paper("corollary-1", "Overparametrization in θ … if U is surjective, we have for all ΔN",
           "Section 3, Corollary 1, Figure 1 (left)", rows("affine", "corollary1")),
    _paper("corollary-2", "Average case", "Section 3, Corollary 2",
           rows("affine", "corollary2", "corollary2_nonnormal")),
    _paper("figure-1-right-shrinks", "the lower bound decreases in magnitude as the inner problem "
           "is more and more overparametrized in θ", "Section 3, Figure 1 (right)",
           rows("affine", "right_shrinks")),
    _paper("figure-1-right-zero", "An edge case of Corollary 2 is the situation where … because "
           "the left term cancels", "Section 3, after Corollary 2 (d_x ≤ d_θ)",
           rows("affine", "right_zero")),
    _paper("figure-1-right-flat", "the lower bound of Theorem 1 does not vary significantly for "
           "different numbers of inner iterations", "Section 3, Figure 1 (right)",
           rows("affine", "right_flat_large_n", "right_flat_all_n")),
    _paper("figure-g3", "the lower bound can reach 0 for a much smaller θ dimension when the inner "
           "and outer problem are not strongly convex than when they are",
           "Appendix G.3, Figure G.3", rows("affine", "figure_g3")),
    _paper("lemma-1", "Convergence of the practical IFT gradient descent", "Section 3, Lemma 1",
           rows("affine", "lemma1")),
    _paper("theorem-2", "Equivalence of IFT and unrolled solutions for affine inner problems",
           "Section 3, Theorem 2", rows("affine", "theorem2")),
    # -- Section 4 and Appendix G: DEQs (chapters deq_gaps, stability) -------------------------
    _paper("figure-2-no-gain", "the performance of the model does not improve when increasing "
           "the number of iterations at test time", "Section 4, Figure 2",
           rows("deq_gaps", "classification_test_no_gain", "language_test_no_gain")),
    _paper("figure-2-fewer-hurt", "using fewer iterations at inference is almost always "
           "detrimental", "Section 4, Figure 2",
           rows("deq_gaps", "classification_test_fewer_hurt", "language_test_fewer_hurt"),
           rows("stability", "ift_fewer_hurt", "unrolled_fewer_hurt")),
    _paper("figures-g1-g2", "Similar observations can be made on the training performance and on "
           "training and test losses", "Section 4, Figures G.1 and G.2",
           rows("deq_gaps", "*_train_no_gain", "*_train_fewer_hurt")),
    _paper("figure-g4-similar", "The results of these experiments show similar findings as the "
           "ones from Figure 2.", "Section 4, Figure G.4",
           rows("deq_gaps", "deq_test_no_gain", "elder_test_no_gain", "deq_test_fewer_hurt",
                "elder_test_fewer_hurt")),
    _paper("figure-g4-deq", "in one case it's better to use fewer iterations than at training "
           "time (for DEQ)", "Appendix G.4, Figure G.4", rows("deq_gaps", "deq_test_fewer_better")),
    _paper("figure-g4-elder", "in the other case it's better to use … more iterations (for "
           "ELDER)", "Appendix G.4, Figure G.4", rows("deq_gaps", "elder_test_more_better")),
    # -- Sections 3 and 5: IFT against unrolling (chapter stability) ---------------------------
    _paper("ift-not-less-prone", "Implicit Deep Learning trained with IFT is not less prone to I2O "
           "than if it is trained through unrolling in this case. We confirm this empirically in "
           "Section 5 for practical cases with DEQs.", "Section 3, after Theorem 2; Section 5",
           rows("stability", "ift_no_gain", "unrolled_no_gain")),
    _paper("figure-5", "there is no gain of stability when using IFT gradient descent over "
           "unrolling", "Section 5, Figure 5", rows("stability", "not_more_stable")),
    _paper("unrolled-memory", "for the unrolled network, we backpropagate through the Broyden "
           "iterates which has a high memory requirement", "Section 5",
           rows("stability", "memory")),
    # -- Section 4: meta-learning (chapter meta) -----------------------------------------------
    _paper("figure-3-more-steps", "the best performance at test time is achieved for a number of "
           "inner iterations much larger than the one used during training", "Section 4, Figure 3",
           rows("meta", "figure3/*/more-steps")),
    _paper("figure-3-before-convergence", "the best MSE is reached before convergence",
           "Section 4, Figure 3", rows("meta", "figure3/*/best-before-convergence")),
    _paper("figure-4", "the better the model is at overfitting the training dataset … the less it "
           "benefits from more iterations at inference", "Section 4, Figure 4",
           rows("meta", "figure4/fit-ordering")),
    # -- the companion paper (chapter separation) ----------------------------------------------
    _paper("companion-linear-regions", "we claim that DEQ … can potentially generate a larger "
           "number of linear regions compared to FFNs with the same number of neurons",
           "Companion: Theorem 1, Proposition 1 (the authors' response)",
           rows("separation", "sawtooth/construction"), source=COMPANION),
    _paper("companion-table-1", "DEQ can achieve better performance with similar FLOPs per "
           "iteration compared to various FFNs", "Companion: rebuttal Table 1",
           rows("separation", "sawtooth/adam-*", "sawtooth/lbfgs-*"), source=COMPANION),
    _paper("companion-steep", "the infinity norm of FFNs increases as we apply larger … while the "
           "infinity norm of DEQs remains lower than that of FFNs, consistent with Theorem 2",
           "Companion: Theorem 2, rebuttal Figure 1", rows("separation", "steep/*"),
           source=COMPANION),
    _paper("companion-theorem-3", "The implicit regularization caused by gradient flow from a "
           "diagonal linear DEQ is characterized", "Companion: abstract (3), Theorem 3 as printed",
           rows("separation", "diagonal/argmin-minus"), source=COMPANION),
    _paper("companion-density", "They claim that the implicit bias implies that GF (or GD) learns "
           "a dense feature.", "Companion: Section 5, as a review summarizes it",
           rows("separation", "diagonal/density"), source=COMPANION),
    _paper("companion-feature-density", "indicating the features are indeed dense",
           "Companion: rebuttal Figure 2", rows("separation", "diagonal/feature-density"),
           source=COMPANION),
    _paper("companion-gotu-relu", "with specific examples showing the benefits brought by such "
           "regularization", "Companion: abstract (3), Section 4 (GOTU)",
           rows("separation", "gotu/f*-deq-vs-fnn"), source=COMPANION),
    _paper("companion-gotu-linear", "linear DEQ with a bias term achieves a smaller GOTU error "
           "than a diagonal linear neural network", "Companion: GOTU, as a review summarizes it",
           rows("separation", "gotu/frozen-c*"), source=COMPANION),
    # -- the book's own claims -----------------------------------------------------------------
    _own("equally-stable", "IFT and unrolled networks are equally stable: their accuracy changes "
         "away from N differ by less than ±δ (the paper says only that IFT is not more stable)",
         "there is no gain of stability when using IFT gradient descent over unrolling",
         "Section 5, Figure 5", rows("stability", "equally_stable")),
    _own("deq-overparametrization", "Figure 4's statement asked of DEQs: the better a DEQ fits its "
         "training set (lower training loss at N), the higher D(N, ΔN) (MDEQs trained on nested "
         "training sets of several sizes; a rank association across them)",
         "the better the model is at overfitting the training dataset", "Section 4, Figure 4 "
         "(the book's Figure B1)",
         rows("deq_gaps", "overparam")),
    _own("meta-ablation", "Figure 3's claims with per-set batch normalization in place of the "
         "paper's transductive batch normalization", "transductive batch normalization (i.e. the "
         "batch statistics are not stored)", "Appendix F.3 (the book's Figure B2)",
         rows("meta", "ablation/*/more-steps", "ablation/*/best-before-convergence")),
    _own("meta-mechanism", "Why the outer training loss of some Figure 4 iMAML models rose: "
         "the mechanism their checkpoint-by-checkpoint probes name (the hypergradient not a "
         "descent direction, an inner problem not strongly convex, the line search exhausted, "
         "or Adam's step)", "This formula is heuristic and does not necessarily provide a "
         "descent direction for arbitrary", "Section 3, on Eq. 12",
         rows("meta", "figure4/mechanism")),
    _own("diagnose-more", "The paper's check applied to two DEQs it did not study (a torchdeq "
         "ConvDEQ and the book's MDEQ): whether more iterations than N help, hurt or make no "
         "difference beyond δ", "do not benefit from increasing the number of iterations at "
         "inference", "Abstract", rows("diagnose", "*_help", "*_hurt", "*_same")),
    _own("diagnose-fewer", "The same two DEQs: fewer iterations than N hurt",
         "using fewer iterations at inference is almost always detrimental", "Section 4",
         rows("diagnose", "*_fewer")),
    _own("diagnose-recommendation", "The test-time N′ the book's diagnosis recommends for each "
         "of the two DEQs", "one should use the same number of inner iterations as in training",
         "Section 1", rows("diagnose", "*_recommendation")),
    _own("companion-theorem-3-sign", "Theorem 3 with the sign implied by the authors' own closed "
         "form of the gradient flow (not the sign printed)", "The implicit regularization caused "
         "by gradient flow from a diagonal linear DEQ is characterized",
         "Companion: abstract (3), Theorem 3", rows("separation", "diagonal/argmin-plus"),
         source=COMPANION),
    # -- the book's gates and sanity checks ----------------------------------------------------
    _own("regime-fit", "The models are in the regime of the claims: they fit their training data "
         "and none diverged", "DEQs, which are overparametrized (e.g. reaching 90% training "
         "accuracy on ImageNet compared to 80% test accuracy)", "Section 4",
         rows("stability", "health", "fit"), rows("deq_gaps", "*_gate"),
         rows("diagnose", "*_fit"), regime=True),
    _own("regime-generalises", "The test-data rows read models in the paper's regime: their test "
         "metric at N beats a trivial baseline fitted on the same training data (a linear "
         "classifier on the pixels, the bigram model of the training text, A⁺y)",
         "DEQs, which are overparametrized (e.g. reaching 90% training accuracy on ImageNet "
         "compared to 80% test accuracy)", "Section 4", rows("deq_gaps", "*_generalises"),
         regime=True),
    _own("regime-residual", "Sanity check: the solver's residual keeps falling beyond N (it is "
         "neither converged already nor stuck)", "not artefacts of the convergence being already "
         "attained or stuck", "Section 4", rows("stability", "*_residual"),
         rows("deq_gaps", "*_residual"), rows("diagnose", "*_residual"), regime=True),
    _own("figure-4-size", "Figure 4 read on the training-set size B, the lever the experiment "
         "varies: the fewer meta-batches, the higher D̄ (the paper measures overparametrization "
         "by ℓ(z_N), the row figure-4 reads)", "Generally, the more meta-batches there are in the "
         "training set, the higher this loss", "Figure 4 (caption)",
         rows("meta", "figure4/size-ordering")),
    _own("own-residual-tenfold", "The book's own stricter solver check, gating nothing: the "
         "residual falls at least tenfold beyond N", "increasing the number of iterations above N "
         "produces better approximation of the inner problem", "Section 4",
         rows("stability", "*_tenfold"), rows("deq_gaps", "*_tenfold")),
    _own("own-near-equilibrium", "The book's own, gating nothing: each model was near its "
         "equilibrium where \"no improvement\" was read (mean relative residual ≤ 0.05 at N and "
         "at the largest count; and a solve run to convergence improves on N by less than δ)", "",
         "", rows("stability", "*_near"), rows("deq_gaps", "*_near"),
         rows("stability", "*_reference"), rows("deq_gaps", "*_reference")),
    _own("regime-meta-floor", "Sanity check: the per-set batch-normalization ablation never goes "
         "below its test-MSE floor", "", "", rows("meta", "ablation/*/above-floor"), regime=True),
    _own("regime-meta-noise", "Check of iMAML's λ: at initialization its meta-gradient is not "
         "dominated by noise", "", "", rows("meta", "noise/*"), regime=True),
    _own("regime-companion-setup", "Checks of the companion chapter's setups: each trained "
         "affine model reaches the unseen MSE its gradient flow predicts", "", "",
         rows("separation", "gotu/*-prediction"), regime=True),
)


def claim_of(chapter: str, row_id: str,
             registry: Sequence[PaperClaim] = CLAIMS) -> PaperClaim | None:
    """The first claim of ``registry`` that ``row_id`` of ``chapter`` tests, or ``None``."""
    return next((claim for claim in registry if claim.tests(chapter, row_id)), None)


def unmapped(found: Iterable[tuple[str, str]],
             registry: Sequence[PaperClaim] = CLAIMS) -> list[tuple[str, str]]:
    """The ``(chapter, row id)`` pairs of ``found`` that no claim of ``registry`` tests."""
    return [(chapter, row_id) for chapter, row_id in found
            if claim_of(chapter, row_id, registry) is None]
