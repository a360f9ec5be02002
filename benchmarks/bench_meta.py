"""Outer-step time of MAML and iMAML at the paper's settings (Figure 3; Appendix F.3).

Paper settings: MLP 1-40-40-1 with transductive batch norm, meta-batch of 25 sinusoid tasks
(10 support, 10 query points), Adam; MAML with N = 1 and N = 5 unrolled steps; iMAML with
16 jaxopt iterations with line search and 5 CG iterations, with the λ and the solver (plain gradient
descent or FISTA) of the meta chapter's quick profile; float64, one CPU thread.

"Ours" is ``i2o.chapters.meta.outer``:
chunks of outer steps run inside one jit-compiled ``lax.scan``.
iMAML is also timed with the meta-batch's inner problems solved as one batched program
(``imaml.meta_loss(batched=True)``, :mod:`i2o.chapters.meta.descent`) against our default (jaxopt
one task after the other). The peer is an implementation in the style of the authors' jaxopt
iMAML example, written for this
benchmark: the same model and solver (jaxopt ``GradientDescent(stepsize=-1, maxiter=16)`` with its
default tolerance, implicit differentiation with CG), but one jit-compiled ``value_and_grad`` per
outer step called from a Python loop with the optax update outside. Times are wall-clock per
outer step after compilation, the median over ``ROUNDS`` (3) rounds that alternate ours and the
peer so that both see the same machine load; each round runs one chunk of 20 to 200 outer steps,
already a mean over identical steps. The persistent JAX cache is measured over ``CACHE_ROUNDS``
(2) alternated pairs of fresh processes (loading and compiling differ by more than 2×). The
issue quotes about 10 ms per step for the authors' example on this machine.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time

from i2o.base import runtime

runtime.jax_single_thread()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxopt  # noqa: E402
import optax  # noqa: E402
from jaxopt import linear_solve  # noqa: E402

from i2o.chapters.meta import imaml, maml, mlp, outer, runs  # noqa: E402
from i2o.compute import profiles  # noqa: E402

ROUNDS = 3
CACHE_ROUNDS = 2
META_BATCH = 25


def _ours(meta_loss, steps: int):
    """Seconds per step of our chunked outer loop (compiled before timing)."""
    params = mlp.init_mlp(jax.random.PRNGKey(0))
    source = outer.online_tasks(jax.random.PRNGKey(1), META_BATCH)
    optimizer = optax.adam(1e-3)
    chunk = outer._chunk_fn(meta_loss, source, optimizer, steps)
    state = [params, optimizer.init(params), 0]

    def run_once() -> float:
        start = time.perf_counter()
        p, o, losses = chunk(state[0], state[1], jnp.asarray(state[2]))
        jax.block_until_ready(losses)
        state[:] = [p, o, state[2] + steps]
        return (time.perf_counter() - start) / steps

    run_once()  # compile
    return run_once


def _peer(steps: int, regularization: float, acceleration: bool):
    """The authors'-style loop: jaxopt run inside a per-step jitted value_and_grad (the same
    inner problem as ours: λ and momentum as given)."""
    params = mlp.init_mlp(jax.random.PRNGKey(0))
    source = outer.online_tasks(jax.random.PRNGKey(1), META_BATCH)

    def inner_loss(p, meta, x, y):
        reg = sum(jnp.sum((a - b) ** 2) for a, b in zip(jax.tree_util.tree_leaves(p),
                                                          jax.tree_util.tree_leaves(meta),
                                                          strict=True))
        return mlp.mse(p, x, y) + 0.5 * regularization * reg

    solver = jaxopt.GradientDescent(
        fun=inner_loss, stepsize=-1, maxiter=16, acceleration=acceleration, implicit_diff=True,
        implicit_diff_solve=functools.partial(linear_solve.solve_cg, maxiter=5, tol=1e-7))

    def outer_loss(meta, batch):
        def task(xs, ys, xq, yq):
            adapted = solver.run(meta, meta, xs, ys).params
            return mlp.mse(adapted, xq, yq)

        return jnp.mean(jax.vmap(task)(batch.x_support, batch.y_support, batch.x_query,
                                       batch.y_query))

    optimizer = optax.adam(1e-3)
    loss_and_grad = jax.jit(jax.value_and_grad(outer_loss))
    get_batch = jax.jit(source)
    state = [params, optimizer.init(params), 0]

    def run_once() -> float:
        p, o, t = state
        start = time.perf_counter()
        for _ in range(steps):
            loss, grads = loss_and_grad(p, get_batch(jnp.asarray(t)))
            updates, o = optimizer.update(grads, o, p)
            p = optax.apply_updates(p, updates)
            t += 1
        jax.block_until_ready(p)
        state[:] = [p, o, t]
        return (time.perf_counter() - start) / steps

    run_once()
    return run_once


_FIRST_CHUNK = """
import functools, time
start = time.perf_counter()
from i2o.base import runtime
runtime.jax_single_thread()
from i2o.compute import results
from i2o.compute import profiles
results.jax_compilation_cache()
import jax, jax.numpy as jnp, optax
from i2o.chapters.meta import imaml, mlp, outer
book = profiles.resolve("meta", "quick")
config = imaml.IMAMLConfig(regularization=book["imaml_regularization"],
                           acceleration=book["imaml_acceleration"])
params = mlp.init_mlp(jax.random.PRNGKey(0))
optimizer = optax.adam(1e-3)
chunk = outer._chunk_fn(functools.partial(imaml.meta_loss, config=config),
                        outer.online_tasks(jax.random.PRNGKey(1), 25), optimizer, 2)
_, _, losses = chunk(params, optimizer.init(params), jnp.asarray(0))
jax.block_until_ready(losses)
print(time.perf_counter() - start)
"""


def _first_chunk_seconds(results_dir: str, cache: bool) -> float:
    """Seconds from a fresh process's start to its first iMAML chunk of 2 outer steps (imports,
    compilation, 2 steps), with the results cache at ``results_dir``."""
    env = {**os.environ, "I2O_RESULTS_DIR": results_dir, "I2O_JAX_CACHE": "1" if cache else "0"}
    out = subprocess.run([sys.executable, "-c", _FIRST_CHUNK], env=env, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.split()[-1])


def compilation_cache() -> list[dict]:
    """A process that finds the iMAML step's compiled program in the persistent JAX cache
    (:func:`i2o.compute.results.jax_compilation_cache`: the next replicate, a resumed run, a sweep
    worker) against one that compiles it (the cache off), alternated over rounds."""
    with tempfile.TemporaryDirectory() as folder:
        _first_chunk_seconds(folder, cache=True)  # fills the cache
        cold, warm = [], []
        for _ in range(CACHE_ROUNDS):
            cold.append(_first_chunk_seconds(folder, cache=False))
            warm.append(_first_chunk_seconds(folder, cache=True))
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    return [{"name": "meta: fresh process to its first iMAML chunk (2 outer steps), compiled "
                     "program loaded from the persistent JAX cache",
             "value": round(warm_s, 2), "unit": "s",
             "peer": "the same process compiling it (I2O_JAX_CACHE=0)",
             "peer_value": round(cold_s, 2), "ratio": round(warm_s / cold_s, 3),
             "note": f"imports included; median of {CACHE_ROUNDS} alternated rounds"}]


def book_setting():
    """The meta chapter's quick parameters (its λ and inner solver)."""
    return profiles.resolve("meta", "quick")


def run() -> list[dict]:
    maml1 = _ours(functools.partial(maml.meta_loss, config=maml.MAMLConfig(1)), 200)
    maml5 = _ours(functools.partial(maml.meta_loss, config=maml.MAMLConfig(5)), 100)
    # the book's setting (the meta chapter's quick profile), CG tolerance 1e-7
    book = book_setting()
    book_config = imaml.IMAMLConfig(regularization=book["imaml_regularization"],
                                    acceleration=book["imaml_acceleration"])
    ours_imaml = _ours(functools.partial(imaml.meta_loss, config=book_config), 20)
    batched = _ours(functools.partial(imaml.meta_loss, config=book_config, batched=True), 20)
    peer_imaml = _peer(20, book["imaml_regularization"], book["imaml_acceleration"])
    times = {"maml1": [], "maml5": [], "imaml": [], "batched": [], "peer": []}
    for _ in range(ROUNDS):
        times["maml1"].append(maml1())
        times["maml5"].append(maml5())
        times["imaml"].append(ours_imaml())
        times["batched"].append(batched())
        times["peer"].append(peer_imaml())
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    note = "wall time per outer step (meta-batch 25, float64, 1 thread), median of rounds"
    return [
        {"name": "meta: MAML N=1 outer step", "value": round(ms["maml1"], 3), "unit": "ms",
         "note": note},
        {"name": "meta: MAML N=5 outer step", "value": round(ms["maml5"], 3), "unit": "ms",
         "note": note},
        {"name": f"meta: iMAML outer step (λ={book['imaml_regularization']:g}, 16 "
                 f"{'FISTA' if book['imaml_acceleration'] else 'gradient-descent'} iterations, "
                 "CG 5, tol 1e-7)",
         "value": round(ms["imaml"], 3), "unit": "ms",
         "peer": "authors'-style jaxopt iMAML loop (per-step jit, written for this benchmark)",
         "peer_value": round(ms["peer"], 3), "ratio": round(ms["imaml"] / ms["peer"], 3),
         "goal": "≤ 10 ms (the issue's figure for the authors' example on this machine)",
         "note": note + "; the machine was shared with other jobs"},
        {"name": "meta: iMAML outer step, the meta-batch's inner problems solved as one batched "
                 "program (meta.descent, batched=True)",
         "value": round(ms["batched"], 3), "unit": "ms",
         "peer": "the same step with jaxopt's solver run one task after the other (lax.map; the "
                 "default on a CPU)",
         "peer_value": round(ms["imaml"], 3),
         "ratio": round(ms["batched"] / ms["imaml"], 3), "note": note},
        *compilation_cache(),
        *_paper_profile_cost(),
    ]


def _paper_profile_cost() -> list[dict]:
    """Total wall time of the paper profile, as recorded in the results cache by the runs that
    computed it (training and sweeps); nothing is computed here. No entry at all when no model
    of the paper profile was trained yet: a 0 s total would read as a measurement."""
    cost = runs.recorded_cost(profiles.resolve("meta", "paper"))
    if not cost["training"]:
        return []
    missing = cost["missing"]
    note = ("sum of the recorded training and sweep times of the paper profile's cached results; "
            + (f"not yet computed: {', '.join(missing)}" if missing else "complete"))
    return [{"name": "meta: paper profile total time (recorded)", "value": round(cost["total"], 1),
             "unit": "s", "note": note}]


if __name__ == "__main__":
    for row in run():
        print(row)
