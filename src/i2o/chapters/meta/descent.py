r"""Gradient descent with backtracking line search (and optional FISTA momentum), for ``vmap``.

The iteration of jaxopt's ``GradientDescent(stepsize=0, maxls, acceleration)`` (Beck & Teboulle's
backtracking; the paper's inner solver of iMAML), written so that a batch of tasks runs as one
program. From the point :math:`p_k` (:math:`x_k`, or the momentum point :math:`y_k` with FISTA)
and the step :math:`s_k` carried from the previous iteration:

1. :math:`f_0, g = f(p_k), \nabla f(p_k)` (one value and gradient);
2. trial :math:`x^+ = p_k - s g`, starting at :math:`s = s_k`, accepted when
   :math:`s (f(x^+) - f_0) \le s \langle x^+ - p_k, g\rangle + \tfrac12 \|x^+ - p_k\|^2 + \epsilon`
   (:math:`\epsilon` the dtype's machine epsilon), else :math:`s \leftarrow s/2`, at most
   ``maxls`` halvings (the last trial is then taken);
3. :math:`x_{k+1} = x^+`; the next step starts at :math:`2s`, or at 1 when :math:`s \le 10^{-6}`;
4. FISTA: :math:`t_{k+1} = (1 + \sqrt{1 + 4t_k^2})/2`,
   :math:`y_{k+1} = x_{k+1} + \frac{t_k - 1}{t_{k+1}}(x_{k+1} - x_k)`; without it, :math:`p = x`.

Each trial evaluates :math:`f` once, in the loop's body, and the acceptance test reads the stored
value. jaxopt evaluates :math:`f` in the loop's condition, which ``vmap`` turns into two
evaluations per trial (a batched ``while_loop`` re-evaluates its condition to select the lanes
that advance); here every task of a batch runs each trial in one batched evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

Objective = Callable[..., jax.Array]

DECREASE = 0.5
SMALLEST_STEP = 1e-6


class DescentState(NamedTuple):
    """``params`` x_k; ``point`` where the next gradient is taken (y_k with FISTA, else x_k);
    ``t`` FISTA's t_k; ``stepsize`` the first trial step of the next line search."""

    params: jax.Array
    point: jax.Array
    t: jax.Array
    stepsize: jax.Array


def init(x0: jax.Array) -> DescentState:
    """The state at k = 0 (jaxopt's: first trial step 1, t = 1)."""
    one = jnp.ones((), x0.dtype)
    return DescentState(params=x0, point=x0, t=one, stepsize=one)


class LineSearch(NamedTuple):
    """A backtracking search's outcome (module docstring, step 2): the point and step taken, the
    halvings made and whether the sufficient-decrease test held at the point taken (false when
    the ``maxls``-th halving was taken regardless)."""

    point: jax.Array
    step: jax.Array
    halvings: jax.Array
    satisfied: jax.Array


def line_search(fun: Objective, point: jax.Array, value: jax.Array, grad: jax.Array,
                stepsize: jax.Array, maxls: int, *args) -> LineSearch:
    """Backtracking from ``stepsize`` (module docstring, step 2)."""
    eps = jnp.finfo(value.dtype).eps

    def rejected(candidate: jax.Array, candidate_value: jax.Array, step: jax.Array) -> jax.Array:
        diff = candidate - point
        return step * (candidate_value - value) > (step * jnp.vdot(diff, grad)
                                                   + 0.5 * jnp.vdot(diff, diff) + eps)

    def trial(step: jax.Array) -> tuple[jax.Array, jax.Array]:
        candidate = point - step * grad
        return candidate, fun(candidate, *args)

    def cond(carry: tuple[jax.Array, jax.Array, jax.Array, jax.Array]) -> jax.Array:
        candidate, candidate_value, step, halvings = carry
        return jnp.logical_and(rejected(candidate, candidate_value, step), halvings < maxls)

    def body(carry: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
             ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        _, _, step, halvings = carry
        step = step * DECREASE
        return (*trial(step), step, halvings + 1)

    candidate, candidate_value, step, halvings = jax.lax.while_loop(
        cond, body, (*trial(stepsize), stepsize, jnp.zeros((), jnp.int32)))
    return LineSearch(candidate, step, halvings,
                      jnp.logical_not(rejected(candidate, candidate_value, step)))


def searched_step(fun: Objective, state: DescentState, maxls: int, acceleration: bool, *args
                  ) -> tuple[DescentState, LineSearch]:
    """One iteration (module docstring) and its line search; ``args`` are passed to ``fun``
    after the parameters."""
    value, grad = jax.value_and_grad(fun)(state.point, *args)
    search = line_search(fun, state.point, value, grad, state.stepsize, maxls, *args)
    next_step = jnp.where(search.step <= SMALLEST_STEP, jnp.ones_like(search.step),
                          search.step / DECREASE)
    if not acceleration:
        return DescentState(params=search.point, point=search.point, t=state.t,
                            stepsize=next_step), search
    t_next = 0.5 * (1 + jnp.sqrt(1 + 4 * state.t ** 2))
    point = search.point + (state.t - 1) / t_next * (search.point - state.params)
    return DescentState(params=search.point, point=point, t=t_next, stepsize=next_step), search


def step(fun: Objective, state: DescentState, maxls: int, acceleration: bool, *args
         ) -> DescentState:
    """One iteration (module docstring); ``args`` are passed to ``fun`` after the parameters."""
    return searched_step(fun, state, maxls, acceleration, *args)[0]


def run(fun: Objective, x0: jax.Array, steps: int, maxls: int, acceleration: bool, *args
        ) -> jax.Array:
    """``x_steps`` from ``x0`` (``steps`` iterations of :func:`step`)."""
    final, _ = jax.lax.scan(lambda s, _: (step(fun, s, maxls, acceleration, *args), None),
                            init(x0), None, length=steps)
    return final.params
