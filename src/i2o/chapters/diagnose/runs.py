"""The chapter's jobs for a parameter set (:mod:`.jobs`, one per model) and what it shows: each
model's stored sweep, read back or computed, and its :class:`i2o.diagnose.Diagnosis`.

:func:`collect` rebuilds each diagnosis from the stored arrays (:func:`i2o.diagnose.from_curves`),
so the verdicts are recomputed from the stored curves at every run and nothing but arrays is
cached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.chapters.diagnose import FIGURE, LABELS, MODELS
from i2o.chapters.diagnose.jobs import MDEQJob, TorchDEQJob
from i2o.compute import profiles
from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params
from i2o.diagnose import Curves, Diagnosis, from_curves
from i2o.diagnose.metrics import resolve


def train_iters(params: Mapping[str, Any], model: str) -> int:
    """``N`` of ``model``: its forward iterations in training."""
    return int(params[f"{'td' if model == 'torchdeq' else 'mdeq'}_train_iters"])


def grid_of(params: Mapping[str, Any], model: str) -> list[int]:
    """``1 … grid_factor · N``: every count (the chapter's grids are short)."""
    return list(range(1, int(params["grid_factor"]) * train_iters(params, model) + 1))


def check_params(params: Params) -> None:
    """Cross-parameter checks, before any compute."""
    profiles.require(FIGURE, params, [
        ("td_channels", params["td_channels"] % 4 == 0, "a multiple of 4 (GroupNorm of 4 groups)"),
        ("test_size", params["test_size"] >= 20, "≥ 20 (intervals over examples)"),
        ("train_size", params["train_size"] >= params["td_batch_size"],
         "at least td_batch_size"),
    ])


def jobs(params: Params) -> list[Job]:
    """One job per model, in the order of :data:`i2o.chapters.diagnose.MODELS` (``make sweep
    FIG=diagnose`` can run them)."""
    p = params

    def common(model: str) -> dict[str, Any]:
        return {"seed": int(p["seed"]), "replicate": int(p["replicate"]),
                "train_size": p["train_size"], "test_size": p["test_size"],
                "eval_batch": p["eval_batch"], "grid": tuple(grid_of(p, model))}

    return [
        TorchDEQJob(**common("torchdeq"), td_channels=p["td_channels"], td_solver=p["td_solver"],
                    td_train_iters=p["td_train_iters"], td_epochs=p["td_epochs"],
                    td_batch_size=p["td_batch_size"], td_lr=p["td_lr"]),
        MDEQJob(**common("mdeq"), mdeq_model=p["mdeq_model"],
                mdeq_train_iters=p["mdeq_train_iters"], mdeq_epochs=p["mdeq_epochs"],
                mdeq_batch_size=p["mdeq_batch_size"], mdeq_lr=p["mdeq_lr"],
                mdeq_pretrain_steps=p["mdeq_pretrain_steps"], mdeq_clip=p["mdeq_clip"]),
    ]


@dataclass(frozen=True)
class DiagnoseResults(ChapterResults):
    """What the chapter shows: per model its diagnosis and its job's record (the stored arrays,
    with the training and sweep times measured inside the job)."""

    diagnoses: dict[str, Diagnosis]
    records: dict[str, dict[str, Any]]


def diagnosis_of(record: Mapping[str, Any], params: Mapping[str, Any], model: str) -> Diagnosis:
    """The :class:`i2o.diagnose.Diagnosis` of a stored job (verdicts decided here, not cached)."""
    accuracy = resolve("accuracy")

    def curves(split: str) -> Curves:
        return Curves(grid=np.asarray(record["grid"]),
                      values=np.asarray(record[split]["values"], dtype=float)[None],
                      residual=np.asarray(record[split]["residual"], dtype=float)[None],
                      sign=accuracy.sign)

    return from_curves(curves("test"), curves("train"), name=LABELS[model], metric=accuracy,
                       train_iters=train_iters(params, model), margin=float(params["margin"]),
                       fit=float(params["fit_accuracy"]), solves=int(record["solves"]),
                       seconds=float(record["sweep_seconds"]))


def collect(params: Params) -> DiagnoseResults:
    """Both jobs, computed or read back (missing ones in ``workers`` local processes when
    ``workers > 1``), and their diagnoses."""
    found, cost = run_jobs(FIGURE, jobs(params), int(params["workers"]))
    records = dict(zip(MODELS, found, strict=True))
    return DiagnoseResults(diagnoses={m: diagnosis_of(records[m], params, m) for m in MODELS},
                           records=records, params=params, cost=cost)
