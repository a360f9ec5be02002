"""The 1-40-40-1 ReLU MLP with transductive batch normalization (Appendix F.3; Finn et al. 2017).

Each hidden layer computes h ← ReLU(BN(W h) + β), where BN standardizes every unit with the mean
and variance *of the batch being evaluated* (transductive: statistics are never stored, so the
support set is normalized with its own statistics and the query set with its own). As in Finn et
al.'s implementation the normalization has a learned shift β and no scale; the hidden layers have
no bias of their own (BN would remove it). The output layer is affine. Parameters are a dict of
float64 arrays; all of them are meta-learned and all of them are adapted in the inner problem.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

Params = dict[str, jax.Array]
BN_EPSILON = 1e-3  # TensorFlow's default, as in Finn et al.'s implementation
INIT_STD = 0.01


def init_mlp(key: jax.Array, hidden: Sequence[int] = (40, 40),
             weight_std: float = INIT_STD) -> Params:
    """Finn et al.'s initialization: weights ~ N(0, 0.01²) truncated at two standard deviations,
    shifts and output bias at zero.

    The scale matters even with batch normalization: the gradient of BN(W h) in W scales like
    1/‖W‖, so small weights give a fixed inner step size α a large effect (with He-scaled weights
    one MAML step of α = 0.01 barely adapts, and MAML trains to a much worse meta-loss)."""
    if len(hidden) < 1 or any(not isinstance(h, int) or h < 1 for h in hidden):
        raise ValueError(f"hidden must be a non-empty sequence of integers ≥ 1; got {hidden!r}")
    widths = [1, *hidden, 1]
    keys = jax.random.split(key, len(widths) - 1)
    params: Params = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        params[f"w{i}"] = weight_std * jax.random.truncated_normal(
            keys[i], -2.0, 2.0, (fan_in, fan_out), jnp.float64)
        if i < len(hidden):
            params[f"shift{i}"] = jnp.zeros((fan_out,), jnp.float64)
    params[f"b{len(hidden)}"] = jnp.zeros((1,), jnp.float64)
    return params


def n_hidden_layers(params: Params) -> int:
    return sum(1 for k in params if k.startswith("shift"))


def batch_norm(h: jax.Array) -> jax.Array:
    """Standardize each column of ``h`` (points × units) with the batch's own statistics."""
    mean = jnp.mean(h, axis=0, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=0, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + BN_EPSILON)


def apply_mlp(params: Params, x: jax.Array) -> jax.Array:
    """Predictions (points × 1) for inputs ``x`` (points × 1)."""
    h = x
    depth = n_hidden_layers(params)
    for i in range(depth):
        h = jax.nn.relu(batch_norm(h @ params[f"w{i}"]) + params[f"shift{i}"])
    return h @ params[f"w{depth}"] + params[f"b{depth}"]


def mse(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean squared error of the MLP on one task's points: (1/n) Σ (f(x_i) − y_i)²."""
    return jnp.mean(jnp.square(apply_mlp(params, x) - y))
