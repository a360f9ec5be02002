"""i2o — inner iterations overfitting.

The shared package of the book that reproduces *Test like you Train in Implicit Deep Learning*
(Ramzi, Ablin, Peyré, Moreau). Three layers; imports run only downward (``tests/test_layout.py``):

- chapters, one package per notebook (:mod:`i2o.chapters`): ``affine`` (Figures 1, G.3),
  ``stability`` (Figure 5), ``deq_gaps`` (Figures 2, G.1, G.2, G.4), ``meta`` (Figures 3, 4),
  ``separation`` (the companion paper), ``diagnose`` (Test your own DEQ);
- the machinery, which knows the chapters only through the manifest (each chapter's
  ``chapter.yaml``), in four rooms, each ``__init__`` its part of this map; the lower two import
  neither the upper two nor a chapter:

  - :mod:`i2o.compute` — enter, compute, cache: the manifest and parameter validation
    (:mod:`~i2o.compute.profiles`), one door into every chapter (:mod:`~i2o.compute.door`), the
    base of every chapter's results (:mod:`~i2o.compute.chapter`), the import graph a key covers
    (:mod:`~i2o.compute.import_graph`), the job pool, its scheduler, the sweep on submitit, costs
    and the wall-time forecast, the results cache's key, entries, locks and costs
    (:mod:`~i2o.compute.cache_key`, …), the cache's face (:mod:`~i2o.compute.results`) and the
    job (:mod:`~i2o.compute.job`), which every computing module imports, and the grammar of every
    value a user gives (:mod:`~i2o.compute.inputs`);
  - :mod:`i2o.verdicts` — the claims decided: verdicts with typed facts, intervals, margins,
    ranks and gates, the curves against the test-time count, the book's one rule
    (:mod:`~i2o.verdicts.rule`) and its claim rows, the claims table, what would decide an open
    claim, the prose, and the paper's sentences mapped to the rows;
  - :mod:`i2o.provenance` — where a result came from: fingerprints, the modules a key covers,
    bundles between machines, golden fingerprints, kernel probes, ``numbers.json`` and its
    comparison, replicates, the move of a cache to content keys (``python -m i2o.results
    COMMAND`` runs its commands);
  - :mod:`i2o.book` — notebooks executed and the HTML built (``python -m i2o.book``), the staged
    pages, what was measured elsewhere, the claims page, the figure style;

  and :mod:`i2o.diagnose`, the paper's check applied to any implicit model (and its command),
  which decides by the book's one rule as a chapter does;
- engines shared by chapters: :mod:`i2o.deq` (fixed-point solvers, DEQ backward modes),
  :mod:`i2o.models` (DEQ architectures), :mod:`i2o.data` (data sets), :mod:`i2o.train` (the training
  loop);
- under all of them, :mod:`i2o.base`: :mod:`~i2o.base.runtime` (device, threads, the numerics
  mode and its pins: what can change a number, in every job's key), :mod:`~i2o.base.replicates`
  (seeds per replicate), :mod:`~i2o.base.digests` (SHA-256 of bytes, files and arrays), and the
  modules that change no number and are in no key (:data:`i2o.compute.results.INERT`):
  :mod:`~i2o.base.locations` (paths), :mod:`~i2o.base.progress` (progress bars),
  :mod:`~i2o.base.lineage` (provenance, commit, clock), :mod:`~i2o.base.allocator`; beside them
  :mod:`i2o.pins` (importing i2o pins the libraries not loaded yet; the cache refuses to compute
  in a process they loaded unpinned).

At the top, besides these rooms, only the commands' entries: ``python -m i2o.results``,
``i2o.sweep``, ``i2o.numbers``, ``i2o.compare`` and ``i2o.probes`` (each a few lines handing over to
the room with the code).

Glossary (one name per quantity, from the manifest to the solver):

- ``N`` the number of inner iterations used in training: ``train_iters`` — the list of Ns of the
  stability manifest, the one N of each deq_gaps task (``cls_``/``lm_``/``inv_train_iters``) and
  of its job and curve; ``train_iter`` is one run's N, the ``max_iter`` of the forward
  :class:`i2o.deq.SolverSpec` a job and :class:`i2o.train.TrainSettings` carry (the MDEQ code's
  F_THRES); ``n`` in the affine theory; ``maml_inner_steps``/``imaml_inner_steps``
  (meta, the papers' "inner steps");
- ``N + ΔN`` the test-time iteration counts: ``test_iters`` (swept grids), ``delta_n`` (affine);
- ``backward_iter`` the steps of the IFT adjoint solve (B_THRES); ``max_iter`` is the word inside
  :mod:`i2o.deq`: a chapter's job turns N and ``backward_iter`` into its forward and backward
  :class:`i2o.deq.SolverSpec` once, where it is built, and carries them;
- ``pretrain_steps`` the optimiser steps of a shallow weight-tied warm-up before the DEQ is
  trained (stability, ``cls_``/``lm_pretrain_steps`` in deq_gaps);
- ``replicate`` the draw of a chapter's random choices: 0 is the book's, r > 0 passes every seed
  through :func:`i2o.base.replicates.seed`;
- data sizes: ``train_size``/``test_size`` (stability), ``cls_train_size``, ``inv_train_size``,
  ``lm_train_chars`` (deq_gaps), ``n_test_tasks`` (meta).
"""

from i2o import pins as _pins

__version__ = "0.1.0"

_pins.pin_at_import()  # before numpy, torch, scipy or JAX loads, when they have not yet
