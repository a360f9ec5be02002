"""The book's chapters: one package per notebook, ``i2o.chapters.<name>`` for ``book/<name>.ipynb``.

Every chapter package has the same faces, with the same signatures (``tests/test_layout.py``
checks their annotations):

- ``__init__.py``: ``FIGURE`` (its key in ``chapter.yaml``, its manifest entry), a docstring
  naming the paper's figures;
- ``runs.py``: what is computed. ``check_params(params: Params) -> None`` raises
  :class:`i2o.compute.profiles.ParameterError` through :func:`i2o.compute.profiles.require`; it is
  called by
  :mod:`i2o.compute.door` only, the one door every path enters by (notebook, ``make fig-*``, ``make
  sweep``, ``make robustness``); ``jobs(params: Params) -> list[Job]`` lists the chapter's jobs
  (:class:`i2o.compute.job.Job`, frozen values whose fields are their cache key, one entry each),
  when it has any; optionally ``tasks(params: Params) -> list[Task]``, the same jobs grouped as a
  sweep submits them (small ones computed in one process); ``collect(params: Params) ->
  <Chapter>Results`` returns everything the notebook shows, a dataclass deriving from
  :class:`i2o.compute.chapter.ChapterResults` (the parameters, the run's
  :class:`i2o.compute.chapter.Cost`, its provenance). Parameters are read one way:
  ``params["name"]``;
- job classes in chapter-private modules that never import ``runs``, ``claims``, ``figures`` or
  ``prose`` (a job's key hashes the import closure of the module that defines it;
  ``tests/test_keys.py`` checks that none reaches verdict, prose, figure or plotting code);
- ``figures.py``: one function per paper figure, reading results and never computing;
- ``claims.py``: ``numbers(results) -> dict`` (for ``glue``) and ``claims(results) -> Claims``,
  the paper's claims as a :class:`i2o.verdicts.claims.Claims` table, every predicate through
  :mod:`i2o.verdicts.gates`;
- ``prose.py``: ``paragraphs(claims: Claims, section: str) -> list[str]``, the conclusions, shown by
  :func:`i2o.verdicts.prose.conclusions`;
- ``paper_claims.py``: ``CLAIMS``, the claims of the paper (and the book's own) its rows test,
  each with the paper's words and the row ids (:class:`i2o.verdicts.paper_claims.PaperClaim`;
  its share of a claim several chapters test through :meth:`~i2o.verdicts.paper_claims.
  PaperClaim.on`), and ``READINGS``, how the book reads the claims it declares; ``claims.py``
  gives ``CLAIMS`` to its table (the chapter's answer) and the claims page merges every
  chapter's (:func:`i2o.book.claims_page.registry`);
- ``chapter.yaml``: its manifest entry (:mod:`i2o.compute.profiles`);
- chapter-private modules beside them.

Imports run one way: chapters → book machinery (``book``, ``profiles``, ``job``, ``results``,
``chapter``, ``claims``, ``gates``, ``prose``, ``plotting``, ``sweep``) → engines (``deq``,
``models``, ``data``, ``train``) → ``runtime`` and the inert base modules (``locations``,
``progress``, ``lineage``, ``allocator``). The machinery finds a chapter through the
manifest's ``package``, never by import, and no chapter imports another (``tests/test_layout.py``
checks the import graph, :mod:`i2o.compute.import_graph`).
"""
