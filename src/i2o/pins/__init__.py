"""Whether this process computes with portable mode's pins, and the refusal when it does not.

The pins of portable mode (:data:`i2o.base.runtime.PORTABLE_PINS` and the XLA flags) are environment
variables each library reads once: NumPy and its OpenBLAS when they load, torch's ATen, oneDNN
and MKL, and XLA when first used. A process that loaded a library without them computes with other
kernels, and so other last bits, while its cache key (:func:`i2o.base.runtime.numerics_key`) records
the pins the mode intends. Notebook kernels and job workers start with the pins
(:func:`i2o.base.runtime.apply_numerics`); this module covers every other process that imports i2o.

- Importing :mod:`i2o` calls :func:`pin_at_import`: in portable mode on x86-64, when none of
  those libraries is loaded yet and no pin is set, it puts the pins into ``os.environ``, so that
  the libraries load pinned (a plain ``python`` or ``pytest`` that imports i2o first is pinned);
  otherwise it changes nothing and records the libraries already loaded whose pins the
  environment lacked.
- :func:`unpinned` names what keeps this process from the pins: such a library, a pin missing from
  the environment now, or a library that reports other kernels than the pinned ones (torch's CPU
  capability, NumPy's SIMD targets, the OpenBLAS core of NumPy and SciPy).
- :func:`require_pinned` refuses (:class:`UnpinnedError`) when it names anything; the results
  cache calls it before computing a missing entry in this process
  (:func:`i2o.compute.results.cached`), so reading the cache stays allowed. Native mode, and a
  machine other than x86-64, pin nothing and are never refused.

``python -m i2o.pins env`` prints the environment a computing process starts with, as shell
lines: ``eval "$(python -m i2o.pins env)"`` before starting Python gives it the pins. Only the
package face and the cache machinery import this module, so it is in no cache key.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from i2o.base import runtime

#: The pins each library reads, by the name it is imported as.
READS = {
    "numpy": ("NPY_ENABLE_CPU_FEATURES", "OPENBLAS_CORETYPE"),
    "scipy": ("OPENBLAS_CORETYPE",),
    "torch": ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR"),
    "jax": ("XLA_FLAGS",),
    "jaxlib": ("XLA_FLAGS",),
}
#: Every pin, ``XLA_FLAGS`` standing for XLA's portable flags.
ALL_PINS = (*runtime.PORTABLE_PINS, "XLA_FLAGS")
#: What OpenBLAS calls the core its pin selects (``OPENBLAS_CORETYPE``).
OPENBLAS_CORE = runtime.PORTABLE_PINS["OPENBLAS_CORETYPE"]
#: What torch calls the kernels its pin selects (``ATEN_CPU_CAPABILITY``).
TORCH_CAPABILITY = runtime.PORTABLE_PINS["ATEN_CPU_CAPABILITY"].upper()

#: The libraries loaded before i2o, each with the pins the environment lacked at that moment.
_loaded_before: dict[str, tuple[str, ...]] = {}


class UnpinnedError(RuntimeError):
    """A result would be computed in portable mode by a process that lacks the pins."""


def pins_wanted() -> bool:
    """Whether the numerics mode pins this machine: portable mode on an x86-64 CPU."""
    return runtime.numerics_mode() == "portable" and runtime.is_x86_64()


def missing(names: tuple[str, ...], env: Mapping[str, str]) -> tuple[str, ...]:
    """Of the pins ``names``, those ``env`` lacks, each as ``NAME=value`` (``XLA_FLAGS`` stands
    for XLA's portable flags, lacking when one of them is)."""
    absent = []
    for name in names:
        if name == "XLA_FLAGS":
            if not set(runtime.XLA_PORTABLE_FLAGS) <= set(env.get(name, "").split()):
                absent.append(f"XLA_FLAGS={' '.join(runtime.XLA_PORTABLE_FLAGS)}")
        elif env.get(name) != runtime.PORTABLE_PINS[name]:
            absent.append(f"{name}={runtime.PORTABLE_PINS[name]}")
    return tuple(absent)


def pin_at_import() -> None:
    """Record the libraries already loaded without their pins; when none of :data:`READS` is
    loaded and the environment holds none of the pins, in portable mode on an x86-64 CPU with
    AVX2 and FMA, put every pin into ``os.environ`` (the caller's other XLA flags kept).
    Otherwise the environment is left as it is: a process that loaded a library is not half
    pinned, and one started with some of the pins was given them on purpose (a benchmark that
    leaves one out). Called once, by ``import i2o``; a bad ``I2O_NUMERICS`` is left to fail
    where the mode is used."""
    loaded = [library for library in READS if library in sys.modules]
    for library in loaded:
        if lacking := missing(READS[library], os.environ):
            _loaded_before[library] = lacking
    if loaded or len(missing(ALL_PINS, os.environ)) < len(ALL_PINS):
        return
    try:
        env = runtime.numerics_env() if pins_wanted() else {}
    except (ValueError, RuntimeError):  # a bad mode, or a CPU without AVX2: said when computing
        return
    os.environ.update({name: env[name] for name in ALL_PINS if name in env})


def torch_kernels() -> str | None:
    """The CPU kernels torch dispatches to (``"AVX2"``, ``"AVX512"``, …), ``None`` before torch
    is imported."""
    if "torch" not in sys.modules:
        return None
    return str(sys.modules["torch"].backends.cpu.get_cpu_capability())


def numpy_targets_above_pin() -> list[str]:
    """NumPy's SIMD dispatch targets enabled beyond x86-64-v3 (AVX-512), empty before NumPy is
    imported or where it does not report them."""
    if "numpy" not in sys.modules:
        return []
    for name in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            umath = importlib.import_module(name)
            break
        except ImportError:
            continue
    else:
        return []
    features = getattr(umath, "__cpu_features__", {})
    return [target for target in getattr(umath, "__cpu_dispatch__", ())
            if features.get(target) and (target.startswith("AVX512") or target == "X86_V4")]


def openblas_cores() -> dict[str, str]:
    """The core each loaded OpenBLAS of NumPy or SciPy runs (``"Haswell"``, ``"SkylakeX"``, …),
    by package; a library not loaded yet is not loaded by asking."""
    cores = {}
    for package in ("numpy", "scipy"):
        module = sys.modules.get(package)
        if module is None or not getattr(module, "__file__", None):
            continue
        libs = Path(module.__file__).resolve().parent.parent / f"{package}.libs"
        for path in sorted(libs.glob("*openblas*")):
            if (core := _openblas_core(path)) is not None:
                cores[package] = core
    return cores


def _openblas_core(path: Path) -> str | None:
    try:
        library = ctypes.CDLL(str(path), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except (OSError, AttributeError):  # not loaded, or no RTLD_NOLOAD on this platform
        return None
    for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                   "openblas_get_corename64_", "openblas_get_corename"):
        function = getattr(library, symbol, None)
        if function is not None:
            function.restype = ctypes.c_char_p
            return function().decode()
    return None


def unpinned() -> list[str]:
    """What keeps this process from computing with the portable pins, one phrase each; empty
    when nothing does or when the mode pins nothing here (native mode, not x86-64)."""
    if not pins_wanted():
        return []
    found = [f"{library} was imported before i2o, without {', '.join(lacking)}"
             for library, lacking in _loaded_before.items() if library in sys.modules]
    said = {pin for lacking in _loaded_before.values() for pin in lacking}
    if lacking := [pin for pin in missing(ALL_PINS, os.environ) if pin not in said]:
        found.append(f"the environment lacks {', '.join(lacking)}")
    if (kernels := torch_kernels()) not in (None, TORCH_CAPABILITY):
        found.append(f"torch runs its {kernels} kernels, not {TORCH_CAPABILITY}")
    if targets := numpy_targets_above_pin():
        found.append(f"NumPy dispatches to {', '.join(targets)}")
    found += [f"{package}'s OpenBLAS runs its {core} core, not {OPENBLAS_CORE}"
              for package, core in openblas_cores().items() if core != OPENBLAS_CORE]
    return found


def require_pinned(what: str) -> None:
    """Raise :class:`UnpinnedError` naming ``what`` when :func:`unpinned` finds anything."""
    if not (found := unpinned()):
        return
    raise UnpinnedError(
        f"refusing to compute {what} in this process: I2O_NUMERICS=portable, but its pins are "
        f"not in effect here ({'; '.join(found)}), so the result could differ in its last bits "
        "from the one its cache key stands for. Compute it where the pins are set (make book, "
        "make sweep, python -m i2o.sweep, a notebook run by python -m i2o.book), or start "
        "Python with them (eval \"$(python -m i2o.pins env)\", or import i2o before numpy, "
        "torch, scipy and jax), or choose native numerics (I2O_NUMERICS=native, other keys).")
