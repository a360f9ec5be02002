"""How the book reads each claim of the paper: sentence → reading → statistic → guards → the
function that decides it and the commit that fixed the reading (READING.md's table, by claim of
:data:`i2o.verdicts.paper_claims.CLAIMS`). The claims page shows it (:mod:`i2o.book.claims_page`),
so that a reviewer can check that each reading predates its verdicts; ``tests/
test_paper_claims.py`` checks that every entry names a claim of the registry and, in a clone with
its history, a commit of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """What a claim's sentence asserts as the book reads it, the statistic that decides it, its
    guards, the function that applies it and the commit that fixed it."""

    asserts: str
    statistic: str
    guards: str
    decided_by: str
    fixed_in: str


_RULE = "i2o.verdicts.rule.decide"
_ISSUE_61 = "40e5e6a"

READINGS: dict[str, Reading] = {
    "figure-2-no-gain": Reading(
        "every N′ > N of the grid improves on N by less than δ",
        "improvement(N′) = performance(N′) − performance(N), 90 % intervals over the models "
        "that fit, Bonferroni over the counts; holds when every upper bound < δ, fails when "
        "one lower bound > δ; δ = ¼ × the cost of the fewest iterations, floored",
        "the solver guard; the fit quorum", _RULE, _ISSUE_61),
    "figures-g1-g2": Reading(
        "the same on training data", "as figure-2-no-gain, on the training loss",
        "the solver guard; the fit quorum", _RULE, _ISSUE_61),
    "figure-2-fewer-hurt": Reading(
        "no N′ < N is better than N, and the fewest are worse",
        "every N′ < N: upper bound of improvement(N′) < δ (Bonferroni); the fewest's cost beyond "
        "the metric's floor (a direction)", "the fit quorum", _RULE, _ISSUE_61),
    "regime-residual": Reading(
        "the residual keeps falling beyond N, and was not at its floor at N",
        "mean relative residual at N above 100 × float32's epsilon; 90 % interval of "
        "log10(r(N′max)/r(N)) below 0 (a fall of any size)",
        "gates the rows on more iterations; the tenfold fall is the book's own and gates nothing",
        "i2o.verdicts.questions.falling", _ISSUE_61),
    "regime-generalises": Reading(
        "the models whose test curves are read generalise: their test metric at N beats a "
        "trivial baseline fitted on the same training data",
        "test metric at N minus the baseline's (a linear classifier on the pixels, each seed "
        "against its own; the bigram of the training text; A⁺y), 90 % interval over the seeds "
        "(over the images for one network), beyond the metric's floor on the better side",
        "gates every test-data row of the chapter deq_gaps", "i2o.verdicts.readings.generalises",
        "8512293"),
    "own-near-equilibrium": Reading(
        "each model was near its equilibrium where \"no improvement\" was read; a solve run to "
        "convergence does not improve on N beyond δ (deq_gaps, stability)",
        "mean relative residual at N and at N′max against 0.05; a solve of the training solver "
        "until relative residual ≤ 1e-4 or reference_factor × N steps: 90 % interval of "
        "performance(converged) − performance(N) below δ (test data's δ; stability: the arm's "
        "no_gain δ), fails above it",
        "gates nothing; undecided when some batch's reference solve did not converge",
        "i2o.verdicts.converged.reference_check", "5b5791b"),
    "figure-5": Reading(
        "IFT's change away from N is not smaller than unrolled's by more than δ",
        "mean over N′ ≠ N of |acc(N′) − acc(N)| per model, IFT − unrolled over seed pairs, "
        "one-sided above −δ; δ = ¼ × unrolled's mean change; resolution of the compared mean",
        "both arms fit; power only where the interval straddles −δ",
        "i2o.chapters.stability.claims", _ISSUE_61),
    "figure-g4-deq": Reading(
        "some N′ < N improves the PSNR on N (a sign)",
        "Bonferroni-widened interval beyond the floor 0.01 dB",
        "the model has learned", "i2o.verdicts.readings.some_direction", _ISSUE_61),
    "figure-g4-elder": Reading(
        "some N′ > N improves the PSNR on N (a sign)",
        "Bonferroni-widened interval beyond the floor 0.01 dB",
        "the solver guard", "i2o.verdicts.readings.some_direction", _ISSUE_61),
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
    "companion-steep": Reading(
        "the FNN's max |weight| grows with d faster than the DEQ's (a sign)",
        "slope of log2 max|weight| against d, FNN − DEQ over seeds, beyond the floor 0.001",
        "both kinds reach the loss level at every d",
        "i2o.chapters.separation.claims_expressivity.steep_claim", "eb1348e"),
}
