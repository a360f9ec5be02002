"""What the separation chapter computes, through the results cache.

Every trained model (in Section 2 and for the ReLU DEQs of Section 4, every stack of seeds trained
together) is one cache entry, a :class:`i2o.compute.job.Job` defined beside the code that computes
it (:func:`jobs`). A sweep (``python -m i2o.sweep separation``) runs them as tasks (:func:`tasks`),
one process each: one per sawtooth target (every DEQ and FNN of Section 1, every seed); per
GOTU target one for its ReLU DEQs and one for its other models (Section 4); one per input
dimension for the DEQs of the steep functions and one for their FNNs (Section 2; one cache entry
per dimension, every seed trained at once); one each for Section 3 and the frozen-coordinate
task. :func:`collect` computes the missing
entries (in ``workers`` local processes) and reads them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from i2o.base import replicates
from i2o.chapters.separation import FIGURE, gotu, nets, sawtooth
from i2o.chapters.separation.diagonal import Diagonal
from i2o.chapters.separation.frozen import Frozen
from i2o.chapters.separation.gotu import GotuDeqStack, GotuModel
from i2o.chapters.separation.sawtooth import Construction, SawtoothModel, SawtoothRestarts
from i2o.chapters.separation.steep import SteepStack
from i2o.compute import chapter
from i2o.compute.chapter import ChapterResults
from i2o.compute.door import Task
from i2o.compute.job import Job
from i2o.compute.profiles import Params, require

STEEP_MODELS = ("deq_lower", "fnn")
_DISTINCT = ("seeds", "construction_m", "saw_exponents", "deq_widths", "fnn_widths",
             "fnn_depths", "flops_fnn_depths", "steep_dims", "steep_seeds", "gotu_seeds")


@dataclass(frozen=True)
class SeparationResults(ChapterResults):
    """Everything the chapter shows, one dict per section (arrays over models and seeds)."""

    sawtooth: dict[str, Any]
    steep: dict[str, Any]
    diagonal: dict[str, Any]
    gotu: dict[str, Any]
    frozen: dict[str, Any]


def check_params(params: Params) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError``."""
    p = params
    require(FIGURE, p, [
        *((name, len(set(p[name])) == len(p[name]), "a list without repeated values")
          for name in _DISTINCT),
        ("diag_n", p["diag_n"] < p["diag_d"],
         f"< diag_d = {p['diag_d']} (the implicit-bias problem needs n < d: interpolation)"),
        ("heatmap_points", p["heatmap_points"] <= p["gotu_train_size"],
         f"≤ gotu_train_size = {p['gotu_train_size']}"),
        ("seeds", len(p["seeds"]) >= 1, "a list of at least one seed"),
    ])


def model_seeds(p: Params) -> list[int]:
    """The seeds of every trained model and random problem at the run's replicate."""
    return replicates.seeds(p["seeds"], p["replicate"])


def gotu_seeds(p: Params) -> list[int]:
    """The seeds of Section 4 (GOTU and the frozen-coordinate task; its comparisons over seeds
    need more than Section 1's)."""
    return replicates.seeds(p["gotu_seeds"], p["replicate"])


def steep_seeds(p: Params) -> list[int]:
    """The seeds of Section 2 (its slope comparison needs more than the other sections)."""
    return replicates.seeds(p["steep_seeds"], p["replicate"])


# --- Section 1: sawtooth ------------------------------------------------------------------------

def flops_matched_widths(p: Params) -> dict[int, int]:
    """For every depth of ``flops_fnn_depths``, the FNN width whose forward cost is closest to
    that of the width-``flops_deq_width`` lower-triangular DEQ (its ``width`` solver steps)."""
    target = nets.flops_deq(1, p["flops_deq_width"], p["flops_deq_width"])
    out = {}
    for depth in p["flops_fnn_depths"]:
        widths = np.arange(1, 2000)
        costs = np.array([nets.flops_fnn(1, int(w), depth) for w in widths])
        out[depth] = int(widths[np.argmin(np.abs(costs - target))])
    return out


def implicit_saw_model(p: Params) -> tuple[str, int, int]:
    """The genuinely implicit row of Section 1: a contractive (non-nilpotent) ReLU DEQ of the
    FLOPs-matched width, solved to tolerance by fixed-point iteration."""
    return ("deq_contractive", p["flops_deq_width"], 1)


def saw_models(p: Params) -> list[tuple[str, int, int]]:
    """(kind, width, depth) of every Section 1 model, per target and seed."""
    models = [("deq_lower", w, 1) for w in sorted(set(p["deq_widths"]) | {p["flops_deq_width"]})]
    models += [implicit_saw_model(p)]
    models += [("fnn", w, L) for L in p["fnn_depths"] for w in p["fnn_widths"]]
    models += [("fnn", w, L) for L, w in flops_matched_widths(p).items()
               if ("fnn", w, L) not in models]
    return models


def flops_models(p: Params) -> list[tuple[str, int, int]]:
    """(kind, width, depth) of the FLOPs-matched comparison: the DEQ, then one FNN per depth."""
    return [("deq_lower", p["flops_deq_width"], 1)] + [
        ("fnn", w, L) for L, w in flops_matched_widths(p).items()]


def saw_job(p: Params, k: int, kind: str, width: int, depth: int, seed: int) -> SawtoothModel:
    return SawtoothModel(k, kind, width, depth, seed, p["saw_train_size"], p["saw_test_size"],
                         p["saw_steps"], p["saw_lr"])


def lbfgs_job(p: Params, k: int, kind: str, width: int, depth: int, seed: int
              ) -> SawtoothRestarts:
    """``saw_restarts`` float64 L-BFGS fits of one FLOPs-matched model on seed ``seed``'s data."""
    return SawtoothRestarts(k, kind, width, depth, seed, p["saw_train_size"], p["saw_test_size"],
                            p["saw_restarts"], p["saw_lbfgs_iters"])


def construction_job(p: Params) -> Construction:
    """Theorem 1's construction checked for every m of ``construction_m``."""
    return Construction(tuple(p["construction_m"]))


def sawtooth_task(p: Params, k: int) -> Task:
    """Every model of target Δ^k, every seed: the Adam runs, then the L-BFGS restarts."""
    adam = [saw_job(p, k, *m, seed) for m in saw_models(p) for seed in model_seeds(p)]
    return (*adam, *(lbfgs_job(p, k, *m, seed) for m in flops_models(p)
                     for seed in model_seeds(p)))


def sawtooth_section(p: Params, entry: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Every Section 1 model, as arrays indexed like :func:`saw_models` × seeds, per target."""
    models = saw_models(p)
    out: dict[str, Any] = {"construction": entry[construction_job(p).name], "models": {
        "kind": np.array([m[0] for m in models]), "width": np.array([m[1] for m in models]),
        "depth": np.array([m[2] for m in models])}, "flops_matched": {}}
    for L, w in flops_matched_widths(p).items():
        out["flops_matched"][f"depth{L}"] = w
    for k in p["saw_exponents"]:
        runs = [[entry[saw_job(p, k, *m, seed).name] for seed in model_seeds(p)]
                for m in models]
        out[f"k{k}"] = {key: np.array([[r[key] for r in row] for row in runs])
                        for key in runs[0][0]}
        x = np.linspace(0, 1, 2001)
        out[f"k{k}"]["curve_x"], out[f"k{k}"]["curve_y"] = x, sawtooth.sawtooth(x, k)
        fits = [[entry[lbfgs_job(p, k, *m, seed).name] for seed in model_seeds(p)]
                for m in flops_models(p)]
        out[f"k{k}"]["lbfgs"] = {key: np.array([[r[key] for r in row] for row in fits])
                                 for key in fits[0][0]}
    return out


# --- Section 2: steep functions -----------------------------------------------------------------

def steep_job(p: Params, kind: str, d: int) -> SteepStack:
    """The Section 2 runs of one model kind at input dimension d, δ = 2^-d, every seed."""
    return SteepStack(kind, d, tuple(steep_seeds(p)), p["steep_width"], p["steep_depth"],
                      p["steep_train_size"], p["steep_steps"], p["steep_lr"], p["steep_level"])


def steep_section(p: Params, entry: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Per model kind: arrays (dims × seeds) of every recorded number, δ = 2^-d."""
    out: dict[str, Any] = {"dims": np.array(p["steep_dims"])}
    for kind in STEEP_MODELS:
        rows = [entry[steep_job(p, kind, d).name] for d in p["steep_dims"]]
        out[kind] = {key: np.stack([np.asarray(row[key]) for row in rows]) for key in rows[0]}
    return out


# --- Section 3: diagonal linear DEQ ---------------------------------------------------------------

def diagonal_job(p: Params) -> Diagonal:
    """Section 3 for every seed (seconds)."""
    return Diagonal(tuple(model_seeds(p)), p["diag_n"], p["diag_d"], p["diag_lr_scale"],
                    p["diag_max_steps"], p["diag_tol"], p["dln_alpha"])


# --- Section 4: GOTU ----------------------------------------------------------------------------

def gotu_job(p: Params, target: str, kind: str, seed: int) -> GotuModel:
    return GotuModel.of(target, kind, seed, p["gotu_dim"], p["gotu_train_size"], p["gotu_steps"],
                        p["gotu_lr"], p["heatmap_points"], p["gotu_width"], p["gotu_depth"],
                        p["deq_gamma"], p["dln_alpha"])


def gotu_deq_job(p: Params, target: str) -> GotuDeqStack:
    """The ReLU DEQs of one GOTU target, every seed trained at once."""
    return GotuDeqStack(target, tuple(gotu_seeds(p)), p["gotu_dim"], p["gotu_train_size"],
                        p["gotu_width"], p["gotu_steps"], p["gotu_lr"], p["deq_gamma"],
                        p["heatmap_points"])


def gotu_others(p: Params, target: str) -> Task:
    """The models of one GOTU target other than its ReLU DEQs, every seed."""
    return tuple(gotu_job(p, target, kind, seed) for kind in gotu.MODELS
                 if kind != "deq_contractive" for seed in gotu_seeds(p))


def gotu_section(p: Params, entry: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for target in gotu.TARGETS:
        section: dict[str, Any] = {"prediction": {
            "bias": gotu.affine_prediction(target, p["gotu_dim"], bias=True),
            "no_bias": gotu.affine_prediction(target, p["gotu_dim"], bias=False)}}
        for kind in gotu.MODELS:
            if kind == "deq_contractive":
                stack = entry[gotu_deq_job(p, target).name]
                section[kind] = {key: np.asarray(value) for key, value in stack.items()}
                section[kind]["features"] = section[kind]["features"][0]
                continue
            runs = [entry[gotu_job(p, target, kind, seed).name] for seed in gotu_seeds(p)]
            section[kind] = {key: np.array([r[key] for r in runs]) for key in runs[0]
                             if key != "features"}
            section[kind]["features"] = runs[0]["features"]
        out[target] = section
    return out


def frozen_job(p: Params) -> Frozen:
    """The frozen-coordinate task of Section 4 (:mod:`.frozen`) for every ``f̂(∅)`` of
    ``frozen_means`` and every seed (seconds)."""
    return Frozen(tuple(gotu_seeds(p)), p["gotu_dim"], p["dln_alpha"], tuple(p["frozen_means"]),
                  p["frozen_lr"], p["frozen_steps"], p["frozen_tol"])


# --- everything ---------------------------------------------------------------------------------

def tasks(params: Params) -> list[Task]:
    """The chapter's jobs as a sweep submits them, one process per task, in the order the
    workers take them: the longest first (the GOTU DEQs, the sawtooth, Section 3's gradient
    flows, the DEQs of Section 2), so that the workers finish together. Models of a second or
    less share a task: every model of a sawtooth target, a GOTU target's models other than its
    ReLU DEQs, the FNNs of Section 2 (the DEQs of Section 2 have a task per input dimension)."""
    p = params
    targets = sorted(gotu.TARGETS, reverse=True)
    return [*((gotu_deq_job(p, target),) for target in targets),
            *(sawtooth_task(p, k) for k in p["saw_exponents"]),
            (diagonal_job(p),),
            *((steep_job(p, "deq_lower", d),) for d in sorted(p["steep_dims"], reverse=True)),
            *(gotu_others(p, target) for target in targets),
            tuple(steep_job(p, "fnn", d) for d in p["steep_dims"]),
            (frozen_job(p),)]


def jobs(params: Params) -> list[Job]:
    """Every job of the chapter (one cache entry each), in the order of :func:`tasks`."""
    return [job for task in tasks(params) for job in task]


def collect(params: Params) -> SeparationResults:
    """Everything the chapter shows: the entries of :func:`jobs` and Theorem 1's construction
    (a job of its own, too short for the sweep), those missing from the cache computed first in
    ``workers`` local processes (one worker: here, as they are read)."""
    p = params
    todo = [*tasks(p), (construction_job(p),)]
    found, cost = chapter.run_jobs(FIGURE, todo, p["workers"])
    entry = {job.name: result
             for job, result in zip((job for task in todo for job in task), found, strict=True)}
    return SeparationResults(
        sawtooth=sawtooth_section(p, entry), steep=steep_section(p, entry),
        diagonal=entry[diagonal_job(p).name], gotu=gotu_section(p, entry),
        frozen=entry[frozen_job(p).name], params=p, cost=cost)
