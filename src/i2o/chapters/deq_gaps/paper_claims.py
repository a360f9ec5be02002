"""The claims of the paper the deq_gaps chapter tests (Figures 2, G.1, G.2 and G.4: Section 4,
Appendix G; the book's Figure B1), each with the paper's words and the chapter's rows
(:mod:`i2o.verdicts.paper_claims` says how they are written and merged into the claims page),
and how the book reads them."""

from __future__ import annotations

from i2o.verdicts.paper_claims import (
    FEWER_HURT,
    OWN_NEAR_EQUILIBRIUM,
    OWN_TENFOLD,
    REGIME_FIT,
    REGIME_RESIDUAL,
    RULE,
    PaperClaim,
    Reading,
    own,
    paper,
    rows,
)

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    paper("figure-2-no-gain", "the performance of the model does not improve when increasing "
          "the number of iterations at test time", "Section 4, Figure 2",
          rows(FIGURE, "classification_test_no_gain", "language_test_no_gain")),
    FEWER_HURT.on(rows(FIGURE, "classification_test_fewer_hurt", "language_test_fewer_hurt")),
    paper("figures-g1-g2", "Similar observations can be made on the training performance and on "
          "training and test losses", "Section 4, Figures G.1 and G.2",
          rows(FIGURE, "*_train_no_gain", "*_train_fewer_hurt")),
    paper("figure-g4-similar", "The results of these experiments show similar findings as the "
          "ones from Figure 2.", "Section 4, Figure G.4",
          rows(FIGURE, "deq_test_no_gain", "elder_test_no_gain", "deq_test_fewer_hurt",
               "elder_test_fewer_hurt")),
    paper("figure-g4-deq", "in one case it's better to use fewer iterations than at training "
          "time (for DEQ)", "Appendix G.4, Figure G.4", rows(FIGURE, "deq_test_fewer_better")),
    paper("figure-g4-elder", "in the other case it's better to use … more iterations (for "
          "ELDER)", "Appendix G.4, Figure G.4", rows(FIGURE, "elder_test_more_better")),
    own("deq-overparametrization", "Figure 4's statement asked of DEQs: the better a DEQ fits its "
        "training set (lower training loss at N), the higher D(N, ΔN) (MDEQs trained on nested "
        "training sets of several sizes; a rank association across them)",
        "the better the model is at overfitting the training dataset", "Section 4, Figure 4 "
        "(the book's Figure B1)",
        rows(FIGURE, "overparam")),
    REGIME_FIT.on(rows(FIGURE, "*_gate")),
    own("regime-generalises", "The test-data rows read models in the paper's regime: their test "
        "metric at N beats a trivial baseline fitted on the same training data (a linear "
        "classifier on the pixels, the bigram model of the training text, A⁺y)",
        "DEQs, which are overparametrized (e.g. reaching 90% training accuracy on ImageNet "
        "compared to 80% test accuracy)", "Section 4", rows(FIGURE, "*_generalises"),
        regime=True),
    REGIME_RESIDUAL.on(rows(FIGURE, "*_residual")),
    OWN_TENFOLD.on(rows(FIGURE, "*_tenfold")),
    OWN_NEAR_EQUILIBRIUM.on(rows(FIGURE, "*_near", "*_reference")),
)

_ISSUE_61 = "40e5e6a"

#: How the book reads the claims this chapter declares (READING.md's table).
READINGS: dict[str, Reading] = {
    "figure-2-no-gain": Reading(
        "every N′ > N of the grid improves on N by less than δ",
        "improvement(N′) = performance(N′) − performance(N), 90 % intervals over the models "
        "that fit, Bonferroni over the counts; holds when every upper bound < δ, fails when "
        "one lower bound > δ; δ = ¼ × the cost of the fewest iterations, floored",
        "the solver guard; the fit quorum", RULE, _ISSUE_61),
    "figures-g1-g2": Reading(
        "the same on training data", "as figure-2-no-gain, on the training loss",
        "the solver guard; the fit quorum", RULE, _ISSUE_61),
    "regime-generalises": Reading(
        "the models whose test curves are read generalise: their test metric at N beats a "
        "trivial baseline fitted on the same training data",
        "test metric at N minus the baseline's (a linear classifier on the pixels, each seed "
        "against its own; the bigram of the training text; A⁺y), 90 % interval over the seeds "
        "(over the images for one network), beyond the metric's floor on the better side",
        "gates every test-data row of the chapter deq_gaps", "i2o.verdicts.readings.generalises",
        "8512293"),
    "figure-g4-deq": Reading(
        "some N′ < N improves the PSNR on N (a sign)",
        "Bonferroni-widened interval beyond the floor 0.01 dB",
        "the model has learned", "i2o.verdicts.readings.some_direction", _ISSUE_61),
    "figure-g4-elder": Reading(
        "some N′ > N improves the PSNR on N (a sign)",
        "Bonferroni-widened interval beyond the floor 0.01 dB",
        "the solver guard", "i2o.verdicts.readings.some_direction", _ISSUE_61),
}
