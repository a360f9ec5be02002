"""Where the code runs: repository paths, device, threads, provenance."""

from __future__ import annotations

import functools
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path


def repo_root() -> Path:
    """The project's root: ``I2O_ROOT`` if set, else the checkout holding this package."""
    if env := os.environ.get("I2O_ROOT"):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """Build products (executed notebooks, figures, claims, HTML): ``I2O_BUILD_DIR``/``_build``."""
    return Path(os.environ.get("I2O_BUILD_DIR", repo_root() / "_build")).resolve()


def data_dir() -> Path:
    """Data sets: ``I2O_DATA_DIR`` (e.g. ``../shared/data`` offline) or ``<repo>/data``."""
    return Path(os.environ.get("I2O_DATA_DIR", repo_root() / "data")).resolve()


def device() -> str:
    """``"cuda"`` when PyTorch sees a GPU, ``"cpu"`` otherwise."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_name() -> str:
    """A human-readable name of the accelerator the torch code uses."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({os.cpu_count()} cores)"


def set_threads(n: int | None = None) -> int:
    """Fix torch's intra-op thread count (``I2O_THREADS`` or ``n``, default 1) and return it.

    Two processes sharing two cores with default threading can each run 20× slower, so every
    entry point sets its thread count deliberately.
    """
    import torch

    n = int(os.environ.get("I2O_THREADS", n or 1))
    torch.set_num_threads(n)
    return n


def jax_single_thread() -> None:
    """Ask XLA for one CPU thread; must run before JAX is first imported."""
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    current = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in current:
        os.environ["XLA_FLAGS"] = f"{current} {flags}".strip()


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
