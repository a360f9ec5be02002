"""Chapters of the book: one folder per notebook ``book/<name>.ipynb``, with the same faces.

- ``__init__.py``: ``FIGURE`` (the manifest key) and a docstring naming the paper's figures;
- ``runs.py``: ``check_params(params)`` (raises :class:`i2o.profiles.ParameterError`),
  ``collect(params)`` (everything the notebook shows, through :func:`i2o.results.cached`) and,
  when the chapter has sweep jobs, ``all_jobs``, ``is_cached`` and ``run_job``;
- ``figures.py``: one function per figure, ``figure_x(results, params) -> Figure``, reading
  results and never computing;
- ``claims.py``: ``numbers(params, results) -> dict`` (for ``glue``) and
  ``claims(params, results) -> i2o.claims.Claims``;
- private modules beside them (theory, tasks, small models used by that chapter only).

A chapter never imports another chapter; code shared by two chapters goes in an engine
(:mod:`i2o.deq`, :mod:`i2o.models`, :mod:`i2o.data`, :mod:`i2o.train`).
"""
