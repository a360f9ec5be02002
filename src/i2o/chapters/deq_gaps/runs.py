"""The deq_gaps chapter's computations: the jobs of its parameters (one trained and swept DEQ
each, :mod:`.jobs`; what ``python -m i2o.sweep deq_gaps`` runs), :func:`collect` (everything the
notebook shows) and the curves drawn from the sweeps.

Where the manifest's ``N`` of a task (``cls_``/``lm_``/``inv_train_iters``) and the steps of its
adjoint solve (``cls_``/``inv_backward_iter``) become ``max_iter``: :func:`build_jobs` turns them
into the task's forward and backward :class:`i2o.deq.SolverSpec` (:func:`solver`), once, and each
job carries them to training and to the sweep.

The classifier and the language model are trained once per seed of ``seeds`` (their claims are
decided over seeds); the two reconstruction networks and the overparametrization sweep once, with
the first seed. The classifier trains until it fits (``cls_fit_every``, ``cls_extra_epochs``,
``cls_epochs`` the cap); the overparametrization sweep trains a fixed budget, the cap's number of
optimiser steps, on every size (its point is to let the fit vary with the size). Beside them,
the trivial baselines of :mod:`.baselines` (one linear classifier per classifier seed, one bigram
model of the language models' training text), which the test-data rows' models must beat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from i2o.base import replicates
from i2o.chapters.deq_gaps import FIGURE, classification, inverse
from i2o.chapters.deq_gaps.baselines import BigramJob, PixelClassifierJob
from i2o.chapters.deq_gaps.classification import ClassificationJob, epochs_for_steps
from i2o.chapters.deq_gaps.curves import GapCurve, curve_from_sweep, view
from i2o.chapters.deq_gaps.inverse import InverseJob
from i2o.chapters.deq_gaps.language import LanguageJob
from i2o.chapters.deq_gaps.tasks import TASKS
from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require
from i2o.deq import SolverSpec, iteration_grid
from i2o.models.mdeq import CONFIGS
from i2o.verdicts.curves import Curves, from_sweeps


def check_params(params: Params) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError`` naming the
    parameter before any compute."""
    p = params
    cls_steps = p["cls_epochs"] * -(-p["cls_train_size"] // p["cls_batch_size"])
    sizes = list(p["op_sizes"])
    require(FIGURE, p, [
        ("cls_architecture", p["cls_architecture"] in CONFIGS,
         f"an MDEQ configuration of i2o.models.mdeq ({', '.join(CONFIGS)})"),
        ("cls_pretrain_steps", p["cls_pretrain_steps"] < cls_steps,
         f"smaller than the classifier's training steps, cls_epochs × ⌈cls_train_size / "
         f"cls_batch_size⌉ = {cls_steps} (or no DEQ is ever trained)"),
        ("lm_pretrain_steps", p["lm_pretrain_steps"] < p["lm_steps"],
         f"smaller than lm_steps = {p['lm_steps']} (or no DEQ is ever trained)"),
        ("lm_train_chars", p["lm_train_chars"] == 0 or p["lm_train_chars"] > p["lm_context"],
         f"0 (the whole training split) or more than lm_context = {p['lm_context']}"),
        ("lm_heads", p["lm_width"] % p["lm_heads"] == 0,
         f"a divisor of lm_width = {p['lm_width']}"),
        ("inv_crop", p["inv_crop"] % 2 == 0, "even (×2 super-resolution of a patch)"),
        ("op_sizes", len(set(sizes)) == len(sizes) >= 2, "at least 2 distinct training-set sizes"),
        ("seeds", len(set(p["seeds"])) == len(p["seeds"]), "a list of distinct seeds"),
        ("fit_quorum", p["fit_quorum"] <= len(p["seeds"]),
         f"at most the number of seeds, {len(p['seeds'])}"),
        ("reference_factor", p["reference_factor"] == 0 or p["reference_factor"] >= 2,
         "0 (no reference solve) or at least 2 (a cap of 2 × N steps or more)"),
        ("cls_fit_every", p["cls_fit_every"] <= p["cls_epochs"],
         f"at most cls_epochs = {p['cls_epochs']} (0: train exactly cls_epochs)"),
    ])


def solver(method: str, train_iters: int) -> SolverSpec:
    """The solver of a task trained with ``N = train_iters`` steps of ``method``: exactly ``N``
    (``tol = 0``), relative residual. Its adjoint's is the same with its own steps
    (:func:`dataclasses.replace`), and the sweep runs it at every ``N + ΔN`` of the grid."""
    return SolverSpec(method=method, max_iter=train_iters, tol=0.0)


@dataclass(frozen=True)
class ChapterJobs:
    """The chapter's jobs by role."""

    classification: tuple[ClassificationJob, ...]  # one per seed
    language: tuple[LanguageJob, ...]  # one per seed
    deq: InverseJob
    elder: InverseJob
    overparam: tuple[ClassificationJob, ...]  # one per size of op_sizes
    pixels: tuple[PixelClassifierJob, ...]  # the classifiers' baselines, one per seed
    bigram: BigramJob  # the language models' baseline (their training text is one)

    def all(self) -> list[Job]:
        """Every distinct job, the longest first (so that parallel workers finish together)."""
        unique: list[Job] = []
        for job in (*self.language, self.elder, self.deq, *self.classification,
                    *self.overparam, *self.pixels, self.bigram):
            if job not in unique:
                unique.append(job)
        return unique


def build_jobs(params: Params) -> ChapterJobs:
    """The chapter's jobs from the parameters of figure ``deq_gaps`` (checked by
    :mod:`i2o.compute.door`)."""
    p = params
    seeds = [replicates.seed(s, p["replicate"]) for s in p["seeds"]]
    seed = seeds[0]

    def grid(n: int) -> tuple[int, ...]:
        return tuple(iteration_grid(n, p["grid_factor"], p["grid_points"]))

    forward = solver(classification.METHOD, p["cls_train_iters"])
    backward = replace(forward, max_iter=p["cls_backward_iter"])
    main = [ClassificationJob(
        architecture=p["cls_architecture"], forward_spec=forward, backward_spec=backward,
        train_size=p["cls_train_size"], epochs=p["cls_epochs"], batch_size=p["cls_batch_size"],
        pretrain_steps=p["cls_pretrain_steps"], clip=p["cls_clip"], seed=s,
        fit_every=p["cls_fit_every"], extra_epochs=p["cls_extra_epochs"],
        fit_accuracy=p["cls_fit_accuracy"], grid=grid(forward.max_iter),
        eval_size=p["cls_eval_size"], reference_iters=p["reference_factor"] * forward.max_iter,
        replicate=p["replicate"]) for s in seeds]
    first = main[0]
    steps = first.steps()  # the cap's steps, trained on every size (a fixed budget)
    overparam = tuple(
        replace(first, train_size=size, fit_every=0, extra_epochs=0, fit_accuracy=0.0,
                epochs=epochs_for_steps(steps, size, first.batch_size), reference_iters=0)
        for size in sorted(set(p["op_sizes"])))
    forward = solver(p["lm_method"], p["lm_train_iters"])  # the adjoint: the same, N steps
    language = tuple(LanguageJob(
        context=p["lm_context"], width=p["lm_width"], heads=p["lm_heads"],
        ffn_width=p["lm_ffn_width"], forward_spec=forward, backward=p["lm_backward"],
        backward_spec=forward, jac_weight=p["lm_jac_weight"], steps=p["lm_steps"],
        pretrain_steps=p["lm_pretrain_steps"], train_chars=p["lm_train_chars"],
        batch_size=p["lm_batch_size"], lr=p["lm_lr"], seed=s, grid=grid(forward.max_iter),
        eval_windows=p["lm_eval_windows"], reference_iters=p["reference_factor"] * forward.max_iter,
        replicate=p["replicate"]) for s in seeds)
    forward = solver(inverse.METHOD, p["inv_train_iters"])
    backward = replace(forward, max_iter=p["inv_backward_iter"])
    deq, elder = (InverseJob(
        variant=variant, operator=p["inv_operator"], noise=p["inv_noise"], width=p["inv_width"],
        depth=p["inv_depth"], forward_spec=forward, backward_spec=backward, steps=p["inv_steps"],
        batch_size=p["inv_batch_size"], crop=p["inv_crop"], seed=seed,
        grid=grid(forward.max_iter), train_size=p["inv_train_size"],
        eval_size=p["inv_eval_size"], reference_iters=p["reference_factor"] * forward.max_iter,
        replicate=p["replicate"]) for variant in ("deq", "elder"))
    pixels = tuple(PixelClassifierJob(train_size=job.train_size, seed=job.seed,
                                      eval_size=job.eval_size, replicate=p["replicate"])
                   for job in main)
    bigram = BigramJob(train_chars=p["lm_train_chars"], context=p["lm_context"],
                       eval_windows=p["lm_eval_windows"])
    return ChapterJobs(tuple(main), language, deq, elder, overparam, pixels, bigram)


def jobs(params: Params) -> list[Job]:
    """The distinct jobs of a run, the longest first, for :mod:`i2o.compute.sweep` and
    :func:`collect`: the language models, the ELDER and DEQ reconstructions, the classifiers, the
    overparametrization sweep, the baselines."""
    return build_jobs(params).all()


def _train_iters(built: ChapterJobs, task: str) -> int:
    """The task's N (the same for all its models)."""
    found = getattr(built, task)
    return (found[0] if isinstance(found, tuple) else found).train_iters


def _task_results(results: Mapping[str, Any], task: str) -> list[Mapping[str, Any]]:
    """A task's results, one per trained model (seed)."""
    found = results[task]
    return list(found) if isinstance(found, list | tuple) else [found]


def task_curves(results: Mapping[str, Any], split: str = "test", loss: bool = False
                ) -> dict[str, Curves]:
    """Per task, the :class:`i2o.diagnose.Curves` of every trained model (seed) on ``split``
    data: the task metric, or (``loss=True``) the training loss; lower is better."""
    out = {}
    for task in TASKS.values():
        metric, transform = (task.loss, "mean") if loss else (task.metric, task.transform)
        out[task.name] = from_sweeps([r[split] for r in _task_results(results, task.name)],
                                     metric, -1.0, transform)
    return out


def _label(task: str, split: str, loss: bool) -> tuple[str, str]:
    """A panel's title and its metric's label."""
    spec = TASKS[task]
    data = "test" if split == "test" else "training"
    return f"{spec.title}\n{data} data", spec.loss_label if loss else spec.metric_label


def seed_curves(curves: Mapping[str, Curves], built: ChapterJobs, split: str = "test",
                loss: bool = False) -> dict[str, list[GapCurve]]:
    """Per task, one :class:`GapCurve` per trained model (seed): the plotting views of
    ``curves`` (:func:`task_curves`)."""
    out = {}
    for task, found in curves.items():
        label, metric = _label(task, split, loss)
        out[task] = [view(found.select([k]), _train_iters(built, task), label, metric)
                     for k in range(found.n_models)]
    return out


def pooled(curves: Mapping[str, Curves], built: ChapterJobs, split: str = "test",
           loss: bool = False) -> dict[str, GapCurve]:
    """Per task, the mean curve over its seeds (:func:`.curves.view`), for the figures."""
    out = {}
    for task, found in curves.items():
        label, metric = _label(task, split, loss)
        label += f" ({found.n_models} seeds)" if found.n_models > 1 else ""
        out[task] = view(found, _train_iters(built, task), label, metric)
    return out


def overparam_rows(results: Sequence[Mapping[str, Any]], built: ChapterJobs
                   ) -> list[dict[str, Any]]:
    """Per training-set size: training-loss and test-error curves and the training loss at N."""
    rows = []
    for job, result in zip(built.overparam, results, strict=True):
        train_loss = curve_from_sweep(result["train"], "loss", job.train_iters,
                                      f"{job.train_size} images", "mean", "training loss")
        test_error = curve_from_sweep(result["test"], "error", job.train_iters,
                                      f"{job.train_size} images", "percent", "test error (%)")
        train_error = curve_from_sweep(result["train"], "error", job.train_iters,
                                       f"{job.train_size} images", "percent",
                                       "training error (%)")
        rows.append({"size": job.train_size, "epochs": job.epochs, "train_loss": train_loss,
                     "test_error": test_error, "train_error": train_error,
                     "loss_at_n": train_loss.summary()["value_at_n"]})
    return rows


@dataclass(frozen=True)
class GapsResults(ChapterResults):
    """The trained DEQs' sweeps and the curves drawn from them (task → :class:`GapCurve`, the
    mean over seeds; ``by_seed``: split → task → one curve per seed, for the claims)."""

    jobs: ChapterJobs
    results: dict[str, Any]  # role → the job's result (a list, one per seed or size, or one)
    test: dict[str, GapCurve]
    train: dict[str, GapCurve]
    test_loss: dict[str, GapCurve]
    train_loss: dict[str, GapCurve]
    overparam: list[dict[str, Any]]  # :func:`overparam_rows`
    by_seed: dict[str, dict[str, list[GapCurve]]]
    curves: dict[str, dict[str, Curves]]  # split → task → every model's curves (the claims')


def collect(params: Params) -> GapsResults:
    """Every DEQ of the chapter trained and swept (or read from the cache; the missing ones in
    ``params["workers"]`` processes), and its curves."""
    built = build_jobs(params)
    listed = built.all()
    found, cost = run_jobs(FIGURE, listed, params["workers"])
    of = dict(zip(listed, found, strict=True))
    results: dict[str, Any] = {role: [of[job] for job in getattr(built, role)]
                               for role in ("classification", "language", "overparam")}
    results.update(deq=of[built.deq], elder=of[built.elder],
                   baselines={"classification": [of[job] for job in built.pixels],
                              "language": of[built.bigram]})
    splits = {"test": ("test", False), "train": ("train", False),
              "test_loss": ("test", True), "train_loss": ("train", True)}
    curves = {name: task_curves(results, split, loss) for name, (split, loss) in splits.items()}
    by_seed = {name: seed_curves(curves[name], built, split, loss)
               for name, (split, loss) in splits.items()}
    mean = {name: pooled(curves[name], built, split, loss)
            for name, (split, loss) in splits.items()}
    return GapsResults(
        jobs=built, results=results, test=mean["test"], train=mean["train"],
        test_loss=mean["test_loss"], train_loss=mean["train_loss"],
        overparam=overparam_rows(results["overparam"], built), by_seed=by_seed, curves=curves,
        params=params, cost=cost)
