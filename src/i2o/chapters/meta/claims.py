"""The chapter's claims (Section 4, Figures 3 and 4) as predicates that can fail, and the numbers
its text quotes.

Every predicate returns an :class:`i2o.verdicts.decision.Decision`: ``holds`` is True or False when
the data can decide, ``None`` with the reason when they cannot; its ``reason`` is what the claim's
row shows. Each claim is decided behind its gates (:func:`i2o.verdicts.gates.gated`), whose values
are the chapter's :class:`Thresholds`.

This face assembles the table (:func:`claims`), names the runs that would decide its open rows
(:func:`name_remedies`) and gathers the glued numbers (:func:`numbers`); the predicates live in
their parts, and are re-exported here:

- :mod:`.claims_gates`    the gates of a claim about one model and their values;
- :mod:`.claims_figure3`  Figure 3 and the ablation: more inner steps help, the best test MSE
  before convergence, the per-set-BN floor;
- :mod:`.claims_figure4`  Figure 4: the association of fit and D(N, ΔN), its models and table;
- :mod:`.claims_noise`    the book's check of λ: iMAML's meta-gradient is not noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from i2o.chapters.meta import FIGURE, evaluate, gradient_noise, mechanism, paper_claims
from i2o.chapters.meta.claims_figure3 import (
    above_floor,
    above_floor_claim,
    best_before_claim,
    best_before_convergence,
    more_steps_claim,
    more_steps_help,
    settled_from,
)
from i2o.chapters.meta.claims_figure4 import (
    ALPHA,
    FIT_ORDERING_CLAIM,
    MECHANISM_CLAIM,
    MORE_MODELS,
    SIZE_ORDERING_CLAIM,
    Figure4Point,
    figure4_numbers,
    figure4_point,
    figure4_points,
    figure4_table,
    fit_ordering,
    largest_rise,
    near_n_index,
    size_ordering,
)
from i2o.chapters.meta.claims_gates import (
    Thresholds,
    finite_tasks,
    plateau,
    plateau_gate,
    thresholds_of,
)
from i2o.chapters.meta.claims_noise import (
    noise_table,
    usable_meta_gradient,
    usable_meta_gradient_claim,
)
from i2o.chapters.meta.runs import MetaResults
from i2o.compute import profiles
from i2o.verdicts import deciding
from i2o.verdicts.claims import Claims
from i2o.verdicts.decision import Decision

__all__ = [
    "ALPHA", "FIT_ORDERING_CLAIM", "MECHANISM_CLAIM", "MORE_MODELS", "SECTIONS",
    "SIZE_ORDERING_CLAIM", "Figure4Point", "size_ordering",
    "Thresholds", "above_floor", "above_floor_claim", "best_before_claim",
    "best_before_convergence", "claims", "figure4_numbers", "figure4_point", "figure4_points",
    "figure4_table", "finite_tasks", "fit_ordering", "largest_rise", "more_steps_claim",
    "more_steps_help", "name_remedies", "near_n_index", "noise_table", "numbers", "plateau",
    "plateau_gate", "settled_from", "thresholds_of", "usable_meta_gradient",
    "usable_meta_gradient_claim",
]

#: the sections of the chapter's claims, in the order of their rows (the notebook concludes each)
SECTIONS = ("figure3", "figure4", "ablation", "noise")


def _without_seed(label: str) -> str:
    """A model's label without its seed (``maml-N1-online``): a replicate redraws the seed, and a
    claim's id must name the same claim at every replicate (:mod:`i2o.provenance.robustness` matches
    rows by id)."""
    return label.rsplit("-seed", 1)[0]


def claims(results: MetaResults) -> Claims:
    """The chapter's claims (the paper's, then the ablation's and the book's check of λ), one
    row per claim with the id ``<section>/<model without its seed>/<claim>``;
    ``facts["sections"]`` lists each section's ids in order, for the chapter's prose
    (:mod:`.prose`)."""
    params = results.params
    limits = thresholds_of(params, results.floor)
    table = Claims(FIGURE, params.profile, paper=paper_claims.CLAIMS)
    sections: dict[str, list[str]] = {section: [] for section in SECTIONS}

    def record(section: str, id: str, claim: str, decision: Decision) -> None:
        table.decide(claim, decision, "", id=id, section=section)  # its reason quotes the measure
        sections[section].append(id)

    def figure3_claims(section: str, name: str, curves: dict[str, Any]) -> None:
        record(section, f"{section}/{_without_seed(name)}/more-steps", more_steps_claim(curves),
               more_steps_help(curves, limits))
        record(section, f"{section}/{_without_seed(name)}/best-before-convergence",
               best_before_claim(curves), best_before_convergence(curves, limits))

    for name, curves in results.figure3.items():
        figure3_claims("figure3", name, curves)
    if results.figure4:
        record("figure4", "figure4/fit-ordering", FIT_ORDERING_CLAIM,
               fit_ordering(results.figure4, limits))
        record("figure4", "figure4/size-ordering", SIZE_ORDERING_CLAIM,
               size_ordering(results.figure4, limits))
    if results.mechanism:
        record("figure4", "figure4/mechanism", MECHANISM_CLAIM,
               mechanism.judge(results.figure4, results.mechanism).decision())
    floor = results.floor
    for name, curves in results.ablation.items():
        figure3_claims("ablation", name, curves)
        if curves.get("normalization") == "per_set_bn":
            record("ablation", f"ablation/{_without_seed(name)}/above-floor",
                   above_floor_claim(curves),
                   above_floor(curves, floor["centred"], floor["standard_error"]))
    regularization = float(params["imaml_regularization"])
    record("noise", "noise/usable-meta-gradient", usable_meta_gradient_claim(regularization),
           usable_meta_gradient(results.noise, regularization, float(params["max_noise_ratio"])))
    table.facts["sections"] = sections
    name_remedies(table, results)
    return table


def name_remedies(table: Claims, results: MetaResults) -> None:
    """The run that would decide each row this run leaves open for want of data
    (:func:`i2o.verdicts.deciding.name_remedies`).

    - A row undecided for want of held-out tasks (the odd half of the test tasks) names
      ``n_test_tasks`` at twice what its held-out half needs
      (:data:`i2o.verdicts.deciding.PER_UNIT`). The size enters only the keys of the sweeps of
      Figure 3's and the ablation's models: those sweeps run again at the new size (their measured
      time, scaled) and the trained models are read from the cache.
    - Figure 4's ordering, undecided below the paper's scale, names the paper profile's run (more
      models, trained longer), costed at the CPU time per outer step each of this run's models
      measured. At the paper's scale no run is named: its reason says what would decide it."""
    p = results.params
    online = [c for section in (results.figure3, results.ablation) for c in section.values()]
    sweeps = sum(float(c.get("seconds", math.nan)) for c in online)
    deciding.name_remedies(table, p, deciding.Rates(rerun=sweeps, evaluation=sweeps))
    ordering = table.by_id.get("figure4/fit-ordering")
    if ordering is None or ordering.holds is not None or p.profile == "paper":
        return
    paper = profiles.resolve(FIGURE, "paper")
    steps = {("maml", None): paper["maml_outer_steps"], ("imaml", None): paper["imaml_outer_steps"]}
    seconds = sum(float(c.get("train_cpu_seconds_per_step", math.nan))
                  * steps.get((c["method"], c.get("n_meta_batches")), paper["fig4_outer_steps"])
                  for section in (results.figure3, results.figure4, results.ablation)
                  for c in section.values())
    table.remedy(ordering.id, deciding.at_profile(FIGURE, "paper", seconds))


def numbers(results: MetaResults) -> dict[str, Any]:
    """Numbers quoted in the chapter's text (glued by the notebook), keyed by stable names."""
    p = results.params
    numbers: dict[str, Any] = {}
    for method in ("maml", "imaml"):
        chosen = [c for c in results.figure3.values() if c["method"] == method]
        if not chosen:
            continue
        c = chosen[0]
        grid = list(c["grid"])
        finite = finite_tasks(c)
        mean, _ = evaluate.mean_and_standard_error(c["query"][finite])
        best = int(np.argmin(mean))
        numbers |= {
            f"meta-{method}-n": int(c["inner_steps"]),
            f"meta-{method}-outer-steps": int(c["outer_steps"]),
            f"meta-{method}-mse-n": float(mean[grid.index(c["inner_steps"])]),
            f"meta-{method}-best-k": int(grid[best]),
            f"meta-{method}-best-mse": float(mean[best]),
            f"meta-{method}-last-k": int(grid[-1]),
            f"meta-{method}-last-mse": float(mean[-1]),
            f"meta-{method}-ms-per-step": 1e3 * float(c["train_seconds_per_step"]),
            f"meta-{method}-cpu-ms-per-step": 1e3 * float(c.get("train_cpu_seconds_per_step",
                                                                 float("nan"))),
            f"meta-{method}-diverged": int((~finite).sum()),
        }
        numbers["meta-n-test-tasks"] = int(c["query"].shape[0])
    for c in results.ablation.values():
        finite = finite_tasks(c)
        mean, _ = evaluate.mean_and_standard_error(c["query"][finite])
        numbers |= {"meta-ablation-normalization": c["normalization"],
                    "meta-ablation-mse-n": float(mean[list(c["grid"]).index(c["inner_steps"])]),
                    "meta-ablation-best-mse": float(mean.min()),
                    "meta-ablation-last-mse": float(mean[-1]),
                    "meta-ablation-last-k": int(c["grid"][-1])}
    floor = results.floor
    numbers |= {"meta-floor-centred": floor["centred"], "meta-floor-standardized":
                floor["standardized"], "meta-target-variance": floor["target_variance"],
                "meta-task-agnostic-mse": floor["task_agnostic"],
                "meta-min-outer-steps": int(p["min_outer_steps_to_decide"]),
                "meta-imaml-lambda": f"{float(p['imaml_regularization']):g}",
                "meta-noise-batches": int(p["noise_batches"]),
                "meta-noise-level": gradient_noise.noise_level(int(p["noise_batches"])),
                "meta-imaml-solver": ("FISTA (jaxopt's accelerated gradient descent) with "
                                      "backtracking line search" if p["imaml_acceleration"] else
                                      "plain gradient descent with backtracking line search")}
    if results.figure4:
        numbers |= figure4_numbers(results.figure4)
    return numbers
