"""Inner-iterations overfitting in DEQs trained here (Figures 2, G.1, G.2, G.4).

The chapter's code still lives in :mod:`i2o.gaps` (and :mod:`i2o.authors_csv`); :mod:`.runs` is
the face the book's machinery uses, :mod:`.claims` the chapter's gated claims and :mod:`.prose` the
conclusions written from them.
"""

FIGURE = "deq-gaps"
