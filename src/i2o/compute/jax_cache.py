"""JAX's compiled programs kept on disk inside the results cache, shared between processes."""

from __future__ import annotations

from pathlib import Path

from i2o.compute import inputs
from i2o.compute.cache_entries import results_dir

#: Where :func:`jax_compilation_cache` keeps XLA's compiled programs, inside the results cache.
JAX_CACHE = "_jax"


def jax_compilation_cache() -> Path | None:
    """Keep JAX's compiled programs on disk (``results_dir() / JAX_CACHE``), so that another
    process — a sweep worker, the notebook that reads its results, the next replicate — loads a
    program it would otherwise compile again. Numbers do not change: a loaded program is the one
    compiled, and JAX's key covers the program, the compile options and the library versions.
    ``I2O_JAX_CACHE=0`` (or ``false``) leaves JAX's default (no persistent cache); a value other
    than 0, 1, true or false is refused (:func:`i2o.compute.inputs.environment_value`). Returns the
    directory, or ``None`` when off."""
    if not inputs.environment_value("I2O_JAX_CACHE", default=True):
        return None
    import jax  # lazy: JAX only for the chapters that use it

    directory = results_dir() / JAX_CACHE
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    # the meta chapter's programs compile in well under JAX's default threshold of 1 s each,
    # but there are many of them
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
