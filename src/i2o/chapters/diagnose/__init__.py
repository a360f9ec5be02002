"""Test your own DEQ: the paper's check applied to models trained elsewhere (:mod:`i2o.diagnose`).

No figure of the paper: the chapter trains a small convolutional DEQ written with torchdeq
(locuslab's library) and one of the book's MDEQs on a CIFAR-10 subset, then diagnoses both with
:func:`i2o.diagnose.diagnose` — the curve of test accuracy against the test-time iteration count
``N'``, the gap ``D(N, ΔN)`` with intervals, the verdicts and the recommended ``N'``.

- :mod:`.torchdeq_net` the torchdeq model and its training step;
- :mod:`.jobs` the two cached jobs (train, then sweep), one per model; :mod:`.runs` their
  collection and the diagnoses; :mod:`.figures` one figure per model;
- :mod:`.claims` the verdicts as claims and the numbers of the text; :mod:`.prose` the
  conclusions written from them.
"""

FIGURE = "diagnose"
#: The diagnosed models, in the order of the jobs, the claims and the conclusions.
MODELS = ("torchdeq", "mdeq")
LABELS = {"torchdeq": "torchdeq ConvDEQ", "mdeq": "book MDEQ"}
