"""Where the code runs: repository paths, device, threads, numerics, provenance, progress.

Numerics (``I2O_NUMERICS``). The CPU kernels a library picks at run time depend on the CPU: torch
(ATen), oneDNN, MKL, OpenBLAS, NumPy and XLA each use the widest instruction set they find, and a
different kernel rounds differently, enough to move a trained model across a fit gate. In
``portable`` mode (the default) every computing process starts with each of them pinned to AVX2,
which every x86-64 CPU of the last decade has, and with fixed thread counts, so that one build
gives the same numbers on any such CPU. MKL is the exception: it honours an AVX2 branch only on
Intel CPUs (on an AMD CPU it runs its own), so it is pinned to its compatible branch, the one it
keeps identical across vendors (checked with :mod:`i2o.probes` on an AMD CPU emulated by
qemu-user; its elementwise square root stays vendor-dependent, so the book's Adam is fused,
:func:`i2o.train.schedule.adam`). ``native`` keeps each library's own choice (only the thread
counts are fixed). The pins are environment variables read when a library loads, so they are set
where processes are spawned (:func:`apply_numerics`: notebook kernels, sweep workers, benchmark
subprocesses), never after torch or JAX is imported.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.metadata
import io
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm


def repo_root() -> Path:
    """The project's root: ``I2O_ROOT`` if set, else the checkout holding this package."""
    if env := os.environ.get("I2O_ROOT"):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """Build products (executed notebooks, figures, claims, HTML): ``I2O_BUILD_DIR``/``_build``."""
    return Path(os.environ.get("I2O_BUILD_DIR", repo_root() / "_build")).resolve()


def cache_dir() -> Path:
    """Decoded arrays and data locks: ``I2O_CACHE_DIR`` or ``<repo>/data/cache``."""
    return Path(os.environ.get("I2O_CACHE_DIR", repo_root() / "data" / "cache"))


def data_dir() -> Path:
    """Data sets: ``I2O_DATA_DIR`` (e.g. ``../shared/data`` offline) or ``<repo>/data``."""
    return Path(os.environ.get("I2O_DATA_DIR", repo_root() / "data")).resolve()


def device() -> str:
    """``"cuda"`` when PyTorch sees a GPU, ``"cpu"`` otherwise."""
    import torch  # lazy: runtime is imported by the JAX chapters and the CLI, which need no torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_name() -> str:
    """A human-readable name of the accelerator the torch code uses."""
    import torch  # lazy: as in device()

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({os.cpu_count()} cores)"


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

    XLA stops reading ``XLA_FLAGS`` at the first word that is not a ``--flag`` (the old
    ``intra_op_parallelism_threads=1`` is one; it is no XLA flag), silently ignoring the rest;
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


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    return (_cpuinfo("model name") or platform.processor() or platform.machine()
            or "unknown")


def _torch_facts() -> dict[str, Any]:
    """What the imported torch uses; nothing when this process has not imported it (importing it
    here would be the only reason to)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"torch_cpu_capability": "torch not loaded", "torch_threads": None,
                "device": "cpu (torch not loaded)"}
    cuda = torch.cuda.is_available()
    return {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_threads": torch.get_num_threads(),
            "device": torch.cuda.get_device_name(0) if cuda else "cpu"}


def _cpu_vendor() -> str:
    return _cpuinfo("vendor_id") or "unknown"


#: The CPU features that decide which kernels a library may pick (the rest of the flags do not).
KERNEL_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "amx_tile", "avx_vnni")


def machine_facts() -> dict[str, Any]:
    """The machine as a fingerprint names it: CPU model, vendor and kernel-relevant flags, cache
    sizes as the OS reports them, library versions and the numerics mode with its pins."""
    flags = _cpu_flags()
    caches = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text()
            caches[f"L{level} {kind.strip().lower()}"] = (index / "size").read_text().strip()
        except OSError:
            continue
    return {"cpu": _cpu_model(), "vendor": _cpu_vendor(), "machine": platform.machine(),
            "flags": [flag for flag in KERNEL_FLAGS if flag in flags], "caches": caches,
            "cores": os.cpu_count(), "python": platform.python_version(),
            **{package: _version(package) for package in
               ("torch", "jax", "jaxlib", "jaxopt", "numpy", "scipy")},
            "numerics": numerics_mode(),
            "pins": {name: os.environ.get(name) for name in PORTABLE_PINS},
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "threads": thread_env()}


def provenance() -> dict[str, Any]:
    """The machine and numerics a result was computed with: CPU model and cores, library
    versions, torch's CPU capability and threads, the device, the numerics mode with the pins
    found in this process's environment (``pinned``: whether every pin of the mode is in effect)
    and what no pin covers."""
    mode = numerics_mode()
    expected = PORTABLE_PINS if mode == "portable" and is_x86_64() else {}
    pins = {name: os.environ.get(name) for name in PORTABLE_PINS}
    xla = os.environ.get("XLA_FLAGS", "")
    pinned = all(pins[name] == value for name, value in expected.items()) and (
        not expected or all(flag in xla.split() for flag in XLA_PORTABLE_FLAGS))
    if mode == "native":
        unpinned = ["native mode: each library picks its CPU kernels"]
    else:
        unpinned = list(UNPINNED) if expected else ["not x86-64: no instruction-set pin"]
    return {"numerics": mode, "pinned": pinned, "pins": pins, "xla_flags": xla,
            "threads": thread_env(), "cpu": _cpu_model(), "cores": os.cpu_count(),
            "machine": platform.machine(), "python": platform.python_version(),
            "torch": _version("torch"), "jax": _version("jax"), "jaxlib": _version("jaxlib"),
            "numpy": _version("numpy"), **_torch_facts(), "unpinned": unpinned}


def provenance_line(facts: dict[str, Any]) -> str:
    """One line for a chapter's header: numerics mode and pins, next to the machine."""
    if facts["numerics"] == "native":
        how = "native (each library picks its CPU kernels)"
    elif facts["pinned"]:
        how = ("portable (torch, oneDNN, OpenBLAS, NumPy and XLA pinned to AVX2, MKL to its "
               "compatible branch; "
               f"not pinned: {'; '.join(facts['unpinned'])})")
    else:
        how = ("portable requested but NOT in effect (pins missing from this process's "
               "environment: start it through make or python -m i2o.book)")
    torch = (f"torch {facts['torch']} with {facts['torch_cpu_capability']} kernels"
             if facts["torch_threads"] is not None else f"torch {facts['torch']} (not loaded)")
    return (f"Numerics {how}; {facts['cpu']} ({facts['cores']} cores), {torch}, jaxlib "
            f"{facts['jaxlib']}, {facts['threads']['I2O_THREADS']} torch thread(s).")


@functools.cache
def git_sha() -> str:
    """The checkout's commit (with ``-dirty`` if the tree has changes), or ``unknown``."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=repo_root(),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo_root(),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.cache
def _fd_stream(fd: int) -> TextIO:
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True)


def terminal_stream() -> TextIO | None:
    """Where progress goes: the terminal, never a notebook's output.

    Inside a Jupyter kernel (papermill), ``sys.stderr`` and even file descriptor 2 are captured
    into the notebook; ipykernel keeps a copy of the original descriptor, which reaches the
    terminal of ``make book`` — that copy is used. ``None`` when a kernel offers no such copy
    (progress is then off rather than printed into the page). Elsewhere: ``sys.stderr``.
    """
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        return _fd_stream(fd)
    if type(sys.stderr).__module__.startswith("ipykernel"):
        # descriptor 2 not watched (ipykernel does not under pytest): it is the terminal
        watched = getattr(sys.stderr, "_should_watch", True)
        return sys.__stderr__ if watched is False and sys.__stderr__ is not None else None
    return sys.stderr


def progress_enabled() -> bool:
    """Progress bars are on unless ``I2O_PROGRESS=0``."""
    return os.environ.get("I2O_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


class Progress:
    """A progress bar with rate and ETA on the terminal (tqdm), for every long loop.

    ``Progress(total, "train MDEQ", unit="step")``; ``update(n)``, ``note(**values)`` (shown after
    the bar), ``close()``; usable as a context manager, and ``Progress.over(iterable, ...)`` wraps
    a loop. Written to :func:`terminal_stream` only, so nothing reaches a notebook's pages; off
    with ``I2O_PROGRESS=0`` or ``enabled=False``. Updates at most every ``I2O_PROGRESS_INTERVAL``
    seconds (default 1 on a terminal, 30 in a log file). On a terminal a finished bar is erased
    (``leave``); in a log file its last state stays.
    """

    def __init__(self, total: int | None, desc: str, unit: str = "it", initial: int = 0,
                 enabled: bool | None = None, leave: bool | None = None) -> None:
        stream = terminal_stream()
        on = (progress_enabled() if enabled is None else enabled) and stream is not None
        interactive = bool(on and getattr(stream, "isatty", lambda: False)())
        interval = float(os.environ.get("I2O_PROGRESS_INTERVAL", 1.0 if interactive else 30.0))
        self.enabled = on
        self._bar = tqdm(total=total, initial=initial, desc=f"[i2o] {desc}", unit=unit,
                         file=stream, disable=not on, mininterval=interval,
                         leave=(not interactive) if leave is None else leave,
                         dynamic_ncols=interactive, ascii=not interactive)

    @classmethod
    def over(cls, items: Iterable[Any], desc: str, unit: str = "it", total: int | None = None,
             **options: Any) -> Iterator[Any]:
        """Iterate over ``items``, advancing a bar by one per item."""
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        with cls(total, desc, unit=unit, **options) as bar:
            for item in items:
                yield item
                bar.update(1)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def note(self, **values: Any) -> None:
        self._bar.set_postfix(values, refresh=False)

    @property
    def n(self) -> int:
        return int(self._bar.n)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- keep freed memory in the process ---------------------------------------------------------
# A training step allocates and frees many large tensors (tens of MB each for the TINY model at
# batch 128). glibc's ``malloc`` serves such blocks with ``mmap`` and returns them with ``munmap``,
# so every step pays the kernel to map and zero fresh pages again: on the 2-core CPU of this
# project that was about half of a TINY step's time, spent in the kernel.

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


@functools.cache
def keep_freed_memory() -> bool:
    """Ask glibc (``mallopt``) to serve every block from the heap (``M_MMAP_MAX = 0``) and never
    give the heap back (``M_TRIM_THRESHOLD`` = 1 TiB), so that freed blocks are reused: the
    allocator setting that halves a DEQ step's time. The process's resident size then stays at
    its peak; peak memory itself is unchanged up to fragmentation. Applied once per process;
    ``False`` where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**30 - 1))
