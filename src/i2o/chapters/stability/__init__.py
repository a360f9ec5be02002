"""Stability of IFT- and unrolled-trained DEQs (Figure 5).

The training jobs still live in :mod:`i2o.train.stability` and the step-cost measurement in
:mod:`i2o.train.stepcost`; :mod:`.runs` is the face the book's machinery uses, :mod:`.claims` the
chapter's gated claims and :mod:`.prose` the conclusions written from them.
"""

FIGURE = "stability"
