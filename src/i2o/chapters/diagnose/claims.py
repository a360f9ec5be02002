"""The chapter's claims: each diagnosed model's verdicts (:meth:`i2o.diagnose.Diagnosis.claims`,
gated by the fit criterion ``fit_accuracy`` measured on its own training images at its training
``N``), and the numbers its text quotes."""

from __future__ import annotations

from i2o.chapters.diagnose import FIGURE, MODELS, paper_claims
from i2o.chapters.diagnose.runs import DiagnoseResults
from i2o.verdicts import deciding
from i2o.verdicts.claims import Claims
from i2o.verdicts.decision import EVALUATION_SET

#: the order of a diagnosis's claim rows (:meth:`i2o.diagnose.Diagnosis.claims` with a fit gate)
ROWS = ("fit", "help", "hurt", "same", "fewer", "residual", "recommendation")


def claims(results: DiagnoseResults) -> Claims:
    """The table of both models' verdicts, each row recorded as ``<model>_<row>`` in the section
    ``<model>``; the facts hold each model's recommended ``N'`` (``recommended``: model → N') for
    the prose."""
    table = Claims(FIGURE, str(results.params.profile), paper=paper_claims.CLAIMS)
    for model in MODELS:
        own = results.diagnoses[model].claims(FIGURE, table.profile, prefix=f"{model}_",
                                              section=model)
        if [row.id for row in own.rows] != [f"{model}_{key}" for key in ROWS]:
            raise RuntimeError(f"expected the rows {ROWS}, got {[r.id for r in own.rows]}")
        table.extend(own)
    table.facts["recommended"] = {model: results.diagnoses[model].recommendation.n
                                  for model in MODELS}
    name_remedies(table, results)
    return table


def name_remedies(table: Claims, results: DiagnoseResults) -> None:
    """For each row left undecided for want of test images, the run that would decide it
    (:func:`i2o.verdicts.deciding.name_remedies`): ``test_size`` is in both jobs' keys, so both
    models retrain (their measured training time) and sweep the larger test set (their measured
    sweep time, scaled)."""
    records = results.records.values()
    training = sum(float(r["train_seconds"]) for r in records)
    sweeps = sum(float(r["sweep_seconds"]) for r in records)
    deciding.name_remedies(table, results.params,
                           deciding.Rates(rerun=training + sweeps, evaluation=sweeps),
                           {EVALUATION_SET: "test_size"})


def numbers(results: DiagnoseResults) -> dict[str, str]:
    """``glue`` name → formatted value."""
    out: dict[str, str] = {}
    for model in MODELS:
        d, record = results.diagnoses[model], results.records[model]
        key = f"diagnose-{model}"
        mean = d.test.mean()
        at_n = d.test.at(d.train_iters)
        out[f"{key}-n"] = str(d.train_iters)
        out[f"{key}-n-max"] = str(d.grid[-1])
        out[f"{key}-acc-n"] = f"{100 * mean[at_n]:.1f}"
        out[f"{key}-acc-max"] = f"{100 * mean[-1]:.1f}"
        out[f"{key}-acc-1"] = f"{100 * mean[0]:.1f}"
        if d.train_at_n is not None:
            out[f"{key}-train-acc"] = f"{100 * d.train_at_n:.1f}"
        out[f"{key}-rec"] = str(d.recommendation.n)
        out[f"{key}-more"] = d.verdicts.more
        out[f"{key}-parameters"] = f"{int(record['parameters']):,}"
        out[f"{key}-train-seconds"] = f"{float(record['train_seconds']):.0f}"
        out[f"{key}-sweep-seconds"] = f"{float(record['sweep_seconds']):.1f}"
        out[f"{key}-solves"] = str(int(record["solves"]))
    return out
