"""The separation chapter's claims as predicates that can fail, and the numbers its prose cites.

Gates, in the order checked:

- **fit**, symmetric (:func:`i2o.verdicts.gates.symmetric_gate`): a claim about trained models uses
only
  models whose seed-mean training MSE is at most ``fit_fraction`` × the variance of the target
  (the overparametrized regime the paper's statements are about). When the comparator fits and
  the DEQ does not, the claim *fails* with the status "DEQ not trainable with this recipe" (a DEQ
  the recipe cannot train counts against a claim that DEQs do better, never for it); it is
  undecided when the DEQ fits and the comparator does not, or when neither fits;
- **testable**: a comparison between models the setup forces to be equal (two affine models
  that must reach the same unique interpolant) is undecided, "not testable here", never a fail;
- **seeds**: a comparison needs at least 2 seeds;
- **power**: "A is lower than B" (:func:`i2o.verdicts.margins.lower_than`) *holds* when the book's
  interval of the difference of the means (:func:`i2o.verdicts.intervals.difference`: Welch, 90 %,
  two one-sided tests at 5 %) lies above a practical margin (``MARGIN`` × the larger mean), *fails*
  when it lies below it (equivalence), and is undecided when it contains it.

A claim over several comparisons (every FLOPs-matched FNN, every problem, every ``f̂(∅)``) fails
when one fails and holds when all hold (:func:`i2o.verdicts.gates.all_of`); tolerances are
:func:`i2o.verdicts.gates.compare`. Each predicate returns a
:class:`i2o.verdicts.decision.Decision`;
:func:`claims` assembles the table (each row with an id ``<section>/<name>``) and
:func:`i2o.chapters.separation.prose.paragraphs` writes the prose from it, so no verdict is typed
by hand.

The predicates live in their parts, and are re-exported here: :mod:`.claims_fit` (the fit gates
and "lower than"), :mod:`.claims_expressivity` (Sections 1 and 2), :mod:`.claims_bias` (Section 3)
and :mod:`.claims_unseen` (Section 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from i2o.chapters.separation import paper_claims
from i2o.chapters.separation.claims_bias import (
    argmin_claim,
    density_claim,
    feature_density_claim,
    problem_seeds,
)
from i2o.chapters.separation.claims_expressivity import (
    SLOPE_FLOOR,
    STEEP_KINDS,
    construction_claim,
    flops_best_of_r_claim,
    flops_claim,
    steep_claim,
)
from i2o.chapters.separation.claims_fit import MARGIN, UNTRAINABLE, fits, symmetric_gate
from i2o.chapters.separation.claims_unseen import (
    PREDICTION_RTOL,
    forced_equal,
    frozen_comparison,
    frozen_prediction_claim,
    gotu_comparison,
    prediction_claim,
)
from i2o.chapters.separation.runs import SeparationResults
from i2o.compute.profiles import Params
from i2o.verdicts import deciding, gates
from i2o.verdicts.claims import Claim, Claims

__all__ = [
    "MARGIN", "PREDICTION_RTOL", "SEED_LISTS", "SLOPE_FLOOR", "STEEP_KINDS", "UNTRAINABLE",
    "argmin_claim", "claims", "construction_claim", "density_claim", "feature_density_claim",
    "fits", "flops_best_of_r_claim", "flops_claim", "forced_equal", "frozen_comparison",
    "frozen_prediction_claim", "gotu_comparison", "numbers", "prediction_claim", "seed_list",
    "steep_claim", "symmetric_gate",
]


def _rows(p: Params, r: SeparationResults) -> list[tuple[str, str, gates.Decision]]:
    """(id ``<section>/<name>``, statement, decision) of every claim, in the table's order."""
    saw, diag, gotu = r.sawtooth, r.diagonal, r.gotu
    rows = [("sawtooth/construction", "Proposition 1 (the construction behind Theorem 1): a "
             "width-m ReLU DEQ with strictly lower-triangular W realizes 2^m linear pieces "
             "(exact construction, book's solver)",
             construction_claim(saw["construction"]))]
    for k in p["saw_exponents"]:
        rows.append((f"sawtooth/adam-k{k}", f"Rebuttal Table 1 (Adam, every run): on the "
                     f"sawtooth with 2^{k} pieces the width-{p['flops_deq_width']} DEQ has a lower "
                     f"test MSE than FNNs of similar forward FLOPs", flops_claim(saw, k, p)))
        rows.append((f"sawtooth/lbfgs-k{k}", f"Rebuttal Table 1 (float64 L-BFGS, best of "
                     f"{p['saw_restarts']} restarts): on the sawtooth with 2^{k} pieces the "
                     f"width-{p['flops_deq_width']} DEQ has a lower test MSE than FNNs of similar "
                     f"forward FLOPs", flops_best_of_r_claim(saw, k, p)))
    rows.append(("steep/weights", "Theorem 2 / rebuttal Figure 1: for the target δ/(x₁ + δ) "
                 "with δ = 2^-d, the max |weight| an FNN needs at equal training loss grows "
                 "with d faster than a DEQ's", steep_claim(r.steep)))
    rows += [
        ("diagonal/argmin-plus", "Theorem 3 with the sign implied by the authors' closed form "
         "β(t)⁻³ = β(0)⁻³ + 3Xᵀv(t): gradient flow on the diagonal linear DEQ tends to argmin "
         "Σ 1/(2β²) + β/β(0)³ s.t. Xβ = y (sign +)", argmin_claim(diag, "plus", p)),
        ("diagonal/argmin-minus", "Theorem 3 as printed on the OpenReview page, argmin "
         "Σ 1/(2β²) − β/β(0)³ (sign −; inconsistent with the authors' closed form)",
         argmin_claim(diag, "minus", p)),
        ("diagonal/density", "Section 5: the diagonal linear DEQ's interpolant is denser than "
         "the diagonal linear network's", density_claim(diag, p)),
        ("diagonal/feature-density", "Rebuttal Figure 2: a ReLU DEQ's features are denser "
         "than an FNN's (the GOTU task of Eq. 15, f2)", feature_density_claim(gotu, p)),
    ]
    rows.append(("gotu/f1-dln-prediction", "GOTU f1: the diagonal linear network reaches the "
                 "unseen MSE of its affine interpolant (a check of the setup: the interpolant "
                 "is unique)", prediction_claim(gotu, "f1", "dln", p)))
    rows += [(f"gotu/{target}-deq-vs-fnn", f"GOTU {target}: the ReLU DEQ has a lower unseen "
              f"MSE than the FNN (the paper's 'DEQ generalizes better on the unseen')",
              gotu_comparison(gotu, target, "deq_contractive", "fnn", p))
             for target in ("f1", "f2")]
    frozen = r.frozen
    rows += [
        ("gotu/frozen-linear_deq-prediction", "Frozen-coordinate task: the linear DEQ with bias "
         "reaches the unseen MSE 4β₀*² predicted by the conserved β₀⁻³ + 3b of its gradient "
         "flow, at every f̂(∅)", frozen_prediction_claim(frozen, "linear_deq", p)),
        ("gotu/frozen-dln-prediction", "Frozen-coordinate task: the diagonal linear network "
         "reaches its predicted unseen MSE 4 f̂(∅)², at every f̂(∅)",
         frozen_prediction_claim(frozen, "dln", p)),
    ]
    for key in sorted(frozen, key=lambda k: frozen[k]["mean"]):
        entry = frozen[key]
        pred = entry["prediction"]
        expected = "lower" if pred["linear_deq"] < pred["dln"] else "not lower"
        rows.append((f"gotu/frozen-{key}", f"Frozen-coordinate task, f̂(∅) = "
                     f"{entry['mean']:g}: the linear DEQ with bias has a lower unseen MSE than "
                     f"the diagonal linear network (the authors' 'smaller GOTU error'; the flow "
                     f"predicts {expected}: {pred['linear_deq']:.3g} vs {pred['dln']:.3g})",
                     frozen_comparison(entry, p)))
    return rows


#: the seed list a section's comparisons are over (its intervals' seeds); a row's own entry
#: first (the feature density of Section 3 is measured on the GOTU task)
SEED_LISTS = {"diagonal/feature-density": "gotu_seeds", "sawtooth": "seeds",
              "steep": "steep_seeds", "diagonal": "seeds", "gotu": "gotu_seeds"}


def seed_list(row: Claim) -> dict[str, str]:
    """The parameter that raises the seeds of ``row``'s intervals, as
    :func:`i2o.verdicts.deciding.remedy` reads it."""
    return {"seeds": SEED_LISTS.get(row.id, SEED_LISTS[row.section])}


def claims(results: SeparationResults) -> Claims:
    """The chapter's table, each row's reason (which quotes its measurement) in ``check``; a row
    undecided in smoke names the quick profile, which decides it, unless its facts say how many
    seeds would (then it names that run: :func:`i2o.verdicts.deciding.name_remedies`, not
    costed)."""
    table = Claims("separation", results.params.profile, paper=paper_claims.CLAIMS)
    smoke = results.params.profile == "smoke"
    for row_id, statement, decision in _rows(results.params, results):
        table.decide(statement, decision, "", id=row_id, section=row_id.split("/", 1)[0],
                     decided_by="quick" if smoke and decision.holds is None else "")
    deciding.name_remedies(table, results.params, deciding.Rates(), seed_list)
    return table


def numbers(results: SeparationResults) -> dict[str, Any]:
    """Numbers cited by the chapter's prose (``glue`` names)."""
    saw, diag, gotu = results.sawtooth, results.diagonal, results.gotu
    first = problem_seeds(diag)[0]
    out: dict[str, Any] = {
        "sep-construction-max-m": int(np.max(saw["construction"]["m"])),
        "sep-seeds": len(results.params["seeds"]),
        "sep-diag-steps": int(diag[first]["deq"]["steps"]),
        "sep-diag-distance-gd": float(diag[first]["plus"]["distance_gd"]),
        "sep-diag-distance-plus": float(diag[first]["plus"]["distance"]),
        "sep-diag-kkt": float(diag[first]["kkt_residual"]),
        "sep-diag-density-deq": float(diag[first]["density_deq"]),
        "sep-diag-density-dln": float(diag[first]["density_dln"]),
        "sep-seconds": float(results.cost.seconds),
    }
    for target in ("f1", "f2"):
        for bias in ("bias", "no_bias"):
            pred = gotu[target]["prediction"][bias]
            out[f"sep-gotu-{target}-{bias}-pred"] = (float(pred["unseen_mse"])
                                                    if pred["interpolates"] else float("nan"))
    return out
