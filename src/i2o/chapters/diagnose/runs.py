"""The chapter's two jobs, each cached: train a model on a CIFAR-10 subset, then sweep it with
:func:`i2o.diagnose.diagnose` on the test subset and on its own training images.

- ``torchdeq``: :class:`.torchdeq_net.ConvDEQ`, trained with ``td_train_iters`` torchdeq forward
  iterations by :func:`i2o.train.loop.train_steps`; diagnosed through torchdeq's own iteration
  control (:class:`i2o.diagnose.TorchDEQModel`);
- ``mdeq``: the book's :class:`i2o.models.MDEQClassifier` (configuration ``mdeq_model``), trained
  by the book's recipe (:func:`i2o.train.classifier.build_and_train`, IFT, Broyden) with
  ``mdeq_train_iters`` iterations; diagnosed with :class:`i2o.diagnose.BookMDEQ`.

A job stores the per-example sweep arrays; :func:`collect` rebuilds each
:class:`i2o.diagnose.Diagnosis` from them (:func:`i2o.diagnose.from_curves`), so the verdicts are
recomputed from the stored curves at every run and nothing but arrays is cached.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from i2o import profiles, replicates, results, runtime
from i2o.chapters.diagnose import FIGURE
from i2o.diagnose import BookMDEQ, Curves, Diagnosis, TorchDEQModel, diagnose, from_curves
from i2o.diagnose.metrics import resolve

SOURCES = ("diagnose", "deq", "models.mdeq", "data.cifar10", "train", "chapters.diagnose")
#: Data subsets are drawn with this seed (redrawn by a replicate, :func:`i2o.replicates.seed`).
DATA_SEED = 0
MODELS = ("torchdeq", "mdeq")
LABELS = {"torchdeq": "torchdeq ConvDEQ", "mdeq": "book MDEQ"}


def grid_of(params: Mapping[str, Any], model: str) -> list[int]:
    """``1 … grid_factor · N``: every count (the chapter's grids are short)."""
    n = int(params[f"{'td' if model == 'torchdeq' else 'mdeq'}_train_iters"])
    return list(range(1, int(params["grid_factor"]) * n + 1))


def check_params(params: Mapping[str, Any]) -> None:
    """Cross-parameter checks, before any compute."""
    profiles.require(FIGURE, params, [
        ("td_channels", params["td_channels"] % 4 == 0, "a multiple of 4 (GroupNorm of 4 groups)"),
        ("test_size", params["test_size"] >= 20, "≥ 20 (intervals over examples)"),
        ("train_size", params["train_size"] >= params["td_batch_size"],
         "at least td_batch_size"),
    ])


def load_split(split: str, size: int, replicate: int) -> tuple[torch.Tensor, torch.Tensor]:
    from i2o.data import balanced_subset, load_cifar10, to_tensor

    data = load_cifar10(split)
    chosen = data.subset(balanced_subset(data.labels, size, replicates.seed(DATA_SEED, replicate)))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def job_params(params: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The cache key of one model's job: the data, its training and its grid."""
    prefix = "td_" if model == "torchdeq" else "mdeq_"
    job = {k: v for k, v in params.items() if k.startswith(prefix)}
    job.update(model=model, seed=int(params["seed"]), replicate=int(params["replicate"]),
               train_size=params["train_size"], test_size=params["test_size"],
               eval_batch=params["eval_batch"], grid=grid_of(params, model))
    return job


def _train_torchdeq(job: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, seed: int):
    from i2o.chapters.diagnose.torchdeq_net import ConvDEQ, step_loss
    from i2o.train.loop import Plan, train_steps

    torch.manual_seed(seed)
    model = ConvDEQ(job["td_channels"], job["td_train_iters"], job["td_solver"])
    steps = job["td_epochs"] * -(-x.shape[0] // job["td_batch_size"])
    plan = Plan(steps=steps, lr=job["td_lr"], lr_min=job["td_lr"] / 100, clip=1.0, seed=seed,
                checkpoint_every=steps)
    history = train_steps(model, step_loss(model, x, y, job["td_batch_size"], seed), plan,
                          description="train torchdeq ConvDEQ")
    return TorchDEQModel(model, name=LABELS["torchdeq"]), history


def _train_mdeq(job: Mapping[str, Any], x: torch.Tensor, y: torch.Tensor, seed: int):
    from i2o.models import config
    from i2o.train.classifier import TrainSettings, build_and_train

    settings = TrainSettings(arm="ift", train_iter=job["mdeq_train_iters"],
                             backward_iter=job["mdeq_train_iters"], epochs=job["mdeq_epochs"],
                             batch_size=job["mdeq_batch_size"], lr=job["mdeq_lr"],
                             pretrain_steps=job["mdeq_pretrain_steps"], clip=job["mdeq_clip"],
                             seed=seed, checkpoint_every=10_000)
    model, history = build_and_train(config(job["mdeq_model"]), x, y, settings)
    return BookMDEQ(model, name=LABELS["mdeq"]), history


def run_model(job: Mapping[str, Any]) -> dict[str, Any]:
    """Train one model, then sweep it on the test and training subsets (arrays only)."""
    runtime.set_threads()
    seed = replicates.seed(int(job["seed"]), int(job["replicate"]))
    train_x, train_y = load_split("train", job["train_size"], job["replicate"])
    test_x, test_y = load_split("test", job["test_size"], job["replicate"])
    start = time.perf_counter()
    trainer = _train_torchdeq if job["model"] == "torchdeq" else _train_mdeq
    adapter, history = trainer(job, train_x, train_y, seed)
    train_seconds = time.perf_counter() - start
    n = int(job[f"{'td' if job['model'] == 'torchdeq' else 'mdeq'}_train_iters"])
    d = diagnose(adapter, (test_x, test_y), train=(train_x, train_y), train_iters=n,
                 grid=job["grid"], metric="accuracy", batch_size=job["eval_batch"])
    parameters = sum(p.numel() for p in adapter.model.parameters())
    return {"test": {"values": d.test.values[0], "residual": d.test.residual[0]},
            "train": {"values": d.train.values[0], "residual": d.train.residual[0]},
            "grid": np.asarray(job["grid"]), "train_seconds": train_seconds,
            "sweep_seconds": d.seconds, "solves": d.solves, "parameters": parameters,
            "loss": np.asarray(history["loss"], dtype=float),
            "nonfinite": int(bool(history.get("nonfinite_step")))}


def job_name(model: str, replicate: int) -> str:
    return f"{model}{replicates.suffix(replicate)}"


def all_jobs(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Both jobs, ``(name, job parameters)`` (``make sweep FIG=diagnose`` can run them)."""
    return [(job_name(m, int(params["replicate"])), job_params(params, m)) for m in MODELS]


def is_cached(name: str, job: Mapping[str, Any]) -> bool:
    return results.lookup(FIGURE, name, job, sources=SOURCES) is not None


def run_job(name: str, job: Mapping[str, Any]) -> dict[str, Any]:
    """The job's record from the results cache, computed (and stored) if missing."""
    return results.cached(FIGURE, name, job, lambda: run_model(job), sources=SOURCES)


@dataclass(frozen=True)
class DiagnoseResults:
    """What the chapter shows: per model its diagnosis and its job's record."""

    diagnoses: dict[str, Diagnosis]
    records: dict[str, dict[str, Any]]
    collect_seconds: float


def diagnosis_of(record: Mapping[str, Any], params: Mapping[str, Any], model: str) -> Diagnosis:
    """The :class:`i2o.diagnose.Diagnosis` of a stored job (verdicts decided here, not cached)."""
    accuracy = resolve("accuracy")

    def curves(split: str) -> Curves:
        return Curves(grid=np.asarray(record["grid"]),
                      values=np.asarray(record[split]["values"], dtype=float)[None],
                      residual=np.asarray(record[split]["residual"], dtype=float)[None],
                      sign=accuracy.sign)

    n = int(params[f"{'td' if model == 'torchdeq' else 'mdeq'}_train_iters"])
    return from_curves(curves("test"), curves("train"), name=LABELS[model], metric=accuracy,
                       train_iters=n, margin=float(params["margin"]),
                       fit=float(params["fit_accuracy"]), solves=int(record["solves"]),
                       seconds=float(record["sweep_seconds"]))


def collect(params: Mapping[str, Any]) -> DiagnoseResults:
    """Both jobs, computed or read back (missing ones in ``workers`` local processes when
    ``workers > 1``), and their diagnoses."""
    from i2o import sweep

    start = time.perf_counter()
    jobs = all_jobs(params)
    sweep.run_missing(FIGURE, jobs, is_cached, int(params["workers"]))
    records = {job["model"]: run_job(name, job) for name, job in jobs}
    return DiagnoseResults(diagnoses={m: diagnosis_of(records[m], params, m) for m in MODELS},
                           records=records, collect_seconds=time.perf_counter() - start)
