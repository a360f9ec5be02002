"""Figure 4's iMAML models trained as one program: stacked with ``jax.vmap``, or one at a time?

Figure 4 of the meta chapter trains 15 iMAML models (5 training-set sizes × 3 seeds, the quick
profile: N = 16 inner iterations, λ = 8, 5 CG iterations, meta-batch 25, Adam lr 10⁻³, MLP
1-40-40-1 without normalization, float64), each alone. Their inner solver, jaxopt's gradient
descent with backtracking line search, is a data-dependent ``while_loop``; stacked models would
all wait for the slowest line search. This module asks whether the models gain from being
trained as ONE program once the outer step has no data-dependent loop at all.

Written here, for this benchmark only (the chapter's code is untouched: the results cache keys
hash it), from the chapter's own pieces (``imaml.inner_objective`` for
F(φ) = ℓ(φ, support) + λ/2 ‖φ − θ‖², ``mlp.mse`` for the query loss, ``descent``'s step rule):

- a fixed-iteration inner solver: exactly N steps of gradient descent (``lax.scan``), each with
  a backtracking line search whose ``TRIALS`` + 1 trial steps s, s/2, …, s/2^TRIALS are all
  evaluated (one batched evaluation, ``vmap`` over the trials); the first trial meeting jaxopt's
  sufficient-decrease test is selected by a mask (the last when none does), and the next search
  starts at twice the accepted step (at 1 below 10⁻⁶), as in jaxopt and ``meta.descent``. It
  equals jaxopt's iteration (``maxls`` = 15) whenever no search needs more than ``TRIALS``
  halvings; the number of searches where none was accepted is reported;
- the implicit hypergradient λ (∇²ℓ(φ_N) + λI)⁻¹ ∇ℓ(φ_N, query) by 5 conjugate-gradient
  iterations run as a fixed ``lax.scan`` (Hessian-vector products by forward-over-reverse
  differentiation) whose updates are masked once the relative residual is below 10⁻⁷, i.e.
  jaxopt's ``solve_cg`` (``jax.scipy``'s CG) without its ``while_loop``;
- one model's outer step (optax Adam, as the chapter), whose meta-batch t is meta-batch
  t mod B of the model's training set (padded to the largest B so that all models stack).

Measured, after compilation, per outer step per model (wall time; chunks of ``STEPS`` outer steps
in one jit-compiled ``lax.scan``, as the chapter's outer loop):

- ours: the S = 15 models stacked with ``jax.vmap`` over their parameters, Adam states and
  training sets, one compiled program (and S = 3, the first three models);
- peer: the same fixed-iteration program compiled for one model and called for the S models one
  after the other;
- also the fixed-iteration step of one model against the chapter's current step (jaxopt,
  ``outer._chunk_fn`` with ``imaml.meta_loss``): what the loop-free solver itself costs.

Rounds alternate ours and the peers so that they see the same machine load; the values are the
medians over rounds; float64, one CPU thread. The ratio (stacked / one at a time) is recorded
whatever it is: issue 40 asks for it (earlier prototypes found no gain from stacking the
convolutional DEQs; whether small MLPs with a loop-free inner solver gain is the open question).
A last entry checks the fixed-iteration meta-gradient against the chapter's (jaxopt) on every
model's first meta-batch, at initialization and after the timed steps.
"""

from __future__ import annotations

import os
import statistics
import time

from i2o.base import runtime

runtime.jax_single_thread()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

from i2o.chapters.meta import descent, imaml, mlp, outer, runs  # noqa: E402
from i2o.chapters.meta.tasks import TaskBatch  # noqa: E402
from i2o.compute import profiles  # noqa: E402

ROUNDS = 3
STEPS = 2  # outer steps per compiled call
TRIALS = 8  # halvings of each line search (TRIALS + 1 trial steps)
SMALL_STACK = 3


# -- the loop-free outer step ------------------------------------------------------------------

def fixed_descent(objective, theta0: jax.Array, steps: int, trials: int, *args
                  ) -> tuple[jax.Array, jax.Array]:
    """``steps`` iterations of gradient descent with a masked backtracking line search of
    ``trials`` halvings, from ``theta0``; returns φ_N and the number of searches where no trial
    was accepted (the last one was then taken, where jaxopt would have halved further)."""
    factors = descent.DECREASE ** jnp.arange(trials + 1, dtype=theta0.dtype)
    eps = jnp.finfo(theta0.dtype).eps

    def one_step(state: descent.DescentState, _) -> tuple[descent.DescentState, jax.Array]:
        point = state.point
        value, grad = jax.value_and_grad(objective)(point, *args)
        sizes = state.stepsize * factors
        candidates = point[None, :] - sizes[:, None] * grad[None, :]
        values = jax.vmap(lambda c: objective(c, *args))(candidates)
        diff = candidates - point[None, :]
        rejected = sizes * (values - value) > (sizes * (diff @ grad)
                                               + 0.5 * jnp.sum(diff * diff, axis=1) + eps)
        none_accepted = jnp.all(rejected)
        chosen = jnp.argmax(jnp.logical_not(rejected).at[-1].set(True))  # first accepted
        new, accepted = candidates[chosen], sizes[chosen]
        next_step = jnp.where(accepted <= descent.SMALLEST_STEP, jnp.ones_like(accepted),
                              accepted / descent.DECREASE)
        return descent.DescentState(new, new, state.t, next_step), none_accepted

    final, misses = jax.lax.scan(one_step, descent.init(theta0), None, length=steps)
    return final.params, jnp.sum(misses)


def fixed_cg(matvec, b: jax.Array, iterations: int, tol: float) -> jax.Array:
    """``iterations`` CG iterations from 0 on A u = b, frozen once ‖r‖ ≤ tol ‖b‖ (the stopping
    rule of ``jax.scipy.sparse.linalg.cg``, which jaxopt's ``solve_cg`` calls)."""
    threshold = tol ** 2 * jnp.vdot(b, b)

    def body(carry, _):
        x, r, gamma, p = carry
        active = gamma > threshold
        ap = matvec(p)
        alpha = gamma / jnp.vdot(p, ap)
        x_new, r_new = x + alpha * p, r - alpha * ap
        gamma_new = jnp.vdot(r_new, r_new)
        p_new = r_new + (gamma_new / gamma) * p
        new = (x_new, r_new, gamma_new, p_new)
        return tuple(jnp.where(active, n, o) for n, o in zip(new, carry, strict=True)), None

    start = (jnp.zeros_like(b), b, jnp.vdot(b, b), b)
    (x, *_), _ = jax.lax.scan(body, start, None, length=iterations)
    return x


def fixed_meta_value_and_grad(params: mlp.Params, x_s, y_s, x_q, y_q,
                              config: imaml.IMAMLConfig, trials: int = TRIALS):
    """The meta-loss of a meta-batch (mean query loss over its tasks), its implicit
    meta-gradient (a Params dict) and the number of line searches where no trial was accepted."""
    theta_meta, unravel = ravel_pytree(params)
    theta_meta = jax.lax.stop_gradient(theta_meta)
    objective = imaml.inner_objective(config, unravel)
    n_tasks = x_s.shape[0]
    lam = config.regularization

    def task(xs, ys, xq, yq):
        phi, misses = fixed_descent(objective, theta_meta, config.inner_steps, trials,
                                    theta_meta, xs, ys, xq)
        loss, grad_q = jax.value_and_grad(
            lambda th: mlp.mse(unravel(th), xq, yq, config.normalization, xs))(phi)
        inner_grad = jax.grad(objective)

        def hvp(v):
            return jax.jvp(lambda th: inner_grad(th, theta_meta, xs, ys, xq), (phi,), (v,))[1]

        u = fixed_cg(hvp, grad_q / n_tasks, config.cg_maxiter, config.cg_tol)
        return loss, lam * u, misses

    losses, meta_grads, misses = jax.vmap(task)(x_s, y_s, x_q, y_q)
    return jnp.mean(losses), unravel(jnp.sum(meta_grads, axis=0)), jnp.sum(misses)


def outer_step_fn(config: imaml.IMAMLConfig, optimizer: optax.GradientTransformation):
    """One model's outer step: meta-batch t mod B of its (padded) training set, Adam update."""

    def step(params, opt_state, task_set, n_batches, t):
        index = jnp.mod(t, n_batches)
        x_s, y_s, x_q, y_q = (a[index] for a in task_set)
        loss, grads, misses = fixed_meta_value_and_grad(params, x_s, y_s, x_q, y_q, config)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, misses

    return step


def chunk_fn(step, length: int):
    """``length`` outer steps from step ``start`` in one jit-compiled ``lax.scan``."""

    @jax.jit
    def chunk(params, opt_state, task_set, n_batches, start):
        def body(carry, t):
            p, o = carry
            p, o, loss, misses = step(p, o, task_set, n_batches, t)
            return (p, o), (loss, misses)

        (params, opt_state), (losses, misses) = jax.lax.scan(
            body, (params, opt_state), start + jnp.arange(length))
        return params, opt_state, losses, misses

    return chunk


# -- Figure 4's models ---------------------------------------------------------------------------

def figure4():
    """The quick profile, its Figure 4 models, and their initial parameters and training sets
    (x_s, y_s, x_q, y_q padded with zeros to the largest B; B per model)."""
    book = profiles.resolve("meta", "quick")
    models = runs.figure4_models(book)
    config = models[0].config()
    if config.acceleration or config.normalization != "none":
        raise ValueError("the fixed-iteration solver here is plain gradient descent, no BN")
    sets = [m.training_set() for m in models]
    largest = max(s.amplitude.shape[0] for s in sets)

    def padded(a: jax.Array) -> jax.Array:
        return jnp.concatenate([a, jnp.zeros((largest - a.shape[0],) + a.shape[1:], a.dtype)])

    task_sets = [tuple(padded(a) for a in (s.x_support, s.y_support, s.x_query, s.y_query))
                 for s in sets]
    n_batches = [jnp.asarray(s.amplitude.shape[0], jnp.int32) for s in sets]
    inits = [mlp.init_mlp(m.random_keys()[0], m.hidden) for m in models]
    return book, models, config, inits, task_sets, n_batches, sets


def stack(trees):
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)


def unstack(tree, i: int):
    return jax.tree_util.tree_map(lambda a: a[i], tree)


# -- timing --------------------------------------------------------------------------------------

class Stacked:
    """S models in one vmapped program; ``__call__`` times one chunk, per model per step."""

    def __init__(self, step, optimizer, inits, task_sets, n_batches):
        self.s = len(inits)
        self.chunk = chunk_fn(jax.vmap(step, in_axes=(0, 0, 0, 0, None)), STEPS)
        self.params = stack(inits)
        self.opt = stack([optimizer.init(p) for p in inits])
        self.sets, self.n = stack(task_sets), jnp.stack(n_batches)
        self.t, self.misses = 0, 0
        self()  # compile

    def __call__(self) -> float:
        start = time.perf_counter()
        self.params, self.opt, _, misses = self.chunk(self.params, self.opt, self.sets, self.n,
                                                      jnp.asarray(self.t))
        jax.block_until_ready(self.params)
        seconds = time.perf_counter() - start
        self.t += STEPS
        self.misses += int(jnp.sum(misses))
        return seconds / (self.s * STEPS)


class OneAtATime:
    """The same step compiled for one model, called for each model in turn."""

    def __init__(self, step, optimizer, inits, task_sets, n_batches):
        self.chunk = chunk_fn(step, STEPS)
        self.params = list(inits)
        self.opt = [optimizer.init(p) for p in inits]
        self.sets, self.n = task_sets, n_batches
        self.t = 0
        self()  # compile

    def __call__(self) -> float:
        start = time.perf_counter()
        for i in range(len(self.params)):
            self.params[i], self.opt[i], _, _ = self.chunk(self.params[i], self.opt[i],
                                                           self.sets[i], self.n[i],
                                                           jnp.asarray(self.t))
        jax.block_until_ready(self.params)
        seconds = time.perf_counter() - start
        self.t += STEPS
        return seconds / (len(self.params) * STEPS)


class Jaxopt:
    """The chapter's current outer step (jaxopt inner solver) for one model."""

    def __init__(self, config, optimizer, init, training_set):
        meta_loss = lambda p, tasks: imaml.meta_loss(p, tasks, config)  # noqa: E731
        self.chunk = outer._chunk_fn(meta_loss, outer.cycled_tasks(training_set), optimizer,
                                     STEPS)
        self.state = [init, optimizer.init(init), 0]
        self()

    def __call__(self) -> float:
        p, o, t = self.state
        start = time.perf_counter()
        p, o, losses = self.chunk(p, o, jnp.asarray(t))
        jax.block_until_ready(losses)
        seconds = time.perf_counter() - start
        self.state = [p, o, t + STEPS]
        return seconds / STEPS


# -- agreement with the chapter's jaxopt step ----------------------------------------------------

def both_fn(config: imaml.IMAMLConfig):
    """The chapter's (jaxopt) meta-loss and meta-gradient and the fixed-iteration ones, compiled
    once."""

    @jax.jit
    def both(params, batch: TaskBatch):
        ref_loss, ref_grad = jax.value_and_grad(imaml.meta_loss)(params, batch, config)
        loss, grad, misses = fixed_meta_value_and_grad(
            params, batch.x_support, batch.y_support, batch.x_query, batch.y_query, config)
        return ref_loss, ravel_pytree(ref_grad)[0], loss, ravel_pytree(grad)[0], misses

    return both


def agreement(both, params_list, sets, t: int) -> dict:
    """Max relative difference (‖Δg‖∞ / ‖g‖∞, and |Δloss| / loss) between the fixed-iteration
    meta-gradient and the chapter's (``both_fn``) on meta-batch t of each model's training set,
    and the searches where no trial was accepted."""
    grad_rel, loss_rel, misses = 0.0, 0.0, 0
    for params, training_set in zip(params_list, sets, strict=True):
        batch = outer.cycled_tasks(training_set)(jnp.asarray(t))
        ref_loss, ref_grad, loss, grad, miss = (np.asarray(a) for a in both(params, batch))
        grad_rel = max(grad_rel, float(np.max(np.abs(grad - ref_grad)) / np.max(np.abs(ref_grad))))
        loss_rel = max(loss_rel, float(abs(loss - ref_loss) / abs(ref_loss)))
        misses += int(miss)
    return {"grad": grad_rel, "loss": loss_rel, "misses": misses}


# -- the benchmark -------------------------------------------------------------------------------

def run() -> list[dict]:
    load_start = os.getloadavg()[0]
    book, models, config, inits, task_sets, n_batches, sets = figure4()
    optimizer = optax.adam(book["learning_rate"])
    step = outer_step_fn(config, optimizer)
    s, tasks = len(models), book["meta_batch_size"]
    searches = s * tasks * config.inner_steps  # line searches of one outer step of all models
    stacked = Stacked(step, optimizer, inits, task_sets, n_batches)
    small = Stacked(step, optimizer, inits[:SMALL_STACK], task_sets[:SMALL_STACK],
                    n_batches[:SMALL_STACK])
    single = OneAtATime(step, optimizer, inits, task_sets, n_batches)
    chapter = Jaxopt(config, optimizer, inits[0], sets[0])
    times = {"stacked": [], "small": [], "single": [], "jaxopt": []}
    for _ in range(ROUNDS):
        times["stacked"].append(stacked())
        times["single"].append(single())
        times["small"].append(small())
        times["jaxopt"].append(chapter())
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}

    def spread(*keys: str) -> str:
        return "; rounds (ms): " + ", ".join(
            f"{k} " + "/".join(f"{1e3 * v:.1f}" for v in times[k]) for k in keys)

    # the stacked and the one-at-a-time models ran the same steps: the same parameters?
    stacked_vs_single = max(
        float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
        for i in range(s)
        for a, b in zip(jax.tree_util.tree_leaves(unstack(stacked.params, i)),
                        jax.tree_util.tree_leaves(single.params[i]), strict=True))
    both = both_fn(config)
    at_init = agreement(both, inits, sets, 0)
    trained = agreement(both, single.params, sets, single.t)
    load_end = os.getloadavg()[0]

    shared = (f"machine shared with other jobs (1-min load average {load_start:.2f} at start, "
              f"{load_end:.2f} at end, {os.cpu_count()} cores)")
    note = (f"wall time per outer step per model (meta-batch {tasks}, N = {config.inner_steps}, "
            f"{TRIALS + 1} line-search trials per inner step, CG {config.cg_maxiter}, float64, "
            f"1 thread), chunks of {STEPS} steps, median of {ROUNDS} alternated rounds; {shared}")
    peer = (f"the same fixed-iteration outer step compiled for one model, called for the "
            f"{s} models one after the other")
    rows = [
        {"name": f"meta: Figure 4's {s} iMAML models stacked in one program (vmap), "
                 "fixed-iteration inner solver, per model per outer step",
         "value": round(ms["stacked"], 3), "unit": "ms", "peer": peer,
         "peer_value": round(ms["single"], 3), "ratio": round(ms["stacked"] / ms["single"], 3),
         "note": note + "; ratio < 1: stacking pays" + spread("stacked", "single")},
        {"name": f"meta: {SMALL_STACK} of Figure 4's iMAML models stacked in one program (vmap), "
                 "fixed-iteration inner solver, per model per outer step",
         "value": round(ms["small"], 3), "unit": "ms", "peer": peer,
         "peer_value": round(ms["single"], 3), "ratio": round(ms["small"] / ms["single"], 3),
         "note": note + f"; the peer's per-model time is that of all {s} models (the program "
                        "has no data-dependent loop, so its cost does not depend on the model)"
                + spread("small", "single")},
        {"name": "meta: fixed-iteration iMAML outer step (loop-free line search and CG), "
                 "one model",
         "value": round(ms["single"], 3), "unit": "ms",
         "peer": "the chapter's current step (jaxopt GradientDescent with line search, "
                 "imaml.meta_loss in outer._chunk_fn), one model",
         "peer_value": round(ms["jaxopt"], 3), "ratio": round(ms["single"] / ms["jaxopt"], 3),
         "note": note + "; jaxopt's line search stops at its first accepted trial, the fixed one "
                        f"always evaluates {TRIALS + 1}" + spread("single", "jaxopt")},
        {"name": "meta: fixed-iteration vs jaxopt iMAML meta-gradient, max relative difference "
                 "(‖Δg‖∞/‖g‖∞) over the Figure 4 models",
         "value": float(f"{max(at_init['grad'], trained['grad']):.3g}"), "unit": "relative",
         "note": (f"first meta-batch at initialization: gradient {at_init['grad']:.2g}, loss "
                  f"{at_init['loss']:.2g}; after the {single.t} timed outer steps: gradient "
                  f"{trained['grad']:.2g}, loss {trained['loss']:.2g}; line searches with no "
                  f"accepted trial among {TRIALS + 1} (there the fixed solver takes the last "
                  f"trial, jaxopt halves up to {config.max_line_search} times): "
                  f"{at_init['misses']} at initialization and {trained['misses']} after the "
                  f"timed steps (of {searches} each), {stacked.misses} in the stacked timed "
                  f"steps (of {searches * stacked.t}); stacked vs "
                  f"one-at-a-time parameters after the timed steps: max relative difference "
                  f"{stacked_vs_single:.2g}")},
    ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
