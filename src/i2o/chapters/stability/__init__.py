"""Stability of IFT- and unrolled-trained DEQs (Figure 5).

- :mod:`.runs`      the (seed, arm, N) training jobs through the results cache, the sweep's faces;
- :mod:`.stepcost`  time and peak memory of one training step per arm, in a fresh process;
- :mod:`.claims`    the chapter's gated claims; :mod:`.prose` the conclusions written from them.

The figure is still drawn in the notebook (its logic moves to ``figures.py`` with issue 11).
"""

FIGURE = "stability"
