"""Companion chapter: *Separation and Bias of Deep Equilibrium Models* (NeurIPS 2024).

Four sections, each a reconstruction (the paper's full text and code are not available; only its
OpenReview page is): linear regions and the sawtooth (Theorem 1, the rebuttal's Table 1),
steep functions (Theorem 2, the rebuttal's Figure 1), the implicit bias of the diagonal linear
DEQ (Theorem 3; the rebuttal's Figure 2 for the feature heatmaps) and generalization on the
unseen (GOTU, Abbe et al. 2023).

Modules: :mod:`.sawtooth` (the exact width-m construction with 2^m pieces), :mod:`.nets` (the
small DEQs, FNNs and diagonal networks, solved with :mod:`i2o.deq`), :mod:`.batched` (seeds
trained together by stacked weights), :mod:`.steep`, :mod:`.diagonal`, :mod:`.gotu`,
:mod:`.frozen`; each defines the jobs (cache entries) of what it computes, and
:func:`.runs.tasks` groups the small ones into sweep tasks (one process each). The faces:
:mod:`.runs`, :mod:`.figures`, :mod:`.claims` (its predicates in :mod:`.claims_fit`,
:mod:`.claims_expressivity`, :mod:`.claims_bias`, :mod:`.claims_unseen`), :mod:`.prose`.
"""

FIGURE = "separation"
