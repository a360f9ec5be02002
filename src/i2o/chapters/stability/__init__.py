"""Stability of IFT- and unrolled-trained DEQs (Figure 5).

- :mod:`.jobs`      the (seed, arm, N) training job, :class:`~.jobs.TrainJob` (a cached value);
- :mod:`.stepcost`  time and peak memory of one training step per arm, in a fresh process
  (:class:`~.stepcost.StepCostJob`);
- :mod:`.runs`      ``jobs(params)`` (what the sweep runs), ``check_params``, ``collect``;
- :mod:`.figures`   Figure 5 and the printed reports;
- :mod:`.claims`    the chapter's gated claims; :mod:`.prose` the conclusions written from them.
"""

FIGURE = "stability"
