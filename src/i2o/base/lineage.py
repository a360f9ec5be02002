"""Where and how a result was computed: the machine, library versions, numerics pins in effect,
the commit and the time.

These facts are stored beside results and printed in chapters; they never change a computed
number, so this module is outside every job's cache key (:data:`i2o.compute.results.INERT`). What
does change numbers (the numerics mode, its pins, the threads) is :mod:`i2o.base.runtime`'s.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.base.runtime import (
    PORTABLE_PINS,
    UNPINNED,
    XLA_PORTABLE_FLAGS,
    _cpu_flags,
    _cpuinfo,
    is_x86_64,
    numerics_mode,
    thread_env,
)


def device_name() -> str:
    """A human-readable name of the accelerator the torch code uses."""
    import torch  # lazy: the JAX chapters and the CLI need no torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({os.cpu_count()} cores)"


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
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=locations.repo_root(),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=locations.repo_root(),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
