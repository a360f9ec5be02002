"""Affine implicit deep learning (Section 3): Figure 1 (left: Corollary 1; right: Corollary 2)
and Figure G.3, with the paper's statements checked on random instances.

- :mod:`~i2o.chapters.affine.theory`  the affine bilevel problem, closed forms, θ^{*,N}, Theorem 1,
  the implicit-differentiation descent of Eq. 12;
- :mod:`~i2o.chapters.affine.sweeps`  the arrays the figures plot;
- :mod:`~i2o.chapters.affine.checks`  Lemma A.2, Theorem 1, Corollaries 1 and 2, Lemma 1, Theorem 2
  on random instances;
- :mod:`~i2o.chapters.affine.jobs`    the five cached computations, as jobs;
- :mod:`~i2o.chapters.affine.runs`    the jobs of a parameter set, their collection, the parameter
  checks;
- :mod:`~i2o.chapters.affine.figures` the figures; :mod:`~i2o.chapters.affine.claims` the claims;
  :mod:`~i2o.chapters.affine.prose` the (no) generated conclusions.
"""

FIGURE = "affine"
