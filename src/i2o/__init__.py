"""i2o — inner iterations overfitting.

The shared package of the book that reproduces *Test like you Train in Implicit Deep Learning*
(Ramzi, Ablin, Peyré, Moreau). Three layers; imports run only downward (``tests/test_layout.py``):

- chapters, one package per notebook (:mod:`i2o.chapters`): ``affine`` (Figures 1, G.3),
  ``stability`` (Figure 5), ``deq_gaps`` (Figures 2, G.1, G.2, G.4), ``meta`` (Figures 3, 4),
  ``separation`` (the companion paper), ``diagnose`` (Test your own DEQ);
- book machinery, which knows the chapters only through ``figures.yaml``:
:mod:`i2o.compute.profiles`
  (the manifest and parameter validation), :mod:`i2o.job` (a cached computation as a frozen,
  typed value), :mod:`i2o.results` (the results cache, keyed by a job's fields and the source of
  its module's import closure, :mod:`i2o.compute.import_graph`), :mod:`i2o.compute.chapter` (the
  base of every chapter's results: parameters, cost, provenance),
  :mod:`i2o.verdicts.claims` (the paper's claims as predicates), :mod:`i2o.verdicts.gates`
  (confidence intervals, equivalence margins, fit and health gates), :mod:`i2o.verdicts.decision` (a
  verdict with its typed facts: the gate that closed it, what more of would decide it),
  :mod:`i2o.verdicts.prose` (conclusions written from claims),
  :mod:`i2o.book.plotting` (one figure style with provenance), :mod:`i2o.compute.sweep` (submitit
  jobs),
  :mod:`i2o.compute.pool` (``make book``'s one job pool for every chapter),
  :mod:`i2o.compute.schedule` (the longest-first scheduler) and :mod:`i2o.compute.plan` (the wall
  time on K cores from recorded costs, ``python -m i2o.results plan``), :mod:`i2o.compute.timings`
  (measured costs in ``published/``),
  :mod:`i2o.compute.job_costs` (each job's published cost, by which a fresh clone's pool is
  ordered),
  :mod:`i2o.diagnose` (the paper's check applied to any implicit model, and its command),
  :mod:`i2o.book` (notebook execution, the HTML),
  :mod:`i2o.provenance.robustness` (the chapters at several replicates, the Robustness page),
  :mod:`i2o.verdicts.paper_claims` (each sentence of the paper mapped to the rows that test it) and
  :mod:`i2o.book.claims_page` (the page "The paper's claims at a glance"),
  :mod:`i2o.provenance.fingerprint` (one SHA-256 per cached result, ``python -m i2o.results
  fingerprint``),
  :mod:`i2o.provenance.dependencies` (the modules each job's key covers, ``python -m i2o.results
  deps``),
  :mod:`i2o.provenance.probes` (each kernel family fingerprinted, on this CPU or an emulated one),
  :mod:`i2o.provenance.golden` (the committed fingerprints every ``make test`` checks, ``make
  golden``);
- engines shared by chapters: :mod:`i2o.deq` (fixed-point solvers, DEQ backward modes),
  :mod:`i2o.models` (DEQ architectures), :mod:`i2o.data` (data sets), :mod:`i2o.train` (the training
  loop); and under all of them :mod:`i2o.runtime` (device, threads, the numerics mode and its
  pins: what can change a number, in every job's key), with :mod:`i2o.pins` (importing i2o pins
  the libraries not loaded yet; the cache refuses to compute in a process they loaded unpinned),
  :mod:`i2o.replicates` (seeds per replicate) and :mod:`i2o.digests` (SHA-256 of bytes, files and
  arrays), beside the modules that change none and are in no key (:data:`i2o.results.INERT`):
  :mod:`i2o.locations` (paths), :mod:`i2o.progress` (progress bars), :mod:`i2o.lineage`
  (provenance, commit, clock), :mod:`i2o.allocator`.

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
  through :func:`i2o.replicates.seed`;
- data sizes: ``train_size``/``test_size`` (stability), ``cls_train_size``, ``inv_train_size``,
  ``lm_train_chars`` (deq_gaps), ``n_test_tasks`` (meta).
"""

from i2o import pins as _pins

__version__ = "0.1.0"

_pins.pin_at_import()  # before numpy, torch, scipy or JAX loads, when they have not yet
