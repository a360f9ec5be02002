"""i2o — inner iterations overfitting.

The shared package of the book that reproduces *Test like you Train in Implicit Deep Learning*
(Ramzi, Ablin, Peyré, Moreau). One module per concept:

- :mod:`i2o.affine`   the affine bilevel theory of Section 3 (Figure 1, Figure G.3);
- :mod:`i2o.deq`      fixed-point solvers and DEQ backward modes (PyTorch);
- :mod:`i2o.models`   DEQ architectures; :mod:`i2o.data` data sets; :mod:`i2o.train` training loops;
- :mod:`i2o.meta`     MAML and iMAML on sinusoid regression (JAX);
- :mod:`i2o.profiles` the figure manifest and parameter validation;
- :mod:`i2o.results`  the results cache; :mod:`i2o.claims` the paper's claims as predicates;
- :mod:`i2o.plotting` one figure style with provenance;
- :mod:`i2o.book` notebook execution and the book's build.
"""

__version__ = "0.1.0"
