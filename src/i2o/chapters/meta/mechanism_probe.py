r"""What the outer loop sees at one checkpoint of a Figure 4 iMAML model, and the job that records
it at every checkpoint (issue 49: the models whose outer training loss rose late in training).

At meta-parameters θ (float64, as in training), with

    L(θ) = (1/B) Σ_b meta_loss(θ, meta-batch b)        (:func:`.outer.fixed_set_loss`)

the outer training loss over the model's fixed set of B meta-batches (what the best-point tracker
reads) and ĝ the hypergradient the training uses, averaged over the set (``jax.grad`` of the same
``meta_loss``, the implicit IFT gradient of :mod:`.imaml`, mean over the B meta-batches),
:func:`probe` measures:

- ``grad_norm`` ‖ĝ‖ and ``probed_loss`` L(θ) (the value the outer loop records there);
- along d = −ĝ/‖ĝ‖: ``slope_implicit`` ⟨ĝ, d⟩ (= −‖ĝ‖, the slope ĝ predicts) and ``slope_fd``,
  ``slope_fd_half``, the central differences (L(θ + εd) − L(θ − εd))/2ε at the two ε below
  (:func:`epsilons`);
- the same three along the unit direction of the update Adam would take from the checkpointed
  Adam state if ĝ were its next gradient (``adam_slope_implicit``, ``adam_slope_fd``,
  ``adam_slope_fd_half``; optax's update is a pure function, so the state is not changed);
- ``descent_fd`` (and ``adam_descent_fd``): 1 when both central differences are < 0 (the
  direction lowers the actual L), 0 when both are ≥ 0, NaN when they disagree or one is not
  finite (the two step lengths do not settle it);
- ``lambda_min`` = min over the tasks of the first meta-batch of λ_min(∇²ℓ_s(θ_N)) + λ, with θ_N
  the inner solution iMAML's forward pass computes (:func:`.imaml.adapt_tasks`) and ℓ_s the task's
  support MSE, i.e. the smallest eigenvalue of the Hessian of the inner objective F at θ_N;
  ``indefinite_share`` the share of those tasks where it is ≤ 0 (F not strongly convex there,
  the IFT system ill-posed); ``lambda_min_residual`` the largest residual ‖Hv − μv‖ of the Ritz
  pairs (an eigenvalue of H lies within it of each estimate);
- ``last_trial_share``: share of the inner iterations (every task of the set × N) whose
  backtracking line search made its last allowed trial (``max_line_search`` halvings, after
  which :mod:`.descent` and jaxopt take the trial whatever its value), and
  ``unaccepted_share`` the share where that last trial still failed the sufficient-decrease test;
- ``probe_seconds`` its wall time.

**The step lengths ε.** Along a unit direction, ε is a Euclidean distance in parameter space.
An Adam step moves each of the d coordinates by at most about the learning rate η, so
η√d (≈ 0.042 at the paper's η = 10⁻³, d = 1,761) is the length of a full Adam step; ε = η√d/10
and η√d/20 (:data:`EPSILON_FRACTIONS`; 4.2·10⁻³ and 2.1·10⁻³ at the paper's size) measure the
slope well inside one step, i.e. the direction's own quality and not the step's length
(mechanism (b)). Much smaller ε measure the jumps of L, not its slope: the computed L is only
piecewise continuous (the line search's accept/reject switches over the B × 25 tasks × N inner
iterations make it jump). Measured along −ĝ for a model with B = 2, N = 16, λ = 8, seed 0 after
200 outer steps, L jumped by about 10⁻⁴ every 10⁻⁵ or so; ε = 10⁻⁴ and 5·10⁻⁵ gave slopes −0.46
and −2.1 (and +0.28 and −0.28 along Adam's direction) where ĝ predicts −0.56 (−0.25), while every
ε from 10⁻³ to 4·10⁻² gave −0.49 to −0.59 (−0.24 to −0.32). The central difference cancels
the quadratic term (truncation O(ε²)); a jump of size J between the two points errs by J/2ε.
The two ε a factor 2 apart must agree on the sign, and ``descent_fd`` is NaN when they do not.

**λ_min by Rayleigh–Ritz on a Krylov basis.** H = ∇²ℓ_s(θ_N) is never formed: an orthonormal
basis Q of the Krylov space of H (Hessian–vector products, :data:`KRYLOV_DIMENSION` of them, full
re-orthogonalization, restarted on a fresh random vector if the space becomes invariant) gives
T = QᵀHQ, whose smallest eigenvalue is the estimate. By Cauchy interlacing it is never below the
true λ_min (a Ritz value lies in the spectrum's hull), so ``indefinite_share`` can only be
under-counted; the residual says how far off it may be. Every task of the first meta-batch (at most
``meta_batch_size`` = 25 tasks at the paper's size) is probed, a fixed, deterministic subset.

**Counting line-search trials**: :func:`counted_run` scans :func:`.descent.searched_step`, the
iteration of :func:`.descent.run` (gradient step from the carried step size, halving until the
sufficient-decrease test holds or ``maxls`` halvings were made), and keeps each iteration's
halvings and whether its test held; its iterates are those of :func:`.descent.run` (tested here;
``descent.run`` is tested against jaxopt).

:class:`MechanismRun` is the job: one Figure 4 model trained checkpoint by checkpoint (the same
trajectory as the model's own job, :mod:`.outer` resumes bit-identically) and probed at each
checkpoint's last parameters and Adam state. A probe took about 0.8, 1.5 and 2.1 s of one CPU
core at B = 1, 5 and 10 (N = 16, 25 tasks per meta-batch), after a compilation of 12 to 14 s. The
rule that reads the probes is in
:mod:`.mechanism` (not in this module, so that editing it recomputes no probe).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from i2o.chapters.meta import FIGURE, checkpoint, descent, imaml, outer
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.chapters.meta.mlp import Params, init_mlp, mse
from i2o.chapters.meta.tasks import TaskBatch, flatten_batches
from i2o.compute import results
from i2o.compute.job import Job

#: Step lengths of the central differences, as fractions of the length η√d of an Adam step.
EPSILON_FRACTIONS: tuple[float, float] = (0.1, 0.05)
#: Hessian–vector products per task of the Rayleigh–Ritz estimate of λ_min.
KRYLOV_DIMENSION = 64
#: A new Krylov vector shorter than this fraction of H·q is treated as a breakdown (restart).
BREAKDOWN = 1e-8
#: Seed of the Krylov start and restart vectors (fixed: a probe is deterministic).
KRYLOV_SEED = 0
#: The fields of a probe, in order (every value a float).
FIELDS = ("probed_loss", "grad_norm", "slope_implicit", "slope_fd", "slope_fd_half",
          "descent_fd", "adam_slope_implicit", "adam_slope_fd", "adam_slope_fd_half",
          "adam_descent_fd", "lambda_min", "indefinite_share", "lambda_min_residual",
          "last_trial_share", "unaccepted_share", "probe_seconds")

Objective = Callable[..., jax.Array]


# -- the inner iteration, counting line-search halvings -------------------------------------------

def counted_run(fun: Objective, x0: jax.Array, steps: int, maxls: int, acceleration: bool,
                *args) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(x_steps, halvings, satisfied)``: :func:`.descent.run`'s iterate and, per iteration, the
    halvings of its line search and whether the point taken passed the test (arrays of length
    ``steps``)."""

    def one(state: descent.DescentState, _: None
            ) -> tuple[descent.DescentState, tuple[jax.Array, jax.Array]]:
        new_state, search = descent.searched_step(fun, state, maxls, acceleration, *args)
        return new_state, (search.halvings, search.satisfied)

    final, (halvings, satisfied) = jax.lax.scan(one, descent.init(x0), None, length=steps)
    return final.params, halvings, satisfied


# -- the smallest eigenvalue of a Hessian ----------------------------------------------------------

class RitzEstimate(NamedTuple):
    """The smallest Ritz value μ of a symmetric operator on a Krylov basis, and ‖Hv − μv‖ of its
    unit Ritz vector v (an eigenvalue lies within it of μ)."""

    value: jax.Array
    residual: jax.Array


def _orthogonalized(vector: jax.Array, basis: jax.Array) -> jax.Array:
    """``vector`` minus its projection on the rows of ``basis`` (orthonormal or zero rows),
    twice (classical Gram–Schmidt repeated, orthogonal to working precision)."""
    once = vector - basis.T @ (basis @ vector)
    return once - basis.T @ (basis @ once)


def smallest_eigenvalue(matvec: Callable[[jax.Array], jax.Array], dimension: int,
                        key: jax.Array, krylov_dimension: int = KRYLOV_DIMENSION) -> RitzEstimate:
    """Rayleigh–Ritz estimate of λ_min of the symmetric operator ``matvec`` on ℝ^dimension.

    Builds an orthonormal basis q_1 … q_k (k = min(``krylov_dimension``, ``dimension``)) of the
    Krylov space of a random start: q_{j+1} is H q_j orthogonalized against q_1 … q_j (twice),
    or a fresh random vector orthogonalized against them when that leaves less than
    :data:`BREAKDOWN` of ‖H q_j‖ (the space is invariant; its complement is then invariant too).
    Returns the smallest eigenvalue μ of T = QᵀHQ (Q's rows the q_j) and the residual of its
    Ritz vector: μ ≥ λ_min(H) always, with equality once the basis holds the eigenvector."""
    size = min(krylov_dimension, dimension)
    keys = jax.random.split(key, size + 1)
    start = jax.random.normal(keys[0], (dimension,))
    start = start / jnp.linalg.norm(start)
    basis0 = jnp.zeros((size, dimension)).at[0].set(start)
    images0 = jnp.zeros((size, dimension))

    def extend(j: int, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        basis, images = carry
        image = matvec(basis[j])
        images = images.at[j].set(image)
        following = _orthogonalized(image, basis)
        draw = jax.random.normal(keys[j + 1], (dimension,))
        fresh = draw - basis.T @ (basis @ draw)  # a random vector needs one pass
        broke = jnp.linalg.norm(following) <= BREAKDOWN * jnp.linalg.norm(image)
        chosen = jnp.where(broke, fresh, following)
        chosen = chosen / jnp.linalg.norm(chosen)
        basis = jnp.where(j + 1 < size, basis.at[jnp.minimum(j + 1, size - 1)].set(chosen),
                          basis)
        return basis, images

    basis, images = jax.lax.fori_loop(0, size, extend, (basis0, images0))
    projected = basis @ images.T
    projected = 0.5 * (projected + projected.T)
    values, vectors = jnp.linalg.eigh(projected)
    ritz = vectors[:, 0]
    residual = jnp.linalg.norm(images.T @ ritz - values[0] * (basis.T @ ritz))
    return RitzEstimate(values[0], residual)


def support_hessian_minimum(theta: jax.Array, x: jax.Array, y: jax.Array, context: jax.Array,
                            unravel: Callable[[jax.Array], Params], normalization: str,
                            key: jax.Array, krylov_dimension: int = KRYLOV_DIMENSION
                            ) -> RitzEstimate:
    """:func:`smallest_eigenvalue` of ∇²ℓ_s at ``theta`` (flat), ℓ_s the support MSE of one task
    (``context``: the task's query inputs, read by ``joint_bn`` only), by Hessian–vector
    products (forward over reverse)."""

    def support_loss(point: jax.Array) -> jax.Array:
        return mse(unravel(point), x, y, normalization, context)

    def hessian_vector(vector: jax.Array) -> jax.Array:
        return jax.jvp(jax.grad(support_loss), (theta,), (vector,))[1]

    return smallest_eigenvalue(hessian_vector, theta.shape[0], key, krylov_dimension)


# -- one probe -------------------------------------------------------------------------------------

class ProbeFunctions(NamedTuple):
    """A model's compiled pieces of a probe (:func:`probe_functions`)."""

    loss: Callable[[Params], jax.Array]
    gradient: Callable[[Params], Params]
    curvatures: Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array]]
    line_searches: Callable[[jax.Array], tuple[jax.Array, jax.Array]]


def _check_probed(model: IMAMLModel) -> TaskBatch:
    """The model's fixed training set; ``ValueError`` for a model a probe does not apply to."""
    if not isinstance(model, IMAMLModel):
        raise ValueError(f"only iMAML models are probed; got {type(model).__name__}")
    training_set = model.training_set()
    if training_set is None:
        raise ValueError(f"{model.label}: only a model on a fixed training set (Figure 4) has "
                         "an outer training loss L to probe")
    return training_set


@functools.cache
def probe_functions(model: IMAMLModel) -> ProbeFunctions:
    """L, ĝ, the per-task curvatures of the first meta-batch (λ_min + λ, the Ritz residual, and
    the inner solutions θ_N) and the line-search counts over every task of the set, compiled
    once per model."""
    training_set = _check_probed(model)
    config = model.config()
    meta_loss = model.meta_loss()
    unravel = ravel_pytree(init_mlp(model.random_keys()[0], model.hidden))[1]
    first = jax.tree_util.tree_map(lambda a: a[0], training_set)
    every_task = flatten_batches(training_set)
    key = jax.random.PRNGKey(KRYLOV_SEED)

    @jax.jit
    def gradient(params: Params) -> Params:
        per_batch = jax.lax.map(lambda batch: jax.grad(meta_loss)(params, batch), training_set)
        return jax.tree_util.tree_map(lambda g: jnp.mean(g, axis=0), per_batch)

    @jax.jit
    def curvatures(theta: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        solutions = imaml.adapt_tasks(theta, first.x_support, first.y_support, first.x_query,
                                      config, unravel, batched=False)
        estimates = jax.vmap(lambda solution, x, y, context: support_hessian_minimum(
            solution, x, y, context, unravel, config.normalization, key))(
            solutions, first.x_support, first.y_support, first.x_query)
        return estimates.value + config.regularization, estimates.residual, solutions

    objective = imaml.inner_objective(config, unravel)

    @jax.jit
    def line_searches(theta: jax.Array) -> tuple[jax.Array, jax.Array]:
        def one(x: jax.Array, y: jax.Array, context: jax.Array) -> tuple[jax.Array, jax.Array]:
            _, halvings, satisfied = counted_run(objective, theta, config.inner_steps,
                                                 config.max_line_search, config.acceleration,
                                                 theta, x, y, context)
            return halvings, satisfied

        return jax.vmap(one)(every_task.x_support, every_task.y_support, every_task.x_query)

    return ProbeFunctions(outer.fixed_set_loss(meta_loss, training_set), gradient, curvatures,
                          line_searches)


def central_difference(loss: Callable[[Params], jax.Array], theta: jax.Array,
                       unravel: Callable[[jax.Array], Params], direction: jax.Array,
                       epsilon: float) -> float:
    """(L(θ + εd) − L(θ − εd)) / 2ε."""
    ahead = float(loss(unravel(theta + epsilon * direction)))
    behind = float(loss(unravel(theta - epsilon * direction)))
    return (ahead - behind) / (2.0 * epsilon)


def epsilons(learning_rate: float, dimension: int) -> tuple[float, float]:
    """The two step lengths ε of the central differences: :data:`EPSILON_FRACTIONS` of η√d."""
    step = learning_rate * math.sqrt(dimension)
    return step * EPSILON_FRACTIONS[0], step * EPSILON_FRACTIONS[1]


def descends(slopes: Sequence[float]) -> float:
    """1.0 when every slope is < 0, 0.0 when every slope is ≥ 0, NaN otherwise (they disagree,
    or one is not finite)."""
    values = np.asarray(slopes, dtype=float)
    if not np.all(np.isfinite(values)):
        return math.nan
    if np.all(values < 0):
        return 1.0
    if np.all(values >= 0):
        return 0.0
    return math.nan


def _unit(vector: jax.Array) -> jax.Array:
    return vector / jnp.linalg.norm(vector)


def _slopes(functions: ProbeFunctions, theta: jax.Array, unravel: Callable[[jax.Array], Params],
            gradient: jax.Array, direction: jax.Array, steps: Sequence[float], prefix: str
            ) -> dict[str, float]:
    """⟨ĝ, d⟩, the central differences at each ε of ``steps`` and whether they say d
    descends."""
    differences = [central_difference(functions.loss, theta, unravel, direction, eps)
                   for eps in steps]
    return {f"{prefix}slope_implicit": float(jnp.vdot(gradient, direction)),
            f"{prefix}slope_fd": differences[0], f"{prefix}slope_fd_half": differences[1],
            f"{prefix}descent_fd": descends(differences)}


def probe(model: IMAMLModel, params: Params, opt_state: Any) -> dict[str, float]:
    """The fields of the module docstring (:data:`FIELDS`) at meta-parameters ``params`` with
    the Adam state ``opt_state`` of the model's outer loop (optax's ``adam`` at its learning
    rate; the state is read, not changed)."""
    start = time.perf_counter()
    functions = probe_functions(model)
    params = {name: jnp.asarray(value, jnp.float64) for name, value in params.items()}
    theta, unravel = ravel_pytree(params)
    gradient_tree = functions.gradient(params)
    gradient = ravel_pytree(gradient_tree)[0]
    updates, _ = optax.adam(model.learning_rate).update(gradient_tree, opt_state, params)
    steps = epsilons(model.learning_rate, theta.shape[0])
    along_gradient = _slopes(functions, theta, unravel, gradient, _unit(-gradient), steps, "")
    along_adam = _slopes(functions, theta, unravel, gradient,
                         _unit(ravel_pytree(updates)[0]), steps, "adam_")
    curvature, residual, _ = functions.curvatures(theta)
    halvings, satisfied = functions.line_searches(theta)
    exhausted = np.asarray(halvings) >= model.config().max_line_search
    record = {"probed_loss": float(functions.loss(params)),
              "grad_norm": float(jnp.linalg.norm(gradient)),
              **along_gradient, **along_adam,
              "lambda_min": float(jnp.min(curvature)),
              "indefinite_share": float(np.mean(np.asarray(curvature) <= 0)),
              "lambda_min_residual": float(jnp.max(residual)),
              "last_trial_share": float(np.mean(exhausted)),
              "unaccepted_share": float(np.mean(exhausted & ~np.asarray(satisfied)))}
    record["probe_seconds"] = time.perf_counter() - start
    return {name: record[name] for name in FIELDS}


# -- the job ---------------------------------------------------------------------------------------

#: The job's own training checkpoints, and its probes so far, in its checkpoint directory.
TRAINING_DIR = "training"
PROBES_FILE = "probes.npz"


def checkpoint_steps(model: IMAMLModel) -> list[int]:
    """The outer steps after which the model's training checkpoints: every ``checkpoint_every``
    and the last."""
    config = outer.OuterConfig(model.outer_steps, model.learning_rate, model.checkpoint_every)
    return [min((i + 1) * config.checkpoint_every, config.n_steps)
            for i in range(config.n_checkpoints)]


def training_state(model: IMAMLModel, directory: Path) -> dict[str, Any] | None:
    """The outer loop's checkpointed state in ``directory`` (parameters, Adam state, step,
    per-step and per-checkpoint losses, best point), loaded into the template the outer loop
    restores into; ``None`` without a checkpoint."""
    optimizer = optax.adam(model.learning_rate)
    config = outer.OuterConfig(model.outer_steps, model.learning_rate, model.checkpoint_every)
    template = outer._initial_state(init_mlp(model.random_keys()[0], model.hidden), optimizer,
                                    config, tracked=True)
    return checkpoint.load(directory, template)


def save_probes(directory: Path, probes: dict[int, dict[str, float]]) -> Path:
    """``probes`` (outer step → probe) written to ``directory/probes.npz`` atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    steps = sorted(probes)
    arrays = {"steps": np.asarray(steps, np.int64),
              **{name: np.asarray([probes[s][name] for s in steps], float)
                 for name in (*FIELDS, "checkpoint_loss")}}
    handle, temporary = tempfile.mkstemp(prefix=".probes.", suffix=".npz", dir=directory)
    os.close(handle)
    try:
        np.savez(temporary, **arrays)
        target = directory / PROBES_FILE
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return target


def load_probes(directory: Path) -> dict[int, dict[str, float]]:
    """The probes :func:`save_probes` wrote in ``directory`` (empty when none)."""
    path = directory / PROBES_FILE
    if not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as stored:
        columns = {name: stored[name] for name in stored.files}
    return {int(step): {name: float(values[i]) for name, values in columns.items()
                        if name != "steps"}
            for i, step in enumerate(columns["steps"])}


def copy_checkpoint(source: Path, target: Path) -> bool:
    """Copy ``source/state.npz`` into ``target`` atomically when ``target`` holds no checkpoint;
    whether it copied."""
    if (target / checkpoint.FILENAME).exists() or not (source / checkpoint.FILENAME).exists():
        return False
    target.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".state.", suffix=".npz", dir=target)
    os.close(handle)
    try:
        shutil.copyfile(source / checkpoint.FILENAME, temporary)
        os.replace(temporary, target / checkpoint.FILENAME)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return True


@dataclasses.dataclass(frozen=True)
class MechanismRun(Job):
    """A Figure 4 iMAML model (``model``, the only field: nothing else changes its trajectory)
    trained checkpoint by checkpoint in this job's own checkpoint directory and probed
    (:func:`probe`) at the last parameters and the Adam state of every checkpoint."""

    figure: ClassVar[str] = FIGURE

    model: IMAMLModel

    def __post_init__(self) -> None:
        _check_probed(self.model)

    @property
    def name(self) -> str:
        return f"mechanism-{self.model.label}"

    def probe_until(self, directory: Path, stop_at: int | None = None
                    ) -> dict[int, dict[str, float]]:
        """Train and probe every checkpoint up to ``stop_at`` (all when ``None``), skipping those
        already probed in ``directory``; each probe is saved as soon as it is made. Returns the
        probes by outer step (with ``checkpoint_loss``, the L the outer loop recorded there)."""
        probes = load_probes(directory)
        training = directory / TRAINING_DIR
        config = outer.OuterConfig(self.model.outer_steps, self.model.learning_rate,
                                   self.model.checkpoint_every)
        for step in checkpoint_steps(self.model):
            if stop_at is not None and step > stop_at:
                break
            if step in probes:
                continue
            self.model.train(training, stop_at=step)
            state = training_state(self.model, training)
            if state is None or int(state["step"]) != step:
                found = None if state is None else int(state["step"])
                raise RuntimeError(f"{training}: expected a checkpoint at step {step}, found "
                                   f"{found}; remove {directory} to start this run again")
            record = probe(self.model, state["params"], state["opt_state"])
            record["checkpoint_loss"] = float(
                state["checkpoint_losses"][config.checkpoint_index(step)])
            probes[step] = record
            save_probes(directory, probes)
        return probes

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """``steps`` (the checkpoints), ``loss`` (L at each checkpoint's last parameters, as the
        outer loop recorded it), every probe field by checkpoint, ``train_losses`` (the model's
        per-step meta-losses), ``copied_checkpoint`` (whether the final training checkpoint was
        copied to the model's own checkpoint directory, which held none: the Figure 4 job then
        resumes at its last step) and ``seconds``."""
        results.jax_compilation_cache()
        start = time.perf_counter()
        directory = self.checkpoints()
        probes = self.probe_until(directory)
        steps = sorted(probes)
        final = training_state(self.model, directory / TRAINING_DIR)
        copied = copy_checkpoint(directory / TRAINING_DIR, self.model.checkpoints())
        return {"label": self.model.label, "n_meta_batches": self.model.n_meta_batches,
                "seed": self.model.seed, "outer_steps": self.model.outer_steps,
                "checkpoint_every": self.model.checkpoint_every,
                "steps": np.asarray(steps, np.int64),
                "loss": np.asarray([probes[s]["checkpoint_loss"] for s in steps]),
                **{name: np.asarray([probes[s][name] for s in steps]) for name in FIELDS},
                "train_losses": np.asarray(final["losses"]),
                "copied_checkpoint": copied, "seconds": time.perf_counter() - start}
