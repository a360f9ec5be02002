"""Inner-iterations overfitting in DEQs trained here (Figures 2, G.1, G.2, G.4).

A DEQ trained with ``N`` iterations is evaluated at ``N + ΔN`` with the one generic sweep
:func:`i2o.deq.sweep_iterations`:

- :mod:`.classification`, :mod:`.language`, :mod:`.inverse`  the three tasks (CIFAR-10 MDEQ,
  Tiny Shakespeare DEQ transformer, DEQ/ELDER reconstruction), each with its train-then-sweep
  job (:class:`i2o.compute.job.Job`, cached in the results store); :mod:`.jobs` what the jobs share;
- :mod:`.tasks`    the registry of the four tasks (one typed spec each), which every module reads;
- :mod:`.runs`     the jobs of the chapter's parameters (checked by :mod:`i2o.compute.door`; where
  each task's N becomes its forward and backward solver), :func:`.runs.collect` and the curves;
  :mod:`.figures` draws them;
- :mod:`.curves`   test-performance gaps with standard errors, the Figure 2 panel;
- :mod:`.authors_csv`  the authors' evaluation CSVs (the paper's own Figure 2);
- :mod:`.claims`   the gated claims; :mod:`.prose` the conclusions written from them.
"""

FIGURE = "deq_gaps"
