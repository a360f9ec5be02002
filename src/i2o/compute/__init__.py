"""Enter, compute, cache: how a chapter's results come to exist.

- :mod:`.profiles` — the manifest (each chapter's ``chapter.yaml``) and parameter validation;
- :mod:`.door` — one door into every chapter: its manifest entry opened with parameters checked;
- :mod:`.chapter` — the base of every chapter's results (parameters, cost, provenance);
- :mod:`.import_graph` — the import graph read from the source: what a job's key covers and
  the layers ``tests/test_layout.py`` checks;
- :mod:`.sweep` — a chapter's jobs on submitit; :mod:`.sweep_command` — its command line
  (``python -m i2o.sweep``);
- :mod:`.pool` — ``make book``'s one pool of local job processes, :mod:`.schedule` its
  longest-first order;
- :mod:`.job_costs` — each job's published cost, by which a fresh clone's pool is ordered;
- :mod:`.timing_records` — measured notebook and book costs, kept in ``published/``;
  :mod:`.timings` — a timed run recorded; :mod:`.timing_tables` — the Reproduce page's tables
  of them;
- :mod:`.plan` — the wall time on K cores from recorded costs (``python -m i2o.results plan``);
- the results cache: :mod:`.cache_key` — an entry's key, the code of its import closure, and the
  modules no key covers; :mod:`.cache_entries` — the entries on disk, written atomically and
  verified on read; :mod:`.cache_locks` — one lock per entry, and the temporaries of killed
  writers removed; :mod:`.cache_costs` — what computing each entry cost, read back by name;
  :mod:`.jax_cache` — JAX's compiled programs kept in the cache.

- :mod:`.results` — the cache's face: ``cached``, ``lookup`` and the names computing code reads
  from the modules above; :mod:`.job` — a job (a frozen dataclass whose fields are its key) and
  its entry; :mod:`.inputs` — the grammar of parameters and environment variables.

Every computing module imports :mod:`.results` and :mod:`.job` by name; a key covers what such an
import binds (its content), not where the module lives (:mod:`.cache_key`).
Nothing here imports :mod:`i2o.book`, :mod:`i2o.provenance` or a chapter
(``tests/test_layout.py``).
"""
