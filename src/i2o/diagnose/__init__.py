r"""Test your own DEQ: is an implicit model overfitting its inner iterations, and which test-time
``N'`` should it use?

A model trained with ``N`` forward iterations is evaluated at every ``N'`` of a grid (default
``1 … 3N``), in one forward solve per batch where the model allows it; the result holds the
curve ``M(N')`` of a metric, the gap ``D(N, ΔN) = M(N + ΔN) − M(N)`` with confidence intervals over
examples (or seeds, for several models), the relative residual ``‖f(z) − z‖ / ‖f(z)‖`` of the
returned iterate, the verdicts (more iterations help / hurt / make no difference beyond ``δ``;
fewer hurt), gated by a fit criterion, and the recommended ``N'``:

>>> from i2o.diagnose import diagnose
>>> result = diagnose(model, (x_test, y_test), train_iters=18)     # doctest: +SKIP
>>> print(result.table(), result.summary())                         # doctest: +SKIP
>>> result.save_json("diagnosis.json")                              # doctest: +SKIP

Command line: ``python -m i2o.diagnose --help``.

- :mod:`.run` — :func:`diagnose` and the checks made before any compute;
- :mod:`.measure` — :func:`measure`, the sweeps alone (what a cached job stores);
- :mod:`.adapters` — the :class:`Adapter` protocol, :class:`PlainDEQ` (``f(z, x)``, ``z0``,
  ``readout``), :func:`from_book_deq` (:class:`i2o.deq.DEQ`), :class:`BookMDEQ`;
- :mod:`.torchdeq_model` — :class:`TorchDEQModel`, a module holding a torchdeq DEQ;
- :mod:`.metrics` — named metrics and custom ones; :mod:`.data` — loaders and tensors;
- :mod:`.result` — :class:`Diagnosis` (table, claims, JSON); :mod:`.plot` — its figure;
- :mod:`.cli` — the command.

The curves, gaps and intervals (:mod:`i2o.verdicts.curves`), the verdicts and the recommendation
(:mod:`i2o.verdicts.rule`, the book's one rule) and their claim rows (:mod:`i2o.verdicts.rows`)
are imported from the verdicts, as a chapter imports them.

Machinery: imports engines (:mod:`i2o.deq`) and the verdicts, never a chapter.
"""

from i2o.verdicts.curves import Curves
from i2o.verdicts.recommendation import Recommendation
from i2o.verdicts.rule import Verdicts

from .adapters import Adapter, BookMDEQ, PlainDEQ, Swept, from_book_deq
from .measure import Measurement, default_grid, measure
from .metrics import Metric, custom
from .result import Diagnosis
from .run import check_inputs, diagnose, from_curves
from .torchdeq_model import TorchDEQModel

__all__ = ["Adapter", "BookMDEQ", "Curves", "Diagnosis", "Measurement", "Metric", "PlainDEQ",
           "Recommendation", "Swept", "TorchDEQModel", "Verdicts", "check_inputs", "custom",
           "default_grid", "diagnose", "from_book_deq", "from_curves", "measure"]
