"""Inner-iterations overfitting in DEQs: evaluate a DEQ trained with ``N`` iterations at ``N + ΔN``.

- the one generic sweep is :func:`i2o.deq.sweep_iterations` (per-example metrics and fixed-point
  residuals for every test-time iteration count; any DEQ, any metric), shared with the stability
  chapter and re-exported here;
- :mod:`i2o.gaps.curves` — test-performance gaps with standard errors, and the Figure 2 panel;
- :mod:`i2o.gaps.classification`, :mod:`i2o.gaps.language`, :mod:`i2o.gaps.inverse` — the three
  tasks of the chapter (CIFAR-10 MDEQ, Tiny Shakespeare DEQ transformer, DEQ/ELDER reconstruction);
- :mod:`i2o.gaps.jobs` — each task's train-then-sweep job, cached in the results store
  (:func:`i2o.train.loop.train_steps` trains them).
"""

from i2o.deq import Probe, iteration_grid, sweep_iterations
from i2o.gaps.curves import GapCurve, curve_from_sweep, plot_gap

__all__ = ["GapCurve", "Probe", "curve_from_sweep", "iteration_grid", "plot_gap",
           "sweep_iterations"]
