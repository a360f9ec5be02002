"""Companion chapter: *Separation and Bias of Deep Equilibrium Models* (NeurIPS 2024).

Four sections, each a reconstruction (the paper's full text and code are not available; only its
OpenReview page is): linear regions and the sawtooth (Theorem 1, the rebuttal's Table 1),
steep functions (Theorem 2, the rebuttal's Figure 1), the implicit bias of the diagonal linear
DEQ (Theorem 3; the rebuttal's Figure 2 for the feature heatmaps) and generalization on the
unseen (GOTU, Abbe et al. 2023).

Modules: :mod:`.sawtooth` (the exact width-m construction with 2^m pieces), :mod:`.nets` (the
small DEQs, FNNs and diagonal networks, solved with :mod:`i2o.deq`), :mod:`.steep`,
:mod:`.diagonal`, :mod:`.gotu`; the faces :mod:`.runs`, :mod:`.figures`, :mod:`.claims`.
"""

FIGURE = "separation"
