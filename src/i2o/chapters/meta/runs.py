"""Figure-level recipes of the meta-learning chapter, cached in :mod:`i2o.results`.

A *model* is one meta-training run: MAML with N inner steps or iMAML with λ and N, on tasks drawn
on the fly (Figure 3) or on a fixed training set of B meta-batches (Figure 4). Its final
meta-parameters are cached under a key made of every hyperparameter that determines them and of
the source of its training modules only (:func:`training_sources`), so that editing the
evaluation or plotting code never retrains; training checkpoints go to the key's checkpoint
directory, and a restarted run resumes there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from types import SimpleNamespace
from typing import Any

import jax
import numpy as np

from i2o import replicates, results
from i2o.chapters.meta import FIGURE, gradient_noise, imaml, maml, outer
from i2o.chapters.meta.mlp import Params, init_mlp
from i2o.chapters.meta.tasks import fixed_training_set

METHODS = ("maml", "imaml")
_COMMON_SOURCES = ("chapters.meta.__init__", "chapters.meta.tasks", "chapters.meta.mlp",
                   "chapters.meta.checkpoint", "chapters.meta.outer")


def training_sources(method: str) -> tuple[str, ...]:
    """The modules whose source keys a trained model in the cache: editing iMAML's code does not
    invalidate the MAML models, and vice versa."""
    return (*_COMMON_SOURCES, f"chapters.meta.{method}")


def sweep_sources(method: str) -> tuple[str, ...]:
    """The modules whose source keys a model's test-time sweep."""
    return (*training_sources(method), "chapters.meta.evaluate")


@dataclass(frozen=True)
class ModelSpec:
    """Everything that determines a meta-trained model.

    ``n_meta_batches=None``: tasks drawn on the fly (Figure 3); an integer B: a fixed training set
    of B meta-batches drawn once from the seed (Figure 4), cycled through in order.
    """

    method: str
    inner_steps: int
    outer_steps: int
    regularization: float = 2.0  # λ (iMAML only)
    step_size: float = 0.01  # α (MAML only)
    cg_maxiter: int = 5  # iMAML only
    acceleration: bool = False  # iMAML only: jaxopt's FISTA momentum in the inner solver
    n_meta_batches: int | None = None
    meta_batch_size: int = 25
    learning_rate: float = 1e-3
    hidden: tuple[int, ...] = (40, 40)
    normalization: str = "none"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        if self.n_meta_batches is not None and (
                not isinstance(self.n_meta_batches, int) or self.n_meta_batches < 1):
            raise ValueError(f"n_meta_batches must be None or an integer ≥ 1; "
                             f"got {self.n_meta_batches!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer ≥ 0; got {self.seed!r}")
        self.config()  # validates N, λ, α, CG iterations
        outer.OuterConfig(self.outer_steps, self.learning_rate)

    @property
    def name(self) -> str:
        data = "online" if self.n_meta_batches is None else f"set{self.n_meta_batches}"
        extra = (f"-lam{self.regularization:g}{'-fista' if self.acceleration else ''}"
                 if self.method == "imaml" else "")
        norm = "" if self.normalization == "none" else f"-{self.normalization}"
        return f"{self.method}-N{self.inner_steps}{extra}{norm}-{data}-seed{self.seed}"

    def config(self) -> maml.MAMLConfig | imaml.IMAMLConfig:
        if self.method == "maml":
            return maml.MAMLConfig(self.inner_steps, self.step_size, self.normalization)
        return imaml.IMAMLConfig(regularization=self.regularization,
                                 inner_steps=self.inner_steps, cg_maxiter=self.cg_maxiter,
                                 acceleration=self.acceleration,
                                 normalization=self.normalization)

    def key_params(self) -> dict[str, Any]:
        """The hyperparameters of this model (only those its method uses)."""
        params = asdict(self)
        params["hidden"] = list(self.hidden)
        drop = (("regularization", "cg_maxiter", "acceleration") if self.method == "maml"
                else ("step_size",))
        for name in drop:
            params.pop(name)
        return params

    def keys(self) -> tuple[jax.Array, jax.Array]:
        """(initialization key, task key), both derived from the seed."""
        init_key, task_key = jax.random.split(jax.random.PRNGKey(self.seed))
        return init_key, task_key

    def training_set(self):
        """The fixed training set of Figure 4 (``None`` for tasks drawn on the fly)."""
        if self.n_meta_batches is None:
            return None
        return fixed_training_set(self.keys()[1], self.n_meta_batches, self.meta_batch_size)


def meta_loss_fn(spec: ModelSpec) -> outer.MetaLoss:
    config = spec.config()
    if spec.method == "maml":
        return lambda params, tasks: maml.meta_loss(params, tasks, config)
    return lambda params, tasks: imaml.meta_loss(params, tasks, config)


def train_uncached(spec: ModelSpec, checkpoint_dir=None, log: Callable[[str], None] | None = None,
                   checkpoint_every: int = 1000, stop_at: int | None = None) -> outer.TrainResult:
    """Meta-train ``spec`` (resuming from ``checkpoint_dir`` if it holds a checkpoint)."""
    init_key, task_key = spec.keys()
    training_set = spec.training_set()
    source = (outer.online_tasks(task_key, spec.meta_batch_size) if training_set is None
              else outer.cycled_tasks(training_set))
    config = outer.OuterConfig(spec.outer_steps, spec.learning_rate, checkpoint_every)
    return outer.train(meta_loss_fn(spec), source, init_mlp(init_key, spec.hidden), config,
                       checkpoint_dir=checkpoint_dir, log=log, stop_at=stop_at)


def train_model(spec: ModelSpec, log: Callable[[str], None] | None = None,
                checkpoint_every: int = 1000) -> dict[str, Any]:
    """The cached result of meta-training ``spec``: ``{"params": {...}, "losses", "seconds",
    "seconds_per_step", "cpu_seconds_per_step", "resumed_from"}`` (times are those of the run
    that computed it; ``seconds_per_step`` is wall time with compilation, ``cpu_seconds_per_step``
    the CPU time of an outer step once compiled, NaN when every chunk compiled)."""

    def compute() -> dict[str, Any]:
        directory = results.checkpoint_dir(FIGURE, f"train-{spec.name}", spec.key_params(),
                                           sources=training_sources(spec.method))
        start = time.perf_counter()
        result = train_uncached(spec, directory, log, checkpoint_every)
        seconds = time.perf_counter() - start
        steps_run = result.steps_done - result.resumed_from
        return {"params": {k: np.asarray(v) for k, v in result.params.items()},
                "losses": result.losses, "seconds": seconds,
                "seconds_per_step": seconds / max(steps_run, 1),
                "cpu_seconds_per_step": (result.steady_cpu_seconds / result.steady_steps
                                         if result.steady_steps else float("nan")),
                "resumed_from": result.resumed_from}

    return results.cached(FIGURE, f"train-{spec.name}", spec.key_params(), compute,
                          sources=training_sources(spec.method))


def params_of(trained: dict[str, Any]) -> Params:
    """The meta-parameters of a :func:`train_model` result as JAX arrays."""
    return {k: jax.numpy.asarray(v) for k, v in trained["params"].items()}


# --- Figures 3 and 4: test-time sweeps of the trained models -------------------------------------

def _sweep_setting(p: Any, spec: ModelSpec) -> tuple[np.ndarray, dict[str, Any]]:
    """The grid of N + ΔN and the description of the swept tasks for one model."""
    from i2o.chapters.meta import evaluate

    if spec.n_meta_batches is None:
        max_steps = p.maml_max_test_steps if spec.method == "maml" else p.imaml_max_test_steps
        description = {"test_seed": tasks_seed(p), "n_test_tasks": p.n_test_tasks}
        if spec.method == "imaml":  # the convergence reference of "best before convergence"
            description["reference_iters"] = p.reference_iters
    else:
        max_steps = p.fig4_max_test_steps
        description = {"tasks": "training set"}
    grid = evaluate.step_grid(max(max_steps, spec.inner_steps), p.grid_points_per_decade,
                              include=(spec.inner_steps,))
    return grid, description


def _sweep_key(spec: ModelSpec, grid: np.ndarray, description: dict[str, Any]) -> dict[str, Any]:
    return {**spec.key_params(), **description, "grid": [int(k) for k in grid]}


def _evaluate(spec: ModelSpec, trained: dict[str, Any], tasks, grid: np.ndarray,
              task_description: dict[str, Any]) -> dict[str, Any]:
    """Cached per-task curves of one trained model on ``tasks`` over ``grid``."""
    from i2o.chapters.meta import evaluate

    key = _sweep_key(spec, grid, task_description)

    def compute() -> dict[str, Any]:
        start = time.perf_counter()
        curves = evaluate.adaptation_curves(
            spec.method, params_of(trained), tasks, grid, spec.config(),
            reference_iters=int(task_description.get("reference_iters", 0)))
        return {**curves, "seconds": time.perf_counter() - start}

    curves = results.cached(FIGURE, f"eval-{spec.name}", key, compute,
                            sources=sweep_sources(spec.method))
    return {**curves, "grid": np.asarray(grid), "method": spec.method,
            "normalization": spec.normalization, "seed": spec.seed,
            "inner_steps": spec.inner_steps, "outer_steps": spec.outer_steps,
            "train_losses": trained["losses"],
            "train_seconds_per_step": trained["seconds_per_step"],
            "train_cpu_seconds_per_step": trained.get("cpu_seconds_per_step", float("nan"))}


def tasks_seed(p: Any) -> int:
    """The seed of the fixed test tasks (Figure 3) and of the floor's tasks at the replicate."""
    return replicates.seed(p.test_seed, p.replicate)


def check_params(p: Any) -> None:
    """What the manifest's per-parameter schema cannot say; raises ``ParameterError`` before any
    compute."""
    from i2o.profiles import ParameterError

    for name in ("maml_inner_steps", "fig4_meta_batches", "fig4_seeds"):
        values = list(p[name])
        if len(set(values)) != len(values):
            raise ParameterError(f"parameter {name!r} of figure 'meta' must not repeat a value; "
                                 f"got {values}")
    if len(p.fig4_meta_batches) < 2:
        raise ParameterError("parameter 'fig4_meta_batches' of figure 'meta' needs at least 2 "
                             f"training-set sizes to order; got {p.fig4_meta_batches}")


def _maml(p: Any, n: int, normalization: str) -> ModelSpec:
    return ModelSpec("maml", n, p.maml_outer_steps, step_size=p.maml_step_size,
                     meta_batch_size=p.meta_batch_size, learning_rate=p.learning_rate,
                     normalization=normalization, seed=replicates.seed(p.seed, p.replicate))


def _imaml(p: Any, outer_steps: int, n_meta_batches: int | None, seed: int) -> ModelSpec:
    return ModelSpec("imaml", p.imaml_inner_steps, outer_steps,
                     regularization=p.imaml_regularization, cg_maxiter=p.cg_maxiter,
                     acceleration=p.imaml_acceleration, n_meta_batches=n_meta_batches,
                     meta_batch_size=p.meta_batch_size, learning_rate=p.learning_rate,
                     normalization=p.normalization, seed=seed)


def figure3_specs(p: Any) -> list[ModelSpec]:
    """The Figure 3 models of a parameter set ``p`` (see the ``meta`` entry of figures.yaml)."""
    return ([_maml(p, n, p.normalization) for n in p.maml_inner_steps]
            + [_imaml(p, p.imaml_outer_steps, None, replicates.seed(p.seed, p.replicate))])


def figure4_specs(p: Any) -> list[ModelSpec]:
    """One iMAML model per (training-set size, seed): each seed draws its own training set."""
    return [_imaml(p, p.fig4_outer_steps, b, seed)
            for b in p.fig4_meta_batches for seed in replicates.seeds(p.fig4_seeds, p.replicate)]


def ablation_specs(p: Any) -> list[ModelSpec]:
    """The normalization ablation: the first Figure 3 MAML model with
    ``ablation_normalization`` (none when it equals the chapter's normalization)."""
    if p.ablation_normalization == p.normalization:
        return []
    return [_maml(p, p.maml_inner_steps[0], p.ablation_normalization)]


def all_specs(p: Any) -> list[ModelSpec]:
    return figure3_specs(p) + figure4_specs(p) + ablation_specs(p)


def train_and_sweep(p: Any, spec: ModelSpec,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train ``spec`` (or read it from the cache) and sweep it: on the ``n_test_tasks`` fixed test
    tasks for a model trained on tasks drawn on the fly (Figure 3), on its own training tasks
    for a model trained on a fixed set (Figure 4)."""
    from i2o.chapters.meta.tasks import flatten_batches, sample_tasks

    grid, description = _sweep_setting(p, spec)
    trained = train_model(spec, log, p.checkpoint_every)
    tasks = (sample_tasks(jax.random.PRNGKey(tasks_seed(p)), p.n_test_tasks)
             if spec.n_meta_batches is None else flatten_batches(spec.training_set()))
    return _evaluate(spec, trained, tasks, grid, description)


def figure3(p: Any, log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Test-MSE curves of every Figure 3 model on ``n_test_tasks`` fixed test tasks."""
    return {spec.name: train_and_sweep(p, spec, log) for spec in figure3_specs(p)}


def ablation(p: Any, log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Test-MSE curves of the normalization-ablation models."""
    return {spec.name: train_and_sweep(p, spec, log) for spec in ablation_specs(p)}


def bn_floor(p: Any) -> dict[str, float]:
    """The per-set-BN floor (:mod:`i2o.chapters.meta.floor`), cached: ``{"centred", "standardized",
    "standard_error", "target_variance", "task_agnostic", "seconds"}``."""
    from i2o.chapters.meta import floor

    def compute() -> dict[str, float]:
        start = time.perf_counter()
        values = floor.per_set_bn_floor(n_tasks=p.floor_tasks, seed=tasks_seed(p))._asdict()
        return {**values, "task_agnostic": floor.task_agnostic_mse(),
                "seconds": time.perf_counter() - start}

    stored = results.cached(FIGURE, "bn-floor", {"n_tasks": p.floor_tasks, "seed": tasks_seed(p)},
                            compute, sources=("chapters.meta.floor", "chapters.meta.tasks"))
    return {k: float(v) for k, v in stored.items()}


def noise_regularizations(p: Any) -> list[float]:
    """The λ of the iMAML meta-gradients measured at initialization: the chapter's own and
    ``noise_regularizations``, ascending."""
    return sorted({float(p.imaml_regularization), *map(float, p.noise_regularizations)})


def meta_gradient_noise(p: Any) -> dict[str, dict[str, float]]:
    """Signal and noise of the hidden layers' meta-gradient (:mod:`.gradient_noise`) at the
    chapter's initialization, over the first ``noise_batches`` meta-batches its online models
    train on, cached: ``{row: {"signal", "noise", "ratio", "n_batches"}}`` for the query loss
    without adaptation (``first-order``), MAML with the first ``maml_inner_steps`` and iMAML at
    each λ of :func:`noise_regularizations` (with the chapter's solver)."""
    reference = _maml(p, p.maml_inner_steps[0], p.normalization)
    lambdas = noise_regularizations(p)
    key = {"seed": reference.seed, "n_batches": p.noise_batches,
           "meta_batch_size": p.meta_batch_size, "hidden": list(reference.hidden),
           "normalization": p.normalization, "maml_inner_steps": reference.inner_steps,
           "maml_step_size": p.maml_step_size, "imaml_inner_steps": p.imaml_inner_steps,
           "cg_maxiter": p.cg_maxiter, "acceleration": p.imaml_acceleration,
           "regularizations": lambdas}

    def compute() -> dict[str, dict[str, float]]:
        init_key, task_key = reference.keys()
        params = init_mlp(init_key, reference.hidden)
        source = outer.online_tasks(task_key, p.meta_batch_size)
        batches = [source(jax.numpy.asarray(k)) for k in range(p.noise_batches)]
        losses = {"first-order": gradient_noise.first_order_loss,
                  f"maml-N{reference.inner_steps}": meta_loss_fn(reference)}
        imaml_spec = _imaml(p, 1, None, reference.seed)
        for lam in lambdas:
            losses[gradient_noise.imaml_row(lam)] = meta_loss_fn(
                replace(imaml_spec, regularization=lam))
        return {row: gradient_noise.measure(loss, params, batches)._asdict()
                for row, loss in losses.items()}

    sources = ("chapters.meta.gradient_noise", *training_sources("maml"),
               "chapters.meta.imaml")
    return results.cached(FIGURE, "gradient-noise", key, compute, sources=sources)


def print_costs(computed: dict[str, Any]) -> None:
    """One line per model: outer steps, time per outer step, final meta-loss, sweep time."""
    for section in ("figure3", "figure4", "ablation"):
        for name, c in computed[section].items():
            print(f"{name:40s} outer steps {c['outer_steps']:6d}  "
                  f"{1e3 * c['train_seconds_per_step']:7.2f} ms/outer step (wall, with "
                  f"compilation), {1e3 * c.get('train_cpu_seconds_per_step', np.nan):6.2f} ms "
                  "of CPU once compiled  "
                  f"final meta-loss {np.mean(c['train_losses'][-100:]):.3f}  "
                  f"sweep {c['seconds']:.1f} s over {c['query'].shape[0]} tasks")
    print(f"per-set-BN floor: {computed['floor']['seconds']:.1f} s")


def collect(p: Any, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Everything the chapter shows: ``{"figure3", "figure4", "ablation", "floor", "noise"}``.

    Models missing from the cache are first trained and swept in ``p.workers`` local processes
    (:func:`i2o.sweep.run_jobs`); everything is then read from the cache."""
    from i2o import sweep

    results.jax_compilation_cache()
    sweep.run_missing(FIGURE, all_jobs(p), is_cached, p.workers)
    return {"figure3": figure3(p, log), "figure4": figure4(p, log),
            "ablation": ablation(p, log), "floor": bn_floor(p), "noise": meta_gradient_noise(p)}


def figure4(p: Any, log: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Training-loss curves (query loss on the model's own training tasks) and D(N, ΔN)."""
    from i2o.chapters.meta import evaluate

    out = {}
    for spec in figure4_specs(p):
        curves = train_and_sweep(p, spec, log)
        grid = curves["grid"]
        finite = np.all(np.isfinite(curves["query"]), axis=1)  # see claims.finite_tasks
        mean = curves["query"][finite].mean(axis=0)
        curves["n_diverged"] = int((~finite).sum())
        curves["n_meta_batches"] = spec.n_meta_batches
        curves["loss_at_n"] = float(mean[list(grid).index(spec.inner_steps)])
        curves["increase"] = evaluate.loss_increase(mean, grid, spec.inner_steps)
        out[spec.name] = curves
    return out


def _cached_entries(p: Any, spec: ModelSpec) -> tuple[dict | None, dict | None]:
    """The model's training and sweep entries in the results cache (``None`` where missing),
    without computing anything."""
    trained = results.lookup(FIGURE, f"train-{spec.name}", spec.key_params(),
                             training_sources(spec.method))
    swept = results.lookup(FIGURE, f"eval-{spec.name}", _sweep_key(spec, *_sweep_setting(p, spec)),
                           sweep_sources(spec.method))
    return trained, swept


def recorded_cost(p: Any) -> dict[str, Any]:
    """Wall time recorded in the results cache for a parameter set, without computing anything:
    ``{"training": {name: s}, "sweeps": {name: s}, "missing": [names], "total": s}``.

    A training time is that of the run that finished the model (a resumed run records only its
    own part); a missing entry has not been computed (or was computed by other code)."""

    cost: dict[str, Any] = {"training": {}, "sweeps": {}, "missing": []}
    for spec in all_specs(p):
        trained, swept = _cached_entries(p, spec)
        if trained is None:
            cost["missing"].append(f"train-{spec.name}")
            continue
        cost["training"][spec.name] = float(trained["seconds"])
        if swept is None:
            cost["missing"].append(f"eval-{spec.name}")
        else:
            cost["sweeps"][spec.name] = float(swept["seconds"])
    cost["total"] = sum(cost["training"].values()) + sum(cost["sweeps"].values())
    return cost


# --- scale-out: one job per model (python -m i2o.sweep meta) -------------------------------------

def _spec_named(name: str, p: Any) -> ModelSpec:
    return {spec.name: spec for spec in all_specs(p)}[name]


def all_jobs(p: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every model of Figures 3 and 4 as a job ``(name, figure parameters)``: a job trains the
    model and runs its test-time sweep, exactly the cache entries the notebook reads."""
    check_params(p)
    return [(spec.name, dict(p)) for spec in all_specs(p)]


def run_job(name: str, job: dict[str, Any], log: Callable[[str], None] | None = print) -> None:
    """Train model ``name`` of the figure parameters ``job`` (resuming its checkpoint) and
    sweep it."""
    results.jax_compilation_cache()
    p = SimpleNamespace(**job)
    train_and_sweep(p, _spec_named(name, p), log)


def is_cached(name: str, job: dict[str, Any]) -> bool:
    """Whether both the trained model and its sweep are in the cache."""
    p = SimpleNamespace(**job)
    return None not in _cached_entries(p, _spec_named(name, p))
