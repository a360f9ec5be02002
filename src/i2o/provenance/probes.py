"""Numerics probes: one short, fixed computation per kernel family the chapters use, fingerprinted.

Each probe feeds inputs drawn from a seeded NumPy generator (identical on every machine) through
one family of kernels as the chapters call them, and returns the arrays it produced; its
fingerprint is the SHA-256 of their bytes (:func:`digest`). Two machines whose probes agree run
those kernels bit for bit alike; where a chapter's results differ between machines, the first
probe that differs names the library to blame.

- ``mdeq_train_step``: the TINY MDEQ (convolutions, GroupNorm, BatchNorm, the head), two IFT
  training steps with Broyden forward and backward solves, Adam (the stability, deq_gaps and
  diagnose chapters);
- ``conv_group_norm``: a 3×3 convolution and GroupNorm, forward and backward, channels-last, alone;
- ``wide_convolutions``: oneDNN's convolutions alone at the widest shapes the chapters' MDEQs run
  (``cpu_small`` and ``TINY``, :data:`WIDE_CONVOLUTIONS`), forward and backward (gradients of
  input, weight and bias), channels-last: the kernels whose blocking oneDNN sizes from the CPU's
  caches;
- ``broyden_solve``: a Broyden solve of a random contraction (its low-rank updates are batched
  matrix products);
- ``numpy_products``: the DEQ transformer's matrix products alone, through
  :mod:`i2o.models.portable_products` (in portable mode NumPy's OpenBLAS): a linear layer at the
  chapter's shapes forward and backward (its weight's gradient sums over 2048 rows) and attention's
  batched product forward and backward;
- ``transformer_step``: the DEQ transformer language model (linear layers and causal attention,
  whose products go through :mod:`i2o.models.portable_products`, LayerNorm), one unrolled
  training step;
- ``torch_mlp``: a ReLU MLP trained by Adam (the separation chapter's networks);
- ``torch_vector_math``: torch's elementwise exponential, logarithm and tanh in float32 and its
  exponential in float64 (MKL's vector math);
- ``torch_sqrt``: torch's elementwise square root in float32 and float64, which torch takes
  from MKL's vector math (the CPU's default Adam's square root: not portable, kept as the witness of
  why the book's Adam is fused, :func:`i2o.train.schedule.adam`);
- ``jax_mlp_lbfgs``: a JAX MLP's gradient with a batch normalisation, jaxopt's L-BFGS and optax's
  Adam, in float64 (the meta chapter);
- ``numpy_scipy``: NumPy's and SciPy's linear solves and SciPy's DOP853 integrator (the affine and
  separation chapters).

``python -m i2o.probes`` prints the fingerprints as JSON; :func:`run` computes them in a fresh
process started with the numerics pins (:func:`i2o.base.runtime.numerics_env`), optionally under an
emulated CPU (``qemu-x86_64 -cpu MODEL``, :func:`run`'s ``emulate``), which shows what another
vendor's CPU would compute without one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from i2o.base import lineage, runtime
from i2o.base.digests import arrays_sha256
from i2o.compute import inputs

#: The CPU models of qemu-user that stand for the CPUs the book is run on without one: an AMD
#: EPYC (AuthenticAMD, 512 KB L2) and an Intel Haswell (the AVX2 baseline).
EMULATED_CPUS = ("EPYC-Rome", "Haswell-v4")


def digest(arrays: Iterable[Any]) -> str:
    """SHA-256 (hex) of the arrays' dtypes, shapes and bytes, in order."""
    return arrays_sha256(arrays)


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _torch_setup() -> Any:
    import torch

    torch.set_num_threads(int(os.environ.get("I2O_THREADS", "1")))
    torch.manual_seed(0)
    return torch


def mdeq_train_step() -> list[Any]:
    torch = _torch_setup()
    from i2o.deq import DEQ, SolverSpec
    from i2o.models import MDEQClassifier, config
    from i2o.train.classifier import mdeq_loss
    from i2o.train.schedule import make_optimizer

    rng = np.random.default_rng(1)
    model = MDEQClassifier(config("tiny")).train()
    images = torch.from_numpy(_normal(rng, 8, 3, 32, 32))
    labels = torch.from_numpy(rng.integers(0, 10, 8))
    optimizer = make_optimizer(model, 1e-3, 2.5e-6)
    spec = SolverSpec(method="broyden", max_iter=4, tol=0.0, stop_mode="rel")
    deq = DEQ(forward=spec, backward="ift", backward_spec=spec)
    losses = []
    for _ in range(2):
        optimizer.zero_grad()
        loss, _, _ = mdeq_loss(model, deq, images, labels, pretraining=False)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return [*losses, *model.parameters()]


def conv_group_norm() -> list[Any]:
    torch = _torch_setup()
    import torch.nn.functional as F

    rng = np.random.default_rng(2)
    x = torch.from_numpy(_normal(rng, 16, 24, 16, 16)).to(memory_format=torch.channels_last)
    x.requires_grad_()
    w = torch.from_numpy(_normal(rng, 24, 24, 3, 3)).requires_grad_()
    gamma, beta = torch.from_numpy(_normal(rng, 24)), torch.from_numpy(_normal(rng, 24))
    y = F.group_norm(F.conv2d(x, w, padding=1), 4, gamma, beta)
    y.square().sum().backward()
    return [y, x.grad, w.grad]


class Convolution(NamedTuple):
    """A 2-d convolution as a model runs it: padding ``kernel // 2``, square ``size`` input."""

    c_in: int
    c_out: int
    kernel: int
    stride: int
    size: int
    bias: bool


#: The widest convolutions of each MDEQ configuration the chapters train (``cpu_small`` in the
#: quick profiles, ``tiny`` in the paper profiles; :mod:`i2o.models.mdeq`) on CIFAR-10's 32×32
#: images, from its channels per branch, expansion and finest branch's size (16×16 after
#: ``cpu_small``'s strided stem, 32×32 in ``tiny``): per kernel family of oneDNN (3×3, 3×3 stride 2,
#: 1×1), the convolutions of ``f`` at the finest branch (run at every solver step) and the head's
#: widest (8 and 16 head channels widened ×4, 200 final channels). The model has no grouped one.
WIDE_CONVOLUTIONS: dict[str, tuple[Convolution, ...]] = {
    name: (Convolution(c, c * expansion, 3, 1, size, False),  # residual block: conv₁ widens
           Convolution(c * expansion, c, 3, 1, size, False),  # conv₂ narrows
           Convolution(c, c, 3, 2, size, False),              # fuse: down to the coarse branch
           Convolution(c, c, 1, 1, size // 2, False),         # fuse: up, 1×1 before upsampling
           Convolution(c, c, 1, 1, size, False),              # post-fuse 1×1
           Convolution(32, 64, 3, 2, size, True),             # head: stride-2 convolution
           Convolution(64, 200, 1, 1, size // 2, True))       # head: projection to 200
    for name, c, expansion, size in (("cpu_small", 16, 2, 16), ("tiny", 24, 5, 32))}
#: Images per convolution of :func:`wide_convolutions`.
WIDE_CONVOLUTION_BATCH = 16


def wide_convolutions() -> list[Any]:
    """Each of :data:`WIDE_CONVOLUTIONS` forward, then backward (gradients of input, weight and
    bias) from a random output gradient, on channels-last float32 tensors as the MDEQ runs them.

    The batch is 16, not the chapters' 20 (quick) or 128 (paper), to keep the probe short under
    emulation: with one thread, torch sends a 1×1 convolution to oneDNN only from 16 images on
    (below, to its own kernel), and oneDNN picks its implementation and blocking, which fix the
    order of every sum, from the channels, the spatial size and the caches. Its cost model also
    counts the batch, so this was checked on an AMD EPYC (family 25, model 17): every convolution
    of both configurations gave at batch 16 the bits it gave at 20, 32, 100, 128 and 250 (each
    image's output and input gradient; the weight and bias gradients with the further images'
    output gradient set to zero), which at batch 8 its 1×1 convolutions did not.
    """
    torch = _torch_setup()
    import torch.nn.functional as F

    rng = np.random.default_rng(10)
    channels_last = torch.channels_last
    found = []
    for conv in (conv for convs in WIDE_CONVOLUTIONS.values() for conv in convs):
        x = torch.from_numpy(_normal(rng, WIDE_CONVOLUTION_BATCH, conv.c_in, conv.size, conv.size))
        x = x.to(memory_format=channels_last).requires_grad_()
        w = torch.from_numpy(_normal(rng, conv.c_out, conv.c_in, conv.kernel, conv.kernel))
        w = w.to(memory_format=channels_last).requires_grad_()
        b = torch.from_numpy(_normal(rng, conv.c_out)).requires_grad_() if conv.bias else None
        y = F.conv2d(x, w, b, stride=conv.stride, padding=conv.kernel // 2)
        y.backward(torch.from_numpy(_normal(rng, *y.shape)).to(memory_format=channels_last))
        found += [y, x.grad, w.grad, *([] if b is None else [b.grad])]
    return found


def broyden_solve() -> list[Any]:
    torch = _torch_setup()
    from i2o.deq import SolverSpec, solve

    rng = np.random.default_rng(3)
    a = torch.from_numpy(_normal(rng, 300, 300)) / 40.0
    b = torch.from_numpy(_normal(rng, 20, 300))
    spec = SolverSpec(method="broyden", max_iter=30, tol=0.0, stop_mode="rel")
    result = solve(lambda z: torch.tanh(z @ a + b), torch.zeros(20, 300), spec,
                   differentiable=False)
    return [result.z, result.fz]


def numpy_products() -> list[Any]:
    torch = _torch_setup()
    from i2o.models.portable_products import linear, matmul

    rng = np.random.default_rng(9)
    x = torch.from_numpy(_normal(rng, 2048, 64)).requires_grad_()
    weight = torch.from_numpy(_normal(rng, 192, 64)).requires_grad_()
    bias = torch.from_numpy(_normal(rng, 192)).requires_grad_()
    y = linear(x, weight, bias)
    y.backward(torch.from_numpy(_normal(rng, 2048, 192)))
    q = torch.from_numpy(_normal(rng, 32, 4, 64, 16)).requires_grad_()
    k = torch.from_numpy(_normal(rng, 32, 4, 64, 16)).requires_grad_()
    scores = matmul(q, k.transpose(-1, -2))
    scores.backward(torch.from_numpy(_normal(rng, 32, 4, 64, 64)))
    return [y, x.grad, weight.grad, bias.grad, scores, q.grad, k.grad]


def transformer_step() -> list[Any]:
    torch = _torch_setup()
    from i2o.deq import DEQ, SolverSpec
    from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig
    from i2o.train.schedule import adam

    rng = np.random.default_rng(4)
    model = DEQTransformerLM(TransformerConfig(context=16, width=32, heads=4, ffn_width=64))
    tokens = torch.from_numpy(rng.integers(0, 65, (6, 17)))
    spec = SolverSpec(method="broyden", max_iter=6, tol=0.0, stop_mode="rel")
    deq = DEQ(forward=spec, backward="unrolled", output="z")
    optimizer = adam(model.parameters(), lr=1e-3)
    x = model.inject(tokens[:, :-1])
    z, _ = deq(model.f, x, model.initial_state(x))
    loss = model.token_nll(z, tokens[:, 1:]).mean()
    loss.backward()
    optimizer.step()
    return [loss.detach(), *model.parameters()]


def torch_mlp() -> list[Any]:
    torch = _torch_setup()
    from i2o.train.schedule import adam

    rng = np.random.default_rng(5)
    x, y = torch.from_numpy(_normal(rng, 64, 6)), torch.from_numpy(_normal(rng, 64, 1))
    net = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = adam(net.parameters(), lr=1e-2)
    for _ in range(5):
        optimizer.zero_grad()
        loss = (net(x) - y).square().mean()
        loss.backward()
        optimizer.step()
    return [loss.detach(), *net.parameters()]


def torch_vector_math() -> list[Any]:
    torch = _torch_setup()

    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.random(4099).astype(np.float32) + 0.1)
    return [x.exp(), x.log(), x.tanh(), x.double().exp()]


def torch_sqrt() -> list[Any]:
    torch = _torch_setup()

    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.random(4099).astype(np.float32) + 0.1)
    return [x.sqrt(), x.double().sqrt()]


def jax_mlp_lbfgs() -> list[Any]:
    runtime.jax_single_thread()
    import jax
    import jax.numpy as jnp
    import jaxopt
    import optax

    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(6)
    x, y = jnp.asarray(rng.standard_normal((20, 1))), jnp.asarray(rng.standard_normal((20, 1)))
    params = (jnp.asarray(rng.standard_normal((1, 40))) * 0.5, jnp.zeros(40),
              jnp.asarray(rng.standard_normal((40, 1))) * 0.2, jnp.zeros(1))

    def loss(p: tuple) -> jax.Array:
        hidden = x @ p[0] + p[1]
        mean, var = jnp.mean(hidden, axis=0), jnp.var(hidden, axis=0)
        hidden = jax.nn.relu((hidden - mean) * jax.lax.rsqrt(var + 1e-5))
        return jnp.mean((hidden @ p[2] + p[3] - y) ** 2) + 1e-3 * sum(jnp.sum(q * q) for q in p)

    gradient = jax.grad(loss)(params)
    solution = jaxopt.LBFGS(fun=loss, maxiter=20).run(params).params
    optimizer = optax.adam(1e-2)
    state, trained = optimizer.init(params), params
    for _ in range(5):
        updates, state = optimizer.update(jax.grad(loss)(trained), state)
        trained = optax.apply_updates(trained, updates)
    return [*jax.tree_util.tree_leaves(gradient), *jax.tree_util.tree_leaves(solution),
            *jax.tree_util.tree_leaves(trained)]


def numpy_scipy() -> list[Any]:
    import scipy.integrate
    import scipy.linalg

    rng = np.random.default_rng(7)
    a = rng.standard_normal((200, 200))
    b = rng.standard_normal((200, 3))
    spd = a @ a.T + 200 * np.eye(200)
    flow = scipy.integrate.solve_ivp(lambda _, w: -np.tanh(a[:20, :20] @ w), (0.0, 2.0),
                                     np.ones(20), method="DOP853", rtol=1e-10, atol=1e-12)
    return [a @ b, np.linalg.solve(a + 20 * np.eye(200), b), scipy.linalg.solve(spd, b,
            assume_a="pos"), np.linalg.eigvalsh(spd), flow.y[:, -1]]


#: Every probe, in the order they are reported (the kernel family each exercises is its name).
PROBES: dict[str, Callable[[], list[Any]]] = {
    "mdeq_train_step": mdeq_train_step, "conv_group_norm": conv_group_norm,
    "wide_convolutions": wide_convolutions, "broyden_solve": broyden_solve,
    "numpy_products": numpy_products, "transformer_step": transformer_step, "torch_mlp": torch_mlp,
    "torch_vector_math": torch_vector_math, "torch_sqrt": torch_sqrt,
    "jax_mlp_lbfgs": jax_mlp_lbfgs, "numpy_scipy": numpy_scipy}


def compute(names: Iterable[str] | None = None) -> dict[str, str]:
    """Each probe's fingerprint, computed in this process (whose numerics pins are its own)."""
    names = list(PROBES if names is None else names)
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe(s) {', '.join(map(repr, unknown))}; allowed: "
                         f"{', '.join(PROBES)}")
    return {name: digest(PROBES[name]()) for name in names}


def qemu() -> str | None:
    """The qemu-user binary for this machine's architecture, or ``None``."""
    return shutil.which("qemu-x86_64") if runtime.is_x86_64() else None


def emulated_vendor(model: str) -> str:
    """The CPUID vendor of a qemu CPU model (``EPYC-Rome`` → ``AuthenticAMD``)."""
    amd = model.split("-")[0] in ("EPYC", "Opteron_G1", "Opteron_G2", "Opteron_G3", "Opteron_G4",
                                  "Opteron_G5", "phenom")
    return "AuthenticAMD" if amd else ("HygonGenuine" if model.startswith("Dhyana")
                                       else "GenuineIntel")


def run(mode: str | None = None, emulate: str | None = None,
        names: Iterable[str] | None = None, timeout: float = 1800) -> dict[str, Any]:
    """The probes' fingerprints computed in a fresh process started in numerics ``mode``
    (default the current one), with the machine that computed them; under ``emulate`` (a
    qemu-user CPU model such as ``"EPYC-Rome"``) the process runs on that emulated CPU."""
    env = dict(os.environ)
    runtime.apply_numerics(env, mode=mode)
    command = [sys.executable, "-m", "i2o.probes", "--here", *(names or [])]
    if emulate:
        binary = qemu()
        if binary is None:
            raise RuntimeError("--emulate needs qemu-x86_64 on an x86-64 machine (Debian "
                               "package qemu-user); `qemu-x86_64 -cpu help` lists the models")
        command = [binary, "-cpu", emulate, *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"probes ({emulate or 'this CPU'}) failed:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout)
    if emulate:  # the process read the host's /proc/cpuinfo: say what it ran on instead
        machine = found["machine"]
        machine.update(cpu=f"{emulate} emulated by qemu-user (host: {machine['cpu']})",
                       vendor=emulated_vendor(emulate), flags=None, caches=None)
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.probes [NAME ...] [--emulate MODEL]``: print the probes' fingerprints."""
    parser = argparse.ArgumentParser(prog="python -m i2o.probes",
                                     description="Fingerprint each kernel family the chapters "
                                                 "use, in a fresh process with the numerics pins.")
    parser.add_argument("names", nargs="*", help=f"probes (default all): {', '.join(PROBES)}")
    parser.add_argument("--emulate", metavar="MODEL",
                        help="run on a CPU emulated by qemu-user, e.g. EPYC-Rome")
    parser.add_argument("--here", action="store_true",
                        help="compute in this process, as it was started (no pins applied)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in PROBES]
    if unknown:
        parser.error(f"unknown probe(s) {', '.join(unknown)}; allowed: {', '.join(PROBES)}")
    try:
        inputs.check_environment()  # I2O_THREADS sets the probes' torch threads
    except inputs.ParameterError as error:
        print(f"python -m i2o.probes: error: {error}", file=sys.stderr)
        return 2
    if args.here:
        found = {"machine": lineage.machine_facts(), "probes": compute(args.names or None)}
    else:
        try:
            found = run(emulate=args.emulate, names=args.names)
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    print(json.dumps(found, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
