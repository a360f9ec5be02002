"""The results cache: expensive computations stored once, keyed by what determines them.

This module is the cache's face, the one computing code imports by name (``from i2o.compute
import results``). Of its names, :func:`cached`
and :func:`lookup` are its own; the others it imports back from the cache's modules in
:mod:`i2o.compute`, for the computing code and the tools that use them:

- :func:`cached` — the stored result of a computation, computed, measured and stored if missing
  (used by :class:`i2o.compute.job.Job`); :func:`lookup` — the stored result or ``None``;
- :func:`checkpoint_dir` — where a long run keeps its checkpoints, under the entry's key
  (:mod:`i2o.compute.cache_entries`; :class:`i2o.compute.job.Job`);
- :func:`jax_compilation_cache` — JAX's compiled programs kept inside the cache
  (:mod:`i2o.compute.jax_cache`; the meta chapter and its benchmark);
- :func:`key` — an entry's key (:mod:`i2o.compute.cache_key`; ``python -m i2o.results deps``
  shows what it covers);
- :data:`INERT` — the modules that change no number and are in no key
  (:mod:`i2o.compute.cache_key`; named by those modules' own docstrings).

An entry's key covers the figure, the job's name, its parameters, the code of the import closure
of the module that computes it and the numerics pins (:mod:`i2o.compute.cache_key`), so that
changing any of them recomputes it and rerunning the book does not. Entries are written
atomically and verified on read (:mod:`i2o.compute.cache_entries`); each key has a lock, so a
second process asking for an entry being computed waits for it instead of computing it too, and
temporaries left by killed writers are removed (:mod:`i2o.compute.cache_locks`); each entry's
``meta.json`` records what computing it cost, outside the key (:mod:`i2o.compute.cache_costs`).

``python -m i2o.results COMMAND`` runs the commands of :mod:`i2o.provenance` (``fingerprint``,
``deps``, ``plan``, ``export``, ``import``, …).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from i2o import pins
from i2o.compute.cache_costs import COST, peak_rss_mb
from i2o.compute.cache_entries import checkpoint_dir, entry_dir, load, read_entry, store
from i2o.compute.cache_key import INERT, key, module_source_hash
from i2o.compute.cache_locks import holding, remove_stale_temporaries
from i2o.compute.jax_cache import jax_compilation_cache

__all__ = ["INERT", "cached", "checkpoint_dir", "jax_compilation_cache", "key", "lookup"]

_swept: set[str] = set()  # the figure folders whose stale temporaries this process removed


def lookup(figure: str, name: str, params: Mapping[str, Any],
           module: str | None = None) -> dict[str, Any] | None:
    """The cached result, or ``None`` when absent or corrupted (a corrupted entry is deleted)."""
    return read_entry(entry_dir(figure, name, params, module))


def cached(figure: str, name: str, params: Mapping[str, Any],
           compute: Callable[[], Mapping[str, Any]],
           module: str | None = None) -> dict[str, Any]:
    """Return the stored result of ``compute()`` for this key, computing and storing it if needed.

    ``compute`` returns a (nested) dict of arrays, numbers and strings. What comes back is always
    the stored form (lists become arrays, 0-d arrays become Python scalars), whether it was just
    computed or read, so a first and a cached run behave the same. While computing, the key's lock
    is held: another process asking for the same entry waits for it instead of computing it too.
    What computing it cost is stored with it (:class:`i2o.compute.cache_costs.JobCost`).
    """
    params = dict(params)
    path = entry_dir(figure, name, params, module)
    found = read_entry(path)
    if found is not None:
        return found
    if str(path.parent) not in _swept:
        _swept.add(str(path.parent))
        remove_stale_temporaries(path.parent)
    with holding(path, f"{figure}/{name}"):
        found = read_entry(path)  # computed by the process we waited for
        if found is not None:
            return found
        pins.require_pinned(f"{figure}/{name}")
        wall, cpu = time.perf_counter(), time.process_time()
        result = compute()
        cost = {"seconds": round(time.perf_counter() - wall, 3),
                "cpu_seconds": round(time.process_time() - cpu, 3),
                "peak_rss_mb": peak_rss_mb()}  # a JobCost, read back by recorded_costs
        store(path, result, {"figure": figure, "name": name, "params": params,
                             "source": module_source_hash(module), "module": module,
                             COST: cost})
        return load(path)
