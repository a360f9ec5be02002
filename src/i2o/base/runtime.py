"""How numbers are computed: the device, the threads and the numerics mode with its pins.

Everything here can change a computed number, so this module is in every job's cache key (the
numerics pins also enter the key as values, :func:`numerics_key`). What cannot change a number
lives elsewhere and outside the keys (:data:`i2o.compute.results.INERT`): paths
(:mod:`i2o.base.locations`), progress bars (:mod:`i2o.base.progress`), provenance, the commit and
the clock (:mod:`i2o.base.lineage`) and the allocator (:mod:`i2o.base.allocator`).

Numerics (``I2O_NUMERICS``). The CPU kernels a library picks at run time depend on the CPU: torch
(ATen), oneDNN, MKL, OpenBLAS, NumPy and XLA each use the widest instruction set they find, and a
different kernel rounds differently, enough to move a trained model across a fit gate. In
``portable`` mode (the default) every computing process starts with each of them pinned to AVX2,
which every x86-64 CPU of the last decade has, and with fixed thread counts, so that one build
gives the same numbers on any such CPU. MKL is the exception: it honours an AVX2 branch only on
Intel CPUs (on an AMD CPU it runs its own), so it is pinned to its compatible branch, the one it
keeps identical across vendors (checked with :mod:`i2o.provenance.probes` on an AMD CPU emulated by
qemu-user; its elementwise square root stays vendor-dependent, so the book's Adam is fused,
:func:`i2o.train.schedule.adam`). ``native`` keeps each library's own choice (only the thread
counts are fixed). The pins are environment variables read when a library loads, so they are set
where processes are spawned (:func:`apply_numerics`: notebook kernels, sweep workers, benchmark
subprocesses), never after torch or JAX is imported. Any other process gets them from ``import
i2o`` when no such library is loaded yet, and one whose libraries loaded without them is refused
when it would compute a result (:mod:`i2o.pins`): a key records the pins the mode intends, and that
guard keeps results computed with other kernels out of it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def device() -> str:
    """``"cuda"`` when PyTorch sees a GPU, ``"cpu"`` otherwise."""
    import torch  # lazy: runtime is imported by the JAX chapters and the CLI, which need no torch

    return "cuda" if torch.cuda.is_available() else "cpu"
def set_threads(n: int | None = None) -> int:
    """Fix torch's intra-op thread count (``I2O_THREADS`` or ``n``, default 1) and return it.

    Two processes sharing two cores with default threading can each run 20× slower, so every
    entry point sets its thread count deliberately.
    """
    import torch  # lazy: as in device()

    n = int(os.environ.get("I2O_THREADS", n or 1))
    torch.set_num_threads(n)
    return n


def jax_single_thread() -> None:
    """Ask XLA for one CPU thread, with the numerics mode's pins; must run before JAX is first
    imported (a notebook run outside ``i2o.book`` gets the XLA pins this way too)."""
    os.environ["XLA_FLAGS"] = numerics_env()["XLA_FLAGS"]


NUMERICS_MODES = ("portable", "native")
DEFAULT_NUMERICS = "portable"
#: The instruction-set baseline of portable mode, by each library's spelling.
PORTABLE_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",      # torch's own kernels (ATen)
    "ONEDNN_MAX_CPU_ISA": "AVX2",       # oneDNN: torch's convolutions (and XLA's, when enabled)
    # MKL's code branch (torch's BLAS and LAPACK): its compatible branch, the one MKL keeps
    # identical on Intel and AMD CPUs (on AMD, MKL ignores an AVX2 branch and picks its own)
    "MKL_CBWR": "COMPATIBLE",
    "OPENBLAS_CORETYPE": "Haswell",     # OpenBLAS (NumPy's and SciPy's BLAS): its AVX2 kernels
    "NPY_ENABLE_CPU_FEATURES": "X86_V3",  # NumPy's own SIMD loops: x86-64-v3 = AVX2 + FMA
}
#: XLA's CPU pins: codegen capped at AVX2, no CPU-dependent math, no XNNPACK (which dispatches on
#: the CPU at run time and has no cap of its own).
XLA_PORTABLE_FLAGS = ("--xla_cpu_max_isa=AVX2", "--xla_cpu_enable_platform_dependent_math=false",
                      "--xla_cpu_use_xnnpack=false")
XLA_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen=false",)
#: What portable mode cannot pin, said in each chapter's provenance.
UNPINNED = ("GPU kernels (cuDNN, cuBLAS)",)


def numerics_mode() -> str:
    """The numerics mode: ``I2O_NUMERICS`` (``portable`` or ``native``), default ``portable``."""
    mode = os.environ.get("I2O_NUMERICS", "").strip().lower() or DEFAULT_NUMERICS
    if mode not in NUMERICS_MODES:
        raise ValueError(f"I2O_NUMERICS must be one of {', '.join(NUMERICS_MODES)}; "
                         f"got {os.environ['I2O_NUMERICS']!r}")
    return mode


def numerics_key() -> dict[str, Any] | None:
    """What the numerics mode contributes to a result's identity (a cache key, a notebook's
    stamp): in portable mode the mode and every pin's value, so that a change of pins recomputes
    what it changes; ``None`` in native mode (whose keys are those of the entries computed before
    the modes existed)."""
    mode = numerics_mode()
    if mode == "native":
        return None
    if not is_x86_64():  # nothing is pinned there
        return {"mode": mode}
    return {"mode": mode, "pins": PORTABLE_PINS, "xla": list(XLA_PORTABLE_FLAGS)}


def _check_mode(mode: str | None) -> str:
    if mode is None:
        return numerics_mode()
    if mode not in NUMERICS_MODES:
        raise ValueError(f"numerics mode must be one of {', '.join(NUMERICS_MODES)}; got {mode!r}")
    return mode


def xla_flags(mode: str, current: str = "") -> str:
    """``current`` XLA flags with the mode's pins and one XLA thread, pins first.

    XLA stops reading ``XLA_FLAGS`` at the first word that is not a ``--flag``
    (``intra_op_parallelism_threads=1`` is one; it is no XLA flag), silently ignoring the rest;
    such words are dropped. A flag the mode pins replaces the caller's value of it; in native mode
    the portable pins a parent passed down are dropped too.
    """
    ours = [*XLA_THREAD_FLAGS, *(XLA_PORTABLE_FLAGS if _check_mode(mode) == "portable" else ())]
    names = {flag.split("=", 1)[0] for flag in (*XLA_THREAD_FLAGS, *XLA_PORTABLE_FLAGS)}
    kept = [word for word in current.split()
            if word.startswith("--") and word.split("=", 1)[0] not in names]
    return " ".join([*ours, *kept])


def thread_env() -> dict[str, str]:
    """Fixed thread counts (the caller's, default 1): torch (``I2O_THREADS``), OpenMP, MKL,
    OpenBLAS."""
    threads = {"I2O_THREADS": os.environ.get("I2O_THREADS", "1"),
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    threads["MKL_NUM_THREADS"] = os.environ.get("MKL_NUM_THREADS", threads["OMP_NUM_THREADS"])
    threads["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS",
                                                     threads["OMP_NUM_THREADS"])
    return threads


def is_x86_64() -> bool:
    """Whether this is an x86-64 machine (the only kind portable mode pins)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def _cpuinfo(field: str) -> str | None:
    """The value of ``field`` in ``/proc/cpuinfo`` (its first processor), or ``None``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``), empty where unknown."""
    return set((_cpuinfo("flags") or "").split())


def numerics_env(mode: str | None = None) -> dict[str, str]:
    """The environment a computing process starts with in ``mode`` (default
    :func:`numerics_mode`): thread counts and XLA's one thread always; in ``portable`` mode also
    every library's AVX2 pin (x86-64 only: elsewhere there is nothing to pin to AVX2).

    Raises ``RuntimeError`` in portable mode on an x86-64 CPU without AVX2 and FMA, where the pins
    would ask for instructions it lacks.
    """
    mode = _check_mode(mode)
    env = {"I2O_NUMERICS": mode, **thread_env()}
    portable = mode == "portable" and is_x86_64()
    flags = _cpu_flags()
    if portable and flags and not {"avx2", "fma"} <= flags:
        raise RuntimeError("I2O_NUMERICS=portable pins every library to AVX2, which this CPU "
                           "lacks; set I2O_NUMERICS=native")
    if portable:
        env.update(PORTABLE_PINS)
    env["XLA_FLAGS"] = xla_flags(mode if portable else "native", os.environ.get("XLA_FLAGS", ""))
    return env


def apply_numerics(env: MutableMapping[str, str] | None = None,
                   mode: str | None = None) -> dict[str, str]:
    """Put :func:`numerics_env` into ``env`` (default ``os.environ``) and return what was set.

    The one place every spawner calls (notebook kernels, sweep workers, benchmarks), before the
    child starts. In native mode, pins inherited from a portable parent are removed.
    """
    env = os.environ if env is None else env
    values = numerics_env(mode)
    if values["I2O_NUMERICS"] == "native":
        for name in PORTABLE_PINS:
            env.pop(name, None)
    env.update(values)
    return values


@contextmanager
def environment(values: Mapping[str, str], drop: Iterable[str] = ()) -> Iterator[None]:
    """``os.environ`` updated with ``values`` and without the names in ``drop`` for the duration
    of the block (the processes it spawns inherit it), then restored as it was."""
    saved = dict(os.environ)
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
