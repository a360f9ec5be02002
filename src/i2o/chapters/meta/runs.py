"""The meta-learning chapter's runs: its parameters, its jobs and its results.

A *model* is one meta-training run (:class:`.model.Model`: MAML with N inner steps or iMAML with
λ and N, on tasks drawn on the fly for Figure 3 or on a fixed training set of B meta-batches for
Figure 4); each is swept at test time by an :class:`.evaluate.Evaluation`, which reads the trained
model through the model's job. These sweeps are the chapter's jobs (:func:`jobs`, what
``python -m i2o.sweep meta`` runs); :func:`collect` computes what is missing and reads them, with
the per-set-BN floor (:class:`.floor.BNFloor`) and the meta-gradient noise at initialization
(:class:`.gradient_noise.MetaGradientNoise`).

When the parameters list Figure 4 models to probe (``mechanism_meta_batches`` and
``mechanism_seeds``, parallel lists: one model per pair; absent or empty, nothing changes), each
is also followed by a :class:`.mechanism_probe.MechanismRun` (issue 49: why its outer loss rose),
listed before every sweep so that a sweep runs it first and the Figure 4 model then resumes from
the checkpoint it leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from i2o.base import replicates
from i2o.chapters.meta import FIGURE, evaluate
from i2o.chapters.meta.evaluate import Evaluation
from i2o.chapters.meta.floor import BNFloor
from i2o.chapters.meta.gradient_noise import MetaGradientNoise
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.chapters.meta.maml import MAMLModel
from i2o.chapters.meta.mechanism_probe import MechanismRun
from i2o.chapters.meta.model import Model
from i2o.compute.chapter import ChapterResults, run_jobs
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require

Curves = dict[str, Any]


@dataclass(frozen=True)
class MetaResults(ChapterResults):
    """Everything the chapter shows: the curves of every model by its label (Figure 3, Figure 4,
    the normalization ablation), the per-set-BN floor, the meta-gradient noise and the probes of
    the Figure 4 models listed for them (``mechanism``, by label; empty when none is)."""

    figure3: dict[str, Curves]
    figure4: dict[str, Curves]
    ablation: dict[str, Curves]
    floor: dict[str, float]
    noise: dict[str, dict[str, float]]
    mechanism: dict[str, dict[str, Any]] = field(default_factory=dict)


def tasks_seed(p: Params) -> int:
    """The seed of the fixed test tasks (Figure 3) and of the floor's tasks at the replicate."""
    return replicates.seed(p["test_seed"], p["replicate"])


def check_params(params: Params) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError`` before any
    compute."""
    require(FIGURE, params, [
        *((name, len(set(params[name])) == len(params[name]), "a list without repeated values")
          for name in ("maml_inner_steps", "fig4_meta_batches", "fig4_seeds")),
        ("fig4_meta_batches", len(params["fig4_meta_batches"]) >= 2,
         "at least 2 training-set sizes (to order them)")])
    batches, seeds = _mechanism_lists(params)
    if batches or seeds:
        pairs = mechanism_pairs(params)
        given = {**params, "mechanism_meta_batches": batches, "mechanism_seeds": seeds}
        require(FIGURE, given, [
            ("mechanism_seeds", len(seeds) == len(batches),
             "a list as long as mechanism_meta_batches (one probed model per pair)"),
            ("mechanism_meta_batches", set(batches) <= set(params["fig4_meta_batches"]),
             "a list of sizes among fig4_meta_batches"),
            ("mechanism_seeds", set(seeds) <= set(params["fig4_seeds"]),
             "a list of seeds among fig4_seeds"),
            ("mechanism_seeds", len(set(pairs)) == len(pairs),
             "a list without a repeated (size, seed) pair")])


def _mechanism_lists(params: Params) -> tuple[list[int], list[int]]:
    """``mechanism_meta_batches`` and ``mechanism_seeds`` (empty lists when absent)."""
    return (list(params.get("mechanism_meta_batches") or []),
            list(params.get("mechanism_seeds") or []))


def mechanism_pairs(params: Params) -> list[tuple[int, int]]:
    """The (training-set size B, Figure 4 seed) of every model to probe, in the order listed;
    empty when the parameters list none."""
    batches, seeds = _mechanism_lists(params)
    return list(zip(batches, seeds, strict=False))


def _maml(p: Params, n: int, normalization: str) -> MAMLModel:
    return MAMLModel(n, p["maml_outer_steps"], step_size=p["maml_step_size"],
                     meta_batch_size=p["meta_batch_size"], learning_rate=p["learning_rate"],
                     normalization=normalization, seed=replicates.seed(p["seed"], p["replicate"]),
                     checkpoint_every=p["checkpoint_every"])


def _imaml(p: Params, outer_steps: int, n_meta_batches: int | None, seed: int) -> IMAMLModel:
    return IMAMLModel(p["imaml_inner_steps"], outer_steps, regularization=p["imaml_regularization"],
                      cg_maxiter=p["cg_maxiter"], acceleration=p["imaml_acceleration"],
                      n_meta_batches=n_meta_batches, meta_batch_size=p["meta_batch_size"],
                      learning_rate=p["learning_rate"], normalization=p["normalization"], seed=seed,
                      checkpoint_every=p["checkpoint_every"])


def figure3_models(p: Params) -> list[Model]:
    """The Figure 3 models of a parameter set ``p`` (see the ``meta`` chapter.yaml)."""
    return ([_maml(p, n, p["normalization"]) for n in p["maml_inner_steps"]]
            + [_imaml(p, p["imaml_outer_steps"], None, replicates.seed(p["seed"], p["replicate"]))])


def figure4_models(p: Params) -> list[Model]:
    """One iMAML model per (training-set size, seed): each seed draws its own training set."""
    return [_imaml(p, p["fig4_outer_steps"], b, seed)
            for b in p["fig4_meta_batches"]
            for seed in replicates.seeds(p["fig4_seeds"], p["replicate"])]


def ablation_models(p: Params) -> list[Model]:
    """The normalization ablation: the first Figure 3 MAML model with
    ``ablation_normalization`` (none when it equals the chapter's normalization)."""
    if p["ablation_normalization"] == p["normalization"]:
        return []
    return [_maml(p, p["maml_inner_steps"][0], p["ablation_normalization"])]


def all_models(p: Params) -> list[Model]:
    return figure3_models(p) + figure4_models(p) + ablation_models(p)


def mechanism_runs(p: Params) -> list[MechanismRun]:
    """One probe run per listed (B, seed) (:func:`mechanism_pairs`), following the Figure 4
    model of that training-set size and seed (the seed at the replicate, as Figure 4 draws it)."""
    return [MechanismRun(_imaml(p, p["fig4_outer_steps"], batches,
                                replicates.seed(seed, p["replicate"])))
            for batches, seed in mechanism_pairs(p)]


def evaluation(p: Params, model: Model) -> Evaluation:
    """The test-time sweep of ``model``: on the ``n_test_tasks`` fixed test tasks for a model
    trained on tasks drawn on the fly (Figure 3; an iMAML model's with its convergence
    reference), on its own training tasks for a model trained on a fixed set (Figure 4)."""
    if model.n_meta_batches is None:
        max_steps = p["maml_max_test_steps" if model.method == "maml" else "imaml_max_test_steps"]
        tasks = {"test_seed": tasks_seed(p), "n_test_tasks": p["n_test_tasks"],
                 "reference_iters": p["reference_iters"] if model.method == "imaml" else 0}
    else:
        max_steps, tasks = p["fig4_max_test_steps"], {}
    grid = evaluate.step_grid(max(max_steps, model.inner_steps), p["grid_points_per_decade"],
                              include=(model.inner_steps,))
    return Evaluation(model, tuple(int(k) for k in grid), **tasks)


def evaluations(params: Params) -> list[Evaluation]:
    """Every model of Figures 3 and 4 and of the ablation, as the job that sweeps it (and trains
    it first when it is missing)."""
    return [evaluation(params, model) for model in all_models(params)]


def jobs(params: Params) -> list[Job]:
    """The probe runs of the listed Figure 4 models (:func:`mechanism_runs`, none unless listed),
    first, then every sweep (:func:`evaluations`): exactly the cache entries :func:`collect`
    reads."""
    return [*mechanism_runs(params), *evaluations(params)]


def bn_floor(p: Params) -> BNFloor:
    """The per-set-BN floor (:mod:`i2o.chapters.meta.floor`) on the replicate's tasks."""
    return BNFloor(n_tasks=p["floor_tasks"], seed=tasks_seed(p))


def noise_regularizations(p: Params) -> list[float]:
    """The λ of the iMAML meta-gradients measured at initialization: the chapter's own and
    ``noise_regularizations``, ascending."""
    return sorted({float(p["imaml_regularization"]), *map(float, p["noise_regularizations"])})


def meta_gradient_noise(p: Params) -> MetaGradientNoise:
    """Signal and noise of the hidden layers' meta-gradient (:mod:`.gradient_noise`) at the
    chapter's initialization, over the first ``noise_batches`` meta-batches its online models
    train on, for the query loss without adaptation, MAML with the first ``maml_inner_steps``
    and iMAML at each λ of :func:`noise_regularizations` (with the chapter's solver)."""
    reference = _maml(p, p["maml_inner_steps"][0], p["normalization"])
    return MetaGradientNoise(
        seed=reference.seed, n_batches=p["noise_batches"], meta_batch_size=p["meta_batch_size"],
        hidden=reference.hidden, normalization=p["normalization"],
        maml_inner_steps=reference.inner_steps, maml_step_size=p["maml_step_size"],
        imaml_inner_steps=p["imaml_inner_steps"], cg_maxiter=p["cg_maxiter"],
        acceleration=p["imaml_acceleration"], regularizations=tuple(noise_regularizations(p)))


#: What a model's training says of the point it is evaluated at (:func:`.model.best_point`),
#: copied into its curves.
SELECTION_KEYS = ("selection", "best_step", "best_loss", "final_loss", "peak_after_best",
                  "rise_after_best", "checkpoint_steps", "checkpoint_losses")


def _curves(job: Evaluation, swept: dict[str, Any]) -> Curves:
    """A model's sweep with what the claims and figures need of the model and its training: its
    per-step outer losses (``train_losses``) and the point it was swept at
    (:data:`SELECTION_KEYS`: for a Figure 4 model the best point of its training loss,
    ``best_step``, ``best_loss``, ``final_loss`` and the rise after the best)."""
    model, trained = job.model, job.model.run()
    return {**swept, "grid": np.asarray(job.grid), "method": model.method,
            "normalization": model.normalization, "seed": model.seed,
            "inner_steps": model.inner_steps, "outer_steps": model.outer_steps,
            "train_losses": trained["losses"],
            "train_seconds_per_step": trained["seconds_per_step"],
            "train_cpu_seconds_per_step": trained.get("cpu_seconds_per_step", float("nan")),
            **{key: trained[key] for key in SELECTION_KEYS}}


def _figure4_curves(model: Model, curves: Curves) -> Curves:
    """A Figure 4 model's curves with its training loss at N and D(N, ΔN) (query loss on its own
    training tasks, over the tasks that stayed finite: see ``claims.finite_tasks``), both at the
    best point of its training (``best_step``; :mod:`.outer`)."""
    grid = curves["grid"]
    finite = np.all(np.isfinite(curves["query"]), axis=1)
    mean = curves["query"][finite].mean(axis=0)
    curves["n_diverged"] = int((~finite).sum())
    curves["n_meta_batches"] = model.n_meta_batches
    curves["loss_at_n"] = float(mean[list(grid).index(model.inner_steps)])
    curves["increase"] = evaluate.loss_increase(mean, grid, model.inner_steps)
    return curves


def collect(params: Params) -> MetaResults:
    """Every model's curves, the floor and the meta-gradient noise. Models missing from the cache
    are first trained and swept in ``workers`` local processes; everything is then read."""
    probed = mechanism_runs(params)
    mechanism, cost = (run_jobs(FIGURE, probed, params["workers"]) if probed else ([], None))
    sweeps = evaluations(params)
    swept, swept_cost = run_jobs(FIGURE, sweeps, params["workers"])
    cost = swept_cost if cost is None else cost + swept_cost
    (floor, noise), more = run_jobs(FIGURE, [bn_floor(params), meta_gradient_noise(params)])
    curves = {job.model.label: _curves(job, found)
              for job, found in zip(sweeps, swept, strict=True)}
    return MetaResults(
        params=params, cost=cost + more,
        figure3={m.label: curves[m.label] for m in figure3_models(params)},
        figure4={m.label: _figure4_curves(m, curves[m.label]) for m in figure4_models(params)},
        ablation={m.label: curves[m.label] for m in ablation_models(params)},
        floor={k: float(v) for k, v in floor.items()}, noise=noise,
        mechanism={job.model.label: found for job, found in zip(probed, mechanism, strict=True)})


def print_costs(results: MetaResults) -> None:
    """One line per model, as recorded by the run that computed it: outer steps, time per outer
    step, final meta-loss, sweep time, and for a model kept at its best point that point."""
    for section in (results.figure3, results.figure4, results.ablation):
        for name, c in section.items():
            print(f"{name:40s} outer steps {c['outer_steps']:6d}  "
                  f"{1e3 * c['train_seconds_per_step']:7.2f} ms/outer step (wall, with "
                  f"compilation), {1e3 * c.get('train_cpu_seconds_per_step', np.nan):6.2f} ms "
                  "of CPU once compiled  "
                  f"final meta-loss {np.mean(c['train_losses'][-100:]):.3f}  "
                  f"sweep {c['seconds']:.1f} s over {c['query'].shape[0]} tasks"
                  + _best_point_text(c))
    print(f"per-set-BN floor: {results.floor['seconds']:.1f} s")


def _best_point_text(c: Curves) -> str:
    """``"  best point: step s, training loss …"`` for a model kept at its best point."""
    if c["selection"] != "best":
        return ""
    return (f"  best point: step {int(c['best_step'])}, training loss {c['best_loss']:.4g} "
            f"(last {c['final_loss']:.4g}, highest after the best {c['peak_after_best']:.4g})")


def recorded_cost(p: Params) -> dict[str, Any]:
    """Wall time recorded in the results cache for a parameter set, without computing anything:
    ``{"training": {name: s}, "sweeps": {name: s}, "missing": [names], "total": s}``.

    A training time is that of the run that finished the model (a resumed run records only its
    own part); a missing entry has not been computed (or was computed by other code)."""
    cost: dict[str, Any] = {"training": {}, "sweeps": {}, "missing": []}
    for job in evaluations(p):
        model = job.model
        if not model.is_cached():
            cost["missing"].append(model.name)
            continue
        cost["training"][model.label] = float(model.run()["seconds"])
        if job.is_cached():
            cost["sweeps"][model.label] = float(job.run()["seconds"])
        else:
            cost["missing"].append(job.name)
    cost["total"] = sum(cost["training"].values()) + sum(cost["sweeps"].values())
    return cost
