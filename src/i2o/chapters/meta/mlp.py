"""The 1-40-40-1 ReLU MLP of the sinusoid experiments (Appendix F.3; Finn et al. 2017).

Hidden layer i computes h ← ReLU(norm(W_i h) + b_i); the output layer is affine. ``normalization``
chooses ``norm``:

- ``"none"`` (the book's default): the identity, so b_i is an ordinary bias. This is the network
  of Finn et al.'s sinusoid command (``--norm=None``) and of jaxopt's iMAML example.
- ``"per_set_bn"``: transductive batch normalization with the statistics *of the set being
  evaluated* — the support set with its own, the query set with its own (the literal reading of
  the paper's Appendix). With a one-dimensional input, unit j of the first layer sees w_j x, which
  standardization turns into sign(w_j)(x − x̄)/s (once |w_j| s ≫ √ε): the set's mean x̄ (and nearly
  its spread s) are erased, so a function fitted on the support is read on the query in shifted
  coordinates (see :mod:`i2o.chapters.meta.floor` for the error this costs).
- ``"joint_bn"``: the same normalization with statistics over the support and the query *inputs
  together* (``context`` = the other set's inputs), so both sets share one coordinate frame.

With a normalization, b_i is BN's learned shift (Finn et al.'s BN has no scale). Parameters are a
dict of float64 arrays (``w0, b0, w1, b1, …, w_L, b_L``); all are meta-learned and all are adapted
in the inner problem.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

Params = dict[str, jax.Array]
NORMALIZATIONS = ("none", "per_set_bn", "joint_bn")
BN_EPSILON = 1e-3  # TensorFlow's default, as in Finn et al.'s implementation
INIT_STD = 0.01


def check_normalization(normalization: str) -> str:
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}")
    return normalization


def init_mlp(key: jax.Array, hidden: Sequence[int] = (40, 40),
             weight_std: float = INIT_STD) -> Params:
    """Finn et al.'s initialization: weights ~ N(0, 0.01²) truncated at two standard deviations,
    biases (or BN shifts) at zero.

    With batch normalization the scale matters: the gradient of BN(W h) in W scales like 1/‖W‖,
    so small weights give a fixed inner step size α a large effect."""
    if len(hidden) < 1 or any(not isinstance(h, int) or h < 1 for h in hidden):
        raise ValueError(f"hidden must be a non-empty sequence of integers ≥ 1; got {hidden!r}")
    widths = [1, *hidden, 1]
    keys = jax.random.split(key, len(widths) - 1)
    params: Params = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        params[f"w{i}"] = weight_std * jax.random.truncated_normal(
            keys[i], -2.0, 2.0, (fan_in, fan_out), jnp.float64)
        params[f"b{i}"] = jnp.zeros((fan_out,), jnp.float64)
    return params


def depth(params: Params) -> int:
    """Number of hidden layers."""
    return sum(1 for k in params if k.startswith("w")) - 1


def batch_norm(h: jax.Array) -> jax.Array:
    """Standardize each column of ``h`` (points × units) with the batch's own statistics."""
    mean = jnp.mean(h, axis=0, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=0, keepdims=True)
    return (h - mean) * jax.lax.rsqrt(var + BN_EPSILON)


def apply_mlp(params: Params, x: jax.Array, normalization: str = "none",
              context: jax.Array | None = None) -> jax.Array:
    """Predictions (points × 1) for inputs ``x`` (points × 1).

    ``context`` (``joint_bn`` only, required there) are the inputs of the other set of the task:
    the normalization statistics are taken over ``x`` and ``context`` together."""
    check_normalization(normalization)
    n = x.shape[0]
    if normalization == "joint_bn":
        if context is None:
            raise ValueError("normalization 'joint_bn' needs the other set's inputs (context)")
        x = jnp.concatenate([x, context], axis=0)
    h = x
    hidden = depth(params)
    for i in range(hidden):
        h = h @ params[f"w{i}"]
        if normalization != "none":
            h = batch_norm(h)
        h = jax.nn.relu(h + params[f"b{i}"])
    return (h @ params[f"w{hidden}"] + params[f"b{hidden}"])[:n]


def mse(params: Params, x: jax.Array, y: jax.Array, normalization: str = "none",
        context: jax.Array | None = None) -> jax.Array:
    """Mean squared error of the MLP on one set of a task: (1/n) Σ (f(x_i) − y_i)²."""
    return jnp.mean(jnp.square(apply_mlp(params, x, normalization, context) - y))
