"""What the separation chapter computes, through the results cache.

Every trained model (in Section 2 and for the ReLU DEQs of Section 4, every stack of seeds trained
together) is one cache entry (key: everything that determines it, and the source of the modules
that compute it). The expensive
parts are grouped in sweep jobs (``python -m i2o.sweep separation``): one per sawtooth target
(every DEQ and FNN of Section 1, every seed); per GOTU target one for its ReLU DEQs and one for
its other models (Section 4); one per input dimension for the DEQs of the steep functions and one
for their FNNs (Section 2; one cache entry per dimension, every seed trained at once); one each
for Section 3 and the frozen-coordinate task. A job computes exactly the entries the notebook
reads; ``collect`` runs the missing jobs in ``workers`` local processes first, then reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from i2o import replicates, results
from i2o.chapters.separation import FIGURE

_ENGINE = ("deq", "train.loop", "train.checkpoint", "train.schedule", "chapters.separation.nets")
SAW_SOURCES = (*_ENGINE, "chapters.separation.sawtooth")
GOTU_SOURCES = (*_ENGINE, "chapters.separation.batched", "chapters.separation.gotu")
DIAGONAL_SOURCES = ("chapters.separation.diagonal",)
FROZEN_SOURCES = ("chapters.separation.frozen",)
STEEP_SOURCES = (*_ENGINE, "chapters.separation.batched", "chapters.separation.steep")
STEEP_MODELS = ("deq_lower", "fnn")


def check_params(p: Any) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError``."""
    from i2o.profiles import ParameterError

    for name in ("seeds", "construction_m", "saw_exponents", "deq_widths", "fnn_widths",
                 "fnn_depths", "flops_fnn_depths", "steep_dims", "steep_seeds", "gotu_seeds"):
        values = list(p[name])
        if len(set(values)) != len(values):
            raise ParameterError(f"parameter {name!r} of figure {FIGURE!r} must not repeat a "
                                 f"value; got {values}")
    if p.diag_n >= p.diag_d:
        raise ParameterError(f"parameters 'diag_n' and 'diag_d' of figure {FIGURE!r}: the "
                             f"implicit-bias problem needs n < d (interpolation); got "
                             f"diag_n = {p.diag_n}, diag_d = {p.diag_d}")
    if p.heatmap_points > p.gotu_train_size:
        raise ParameterError(f"parameter 'heatmap_points' of figure {FIGURE!r} must be ≤ "
                             f"gotu_train_size = {p.gotu_train_size}; got {p.heatmap_points}")
    if len(p.seeds) < 1:
        raise ParameterError(f"parameter 'seeds' of figure {FIGURE!r} needs a seed")


def model_seeds(p: Any) -> list[int]:
    """The seeds of every trained model and random problem at the run's replicate."""
    return replicates.seeds(p.seeds, p.replicate)


def gotu_seeds(p: Any) -> list[int]:
    """The seeds of Section 4 (GOTU and the frozen-coordinate task; its comparisons over seeds
    need more than Section 1's)."""
    return replicates.seeds(p.gotu_seeds, p.replicate)


def steep_seeds(p: Any) -> list[int]:
    """The seeds of Section 2 (its slope comparison needs more than the other sections)."""
    return replicates.seeds(p.steep_seeds, p.replicate)


# --- Section 1: sawtooth ------------------------------------------------------------------------

def flops_matched_widths(p: Any) -> dict[int, int]:
    """For every depth of ``flops_fnn_depths``, the FNN width whose forward cost is closest to
    that of the width-``flops_deq_width`` lower-triangular DEQ (its ``width`` solver steps)."""
    from i2o.chapters.separation import nets

    target = nets.flops_deq(1, p.flops_deq_width, p.flops_deq_width)
    out = {}
    for depth in p.flops_fnn_depths:
        widths = np.arange(1, 2000)
        costs = np.array([nets.flops_fnn(1, int(w), depth) for w in widths])
        out[depth] = int(widths[np.argmin(np.abs(costs - target))])
    return out


def implicit_saw_model(p: Any) -> tuple[str, int, int]:
    """The genuinely implicit row of Section 1: a contractive (non-nilpotent) ReLU DEQ of the
    FLOPs-matched width, solved to tolerance by fixed-point iteration."""
    return ("deq_contractive", p.flops_deq_width, 1)


def saw_models(p: Any) -> list[tuple[str, int, int]]:
    """(kind, width, depth) of every Section 1 model, per target and seed."""
    models = [("deq_lower", w, 1) for w in sorted(set(p.deq_widths) | {p.flops_deq_width})]
    models += [implicit_saw_model(p)]
    models += [("fnn", w, L) for L in p.fnn_depths for w in p.fnn_widths]
    models += [("fnn", w, L) for L, w in flops_matched_widths(p).items()
               if ("fnn", w, L) not in models]
    return models


def _saw_key(p: Any, k: int, kind: str, width: int, depth: int, seed: int
             ) -> tuple[str, dict[str, Any]]:
    name = f"saw-k{k}-{kind}-w{width}-L{depth}-s{seed}"
    key = {"k": k, "kind": kind, "width": width, "depth": depth, "seed": seed,
           "train_size": p.saw_train_size, "test_size": p.saw_test_size, "steps": p.saw_steps,
           "lr": p.saw_lr}
    return name, key


def saw_model(p: Any, k: int, kind: str, width: int, depth: int, seed: int) -> dict[str, Any]:
    from i2o.chapters.separation import sawtooth

    name, key = _saw_key(p, k, kind, width, depth, seed)
    return results.cached(FIGURE, name, key, lambda: sawtooth.train_model(
        kind, width, depth, k, seed, p.saw_train_size, p.saw_test_size, p.saw_steps, p.saw_lr),
        sources=SAW_SOURCES)


def flops_models(p: Any) -> list[tuple[str, int, int]]:
    """(kind, width, depth) of the FLOPs-matched comparison: the DEQ, then one FNN per depth."""
    return [("deq_lower", p.flops_deq_width, 1)] + [
        ("fnn", w, L) for L, w in flops_matched_widths(p).items()]


def _lbfgs_key(p: Any, k: int, kind: str, width: int, depth: int, seed: int
               ) -> tuple[str, dict[str, Any]]:
    name = f"saw-lbfgs-k{k}-{kind}-w{width}-L{depth}-s{seed}"
    key = {"k": k, "kind": kind, "width": width, "depth": depth, "seed": seed,
           "train_size": p.saw_train_size, "test_size": p.saw_test_size,
           "restarts": p.saw_restarts, "max_iter": p.saw_lbfgs_iters, "dtype": "float64"}
    return name, key


def lbfgs_model(p: Any, k: int, kind: str, width: int, depth: int, seed: int) -> dict[str, Any]:
    """``saw_restarts`` float64 L-BFGS fits of one FLOPs-matched model on seed ``seed``'s data."""
    from i2o.chapters.separation import sawtooth

    name, key = _lbfgs_key(p, k, kind, width, depth, seed)
    return results.cached(FIGURE, name, key, lambda: sawtooth.train_restarts(
        kind, width, depth, k, seed, p.saw_train_size, p.saw_test_size, p.saw_restarts,
        p.saw_lbfgs_iters), sources=SAW_SOURCES)


def construction(p: Any) -> dict[str, Any]:
    """Theorem 1's construction checked for every m of ``construction_m`` (cached)."""
    from i2o.chapters.separation import sawtooth

    def compute() -> dict[str, Any]:
        rows = [sawtooth.check_construction(m) for m in p.construction_m]
        return {key: np.array([row[key] for row in rows]) for key in rows[0]}

    return results.cached(FIGURE, "construction", {"m": list(p.construction_m)}, compute,
                          sources=("chapters.separation.sawtooth", "deq"))


def sawtooth_section(p: Any) -> dict[str, Any]:
    """Every Section 1 model, as arrays indexed like :func:`saw_models` × seeds, per target."""
    from i2o.chapters.separation import sawtooth

    models = saw_models(p)
    out: dict[str, Any] = {"construction": construction(p), "models": {
        "kind": np.array([m[0] for m in models]), "width": np.array([m[1] for m in models]),
        "depth": np.array([m[2] for m in models])}, "flops_matched": {}}
    for L, w in flops_matched_widths(p).items():
        out["flops_matched"][f"depth{L}"] = w
    for k in p.saw_exponents:
        runs = [[saw_model(p, k, *m, seed) for seed in model_seeds(p)] for m in models]
        out[f"k{k}"] = {key: np.array([[r[key] for r in row] for row in runs])
                        for key in runs[0][0]}
        x = np.linspace(0, 1, 2001)
        out[f"k{k}"]["curve_x"], out[f"k{k}"]["curve_y"] = x, sawtooth.sawtooth(x, k)
        fits = [[lbfgs_model(p, k, *m, seed) for seed in model_seeds(p)] for m in flops_models(p)]
        out[f"k{k}"]["lbfgs"] = {key: np.array([[r[key] for r in row] for row in fits])
                                 for key in fits[0][0]}
    return out


# --- Section 2: steep functions -----------------------------------------------------------------

def _steep_key(p: Any, kind: str, d: int) -> tuple[str, dict[str, Any]]:
    key = {"delta": "2^-d", "kind": kind, "d": d, "seeds": steep_seeds(p),
           "width": p.steep_width, "depth": p.steep_depth, "size": p.steep_train_size,
           "steps": p.steep_steps, "lr": p.steep_lr, "level": p.steep_level}
    return f"steep-{kind}-d{d}", key


def steep_models(p: Any, kind: str, d: int) -> dict[str, np.ndarray]:
    """The Section 2 runs of one model kind at input dimension d, steepness δ = 2^-d (the
    rebuttal's pairing), every seed trained at once: arrays over seeds."""
    from i2o.chapters.separation import steep

    name, key = _steep_key(p, kind, d)
    return results.cached(FIGURE, name, key, lambda: steep.train_stack(
        kind, d, 2.0 ** -d, p.steep_width, p.steep_depth, p.steep_train_size, p.steep_steps,
        p.steep_lr, p.steep_level, steep_seeds(p)), sources=STEEP_SOURCES)


def steep_section(p: Any) -> dict[str, Any]:
    """Per model kind: arrays (dims × seeds) of every recorded number, δ = 2^-d."""
    out: dict[str, Any] = {"dims": np.array(p.steep_dims)}
    for kind in STEEP_MODELS:
        rows = [steep_models(p, kind, d) for d in p.steep_dims]
        out[kind] = {key: np.stack([np.asarray(row[key]) for row in rows]) for key in rows[0]}
    return out


# --- Section 3: diagonal linear DEQ ---------------------------------------------------------------

def diagonal_section(p: Any) -> dict[str, Any]:
    """Section 3 for every seed (cached; seconds)."""
    from i2o.chapters.separation import diagonal

    def compute() -> dict[str, Any]:
        start = time.perf_counter()
        out = {f"s{seed}": diagonal.experiment(p.diag_n, p.diag_d, seed,
                                               p.diag_lr_scale, p.diag_max_steps, p.diag_tol,
                                               p.dln_alpha) for seed in model_seeds(p)}
        return {**out, "seconds": time.perf_counter() - start}

    return results.cached(FIGURE, "diagonal", _diagonal_key(p), compute,
                          sources=DIAGONAL_SOURCES)


def _diagonal_key(p: Any) -> dict[str, Any]:
    return {name: p[name] for name in ("seeds", "replicate", "diag_n", "diag_d",
                                       "diag_lr_scale", "diag_max_steps", "diag_tol", "dln_alpha")}


# --- Section 4: GOTU ----------------------------------------------------------------------------

def _gotu_key(p: Any, target: str, kind: str, seed: int) -> tuple[str, dict[str, Any]]:
    key = {"target": target, "kind": kind, "seed": seed, "d": p.gotu_dim,
           "train_size": p.gotu_train_size, "steps": p.gotu_steps, "lr": p.gotu_lr,
           "heatmap_points": p.heatmap_points}
    if kind in ("deq_contractive", "fnn"):
        key["width"] = p.gotu_width
    if kind == "fnn":
        key["depth"] = p.gotu_depth
    if kind == "deq_contractive":
        key["gamma"] = p.deq_gamma
    if kind == "dln":
        key["alpha"] = p.dln_alpha
    return f"gotu-{target}-{kind}-s{seed}", key


def gotu_model(p: Any, target: str, kind: str, seed: int) -> dict[str, Any]:
    from i2o.chapters.separation import gotu

    name, key = _gotu_key(p, target, kind, seed)
    return results.cached(FIGURE, name, key, lambda: gotu.train_model(
        kind, target, p.gotu_dim, p.gotu_train_size, p.gotu_width, p.gotu_depth, p.gotu_steps,
        p.gotu_lr, seed, p.dln_alpha, p.deq_gamma, p.heatmap_points), sources=GOTU_SOURCES)


def _gotu_deq_key(p: Any, target: str) -> tuple[str, dict[str, Any]]:
    name, key = _gotu_key(p, target, "deq_contractive", 0)
    key.pop("seed")
    return name.removesuffix("-s0"), {**key, "seeds": gotu_seeds(p)}


def gotu_deqs(p: Any, target: str) -> dict[str, np.ndarray]:
    """The ReLU DEQs of one GOTU target, every seed trained at once: arrays over seeds."""
    from i2o.chapters.separation import gotu

    name, key = _gotu_deq_key(p, target)
    return results.cached(FIGURE, name, key, lambda: gotu.train_deq_stack(
        target, p.gotu_dim, p.gotu_train_size, p.gotu_width, p.gotu_steps, p.gotu_lr,
        gotu_seeds(p), p.deq_gamma, p.heatmap_points), sources=GOTU_SOURCES)


def gotu_section(p: Any) -> dict[str, Any]:
    from i2o.chapters.separation import gotu

    out: dict[str, Any] = {}
    for target in gotu.TARGETS:
        entry: dict[str, Any] = {"prediction": {
            "bias": gotu.affine_prediction(target, p.gotu_dim, bias=True),
            "no_bias": gotu.affine_prediction(target, p.gotu_dim, bias=False)}}
        for kind in gotu.MODELS:
            if kind == "deq_contractive":
                stack = gotu_deqs(p, target)
                entry[kind] = {key: np.asarray(value) for key, value in stack.items()}
                entry[kind]["features"] = entry[kind]["features"][0]
                continue
            runs = [gotu_model(p, target, kind, seed) for seed in gotu_seeds(p)]
            entry[kind] = {key: np.array([r[key] for r in runs]) for key in runs[0]
                           if key != "features"}
            entry[kind]["features"] = runs[0]["features"]
        out[target] = entry
    return out


def frozen_section(p: Any) -> dict[str, Any]:
    """The frozen-coordinate task of Section 4 (:mod:`.frozen`) for every ``f̂(∅)`` of
    ``frozen_means`` and every seed: ``{"c<i>": {"mean", "prediction", "linear_deq": arrays over
    seeds, "dln": …}}`` (cached; seconds)."""
    from i2o.chapters.separation import frozen

    def compute() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, mean in enumerate(p.frozen_means):
            runs_ = [frozen.experiment(p.gotu_dim, float(mean), seed, p.dln_alpha, p.frozen_lr,
                                       p.frozen_steps, p.frozen_tol) for seed in gotu_seeds(p)]
            entry: dict[str, Any] = {"mean": float(mean), "prediction": runs_[0]["prediction"],
                                     "seen_variance": np.array([r["seen_variance"]
                                                                for r in runs_]),
                                     "seconds": float(sum(r["seconds"] for r in runs_))}
            for kind in ("linear_deq", "dln"):
                entry[kind] = {key: np.array([r[kind][key] for r in runs_])
                               for key in runs_[0][kind]}
            out[f"c{i}"] = entry
        return out

    return results.cached(FIGURE, "frozen", _frozen_key(p), compute, sources=FROZEN_SOURCES)


def _frozen_key(p: Any) -> dict[str, Any]:
    return {name: p[name] for name in ("gotu_seeds", "replicate", "gotu_dim", "dln_alpha",
                                       "frozen_means", "frozen_lr", "frozen_steps", "frozen_tol")}


# --- everything ---------------------------------------------------------------------------------

def collect(p: Any) -> dict[str, Any]:
    """Everything the chapter shows: ``{"sawtooth", "steep", "diagonal", "gotu", "seconds"}``.

    Jobs missing from the cache run first in ``p.workers`` local processes (one process: here)."""
    start = time.perf_counter()
    from i2o import sweep

    sweep.run_missing(FIGURE, all_jobs(p), is_cached, p.workers)
    out = {"sawtooth": sawtooth_section(p), "steep": steep_section(p),
           "diagonal": diagonal_section(p), "gotu": gotu_section(p),
           "frozen": frozen_section(p)}
    out["seconds"] = time.perf_counter() - start
    return out


def costs(r: dict[str, Any]) -> dict[str, float]:
    """Seconds recorded in the cache by the runs that computed each section's models (wall time
    of those runs, whichever process computed them; the sawtooth's Adam runs and its L-BFGS
    restarts), and of this collection."""
    targets = [value for key, value in r["sawtooth"].items() if key.startswith("k")]
    out = {"sawtooth": float(sum(np.sum(t["seconds"]) + np.sum(t["lbfgs"]["seconds"])
                                 for t in targets)),
           "steep": float(sum(np.sum(r["steep"][kind]["seconds"]) for kind in STEEP_MODELS)),
           "diagonal": float(r["diagonal"]["seconds"]),
           "gotu": float(sum(np.sum(r["gotu"][t][kind]["seconds"]) for t in r["gotu"]
                             for kind in r["gotu"][t] if kind != "prediction")),
           "frozen": float(sum(entry["seconds"] for entry in r["frozen"].values()))}
    out["collect"] = float(r["seconds"])
    return out


def _job_entries(name: str, p: Any) -> list[tuple[Callable[[], dict], Callable[[], dict | None]]]:
    """(compute, lookup) of every cache entry of job ``name``."""

    entries = []
    if name.startswith("sawtooth-k"):
        k = int(name.removeprefix("sawtooth-k"))
        for m in saw_models(p):
            for seed in model_seeds(p):
                key_name, key = _saw_key(p, k, *m, seed)
                entries.append((lambda m=m, seed=seed: saw_model(p, k, *m, seed),
                                lambda n=key_name, c=key: results.lookup(FIGURE, n, c,
                                                                         SAW_SOURCES)))
        for m in flops_models(p):
            for seed in model_seeds(p):
                key_name, key = _lbfgs_key(p, k, *m, seed)
                entries.append((lambda m=m, seed=seed: lbfgs_model(p, k, *m, seed),
                                lambda n=key_name, c=key: results.lookup(FIGURE, n, c,
                                                                         SAW_SOURCES)))
    elif name in steep_jobs(p):
        kind, dims = steep_jobs(p)[name]
        for d in dims:
            key_name, key = _steep_key(p, kind, d)
            entries.append((lambda d=d: steep_models(p, kind, d),
                            lambda n=key_name, c=key: results.lookup(FIGURE, n, c,
                                                                     STEEP_SOURCES)))
    elif name in gotu_jobs():
        target, kinds = gotu_jobs()[name]
        if kinds == ("deq_contractive",):
            key_name, key = _gotu_deq_key(p, target)
            entries.append((lambda: gotu_deqs(p, target),
                            lambda: results.lookup(FIGURE, key_name, key, GOTU_SOURCES)))
        for kind in (k for k in kinds if k != "deq_contractive"):
            for seed in gotu_seeds(p):
                key_name, key = _gotu_key(p, target, kind, seed)
                entries.append((lambda kind=kind, seed=seed: gotu_model(p, target, kind, seed),
                                lambda n=key_name, c=key: results.lookup(FIGURE, n, c,
                                                                         GOTU_SOURCES)))
    elif name == "diagonal":
        entries.append((lambda: diagonal_section(p),
                        lambda: results.lookup(FIGURE, "diagonal", _diagonal_key(p),
                                               DIAGONAL_SOURCES)))
    elif name == "frozen":
        entries.append((lambda: frozen_section(p),
                        lambda: results.lookup(FIGURE, "frozen", _frozen_key(p),
                                               FROZEN_SOURCES)))
    else:
        raise ValueError(f"unknown job {name!r} of figure {FIGURE!r}")
    return entries


def steep_jobs(p: Any) -> dict[str, tuple[str, list[int]]]:
    """Section 2's jobs: one per input dimension for the DEQs, one for every FNN (they are
    several times faster): name → (kind, dimensions)."""
    jobs = {f"steep-deq_lower-d{d}": ("deq_lower", [d]) for d in sorted(p.steep_dims,
                                                                        reverse=True)}
    return {**jobs, "steep-fnn": ("fnn", list(p.steep_dims))}


def gotu_jobs() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Section 4's jobs, per GOTU target one for its ReLU DEQs (the longest of the chapter) and
    one for its other models: name → (target, model kinds)."""
    from i2o.chapters.separation import gotu

    others = tuple(kind for kind in gotu.MODELS if kind != "deq_contractive")
    jobs: dict[str, tuple[str, tuple[str, ...]]] = {}
    for target in sorted(gotu.TARGETS, reverse=True):
        jobs[f"gotu-{target}-deq"] = (target, ("deq_contractive",))
    for target in sorted(gotu.TARGETS, reverse=True):
        jobs[f"gotu-{target}-others"] = (target, others)
    return jobs


def all_jobs(p: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every job of the chapter, ``(name, parameters)``, in the order the workers take them:
    the longest first (the GOTU DEQs, the sawtooth, Section 3's gradient flows, the DEQs of
    Section 2), so that the workers finish together."""
    check_params(p)
    gotu, steep = list(gotu_jobs()), list(steep_jobs(p))
    names = ([name for name in gotu if name.endswith("-deq")]
             + [f"sawtooth-k{k}" for k in p.saw_exponents] + ["diagonal"]
             + [name for name in steep if name != "steep-fnn"]
             + [name for name in gotu if not name.endswith("-deq")] + ["steep-fnn", "frozen"])
    return [(name, dict(p)) for name in names]


def run_job(name: str, job: dict[str, Any]) -> None:
    """Compute (or read) every cache entry of job ``name``."""
    for compute, _ in _job_entries(name, _Params(job)):
        compute()


def is_cached(name: str, job: dict[str, Any]) -> bool:
    return all(lookup() is not None for _, lookup in _job_entries(name, _Params(job)))


class _Params(dict):
    """A job's parameters with attribute access (what the section functions expect)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
