"""The book's chapters: one package per notebook, ``i2o.chapters.<name>`` for ``book/<name>.ipynb``.

Every chapter package has the same faces:

- ``__init__.py``: ``FIGURE`` (its key in ``figures.yaml``), a docstring naming the paper's figures;
- ``runs.py``: what is computed, through :func:`i2o.results.cached` (the only module of the chapter
  that calls the cache): ``check_params(params)`` (raises :class:`i2o.profiles.ParameterError`),
  ``collect(params)``, and ``all_jobs``/``is_cached``/``run_job`` when the chapter has sweep jobs;
- ``figures.py``: one function per paper figure, reading results and never computing;
- ``claims.py``: ``numbers(params, results)`` (for ``glue``) and ``claims(params, results)``, the
  paper's claims as a :class:`i2o.claims.Claims` table;
- chapter-private modules beside them.

Imports run one way: chapters → book machinery (``book``, ``profiles``, ``results``, ``claims``,
``plotting``, ``sweep``) → engines (``deq``, ``models``, ``data``, ``train``) → ``runtime``. The
machinery finds a chapter through the manifest's ``package``, never by import, and no chapter
imports another (``tests/test_layout.py`` checks the import graph).
"""
