"""Meta-learning on sinusoid regression: MAML and iMAML in JAX (Section 4, Figures 3 and 4).

The paper's meta-learning experiments (Appendix F.3) meta-train a 1-40-40-1 MLP on the sinusoid
tasks of Finn et al. (2017), either with MAML (unrolled inner gradient descent, Eq. 4) or with
iMAML (a proximally regularized inner problem solved by jaxopt and differentiated implicitly,
Eq. 5), then vary the number of inner iterations at test time.

- :mod:`.tasks`      the sinusoid task distribution and fixed training sets;
- :mod:`.mlp`        the MLP, without normalization or with per-set / joint batch
  normalization;
- :mod:`.maml`       MAML adaptation and meta-loss;
- :mod:`.imaml`      iMAML adaptation (jaxopt) and meta-loss with implicit hypergradient;
- :mod:`.descent`    jaxopt's gradient descent with line search written for ``vmap`` (a
  meta-batch's inner problems as one program; used on a GPU);
- :mod:`.checkpoint` atomic checkpoints of pytrees;
- :mod:`.outer`      the outer (meta-training) loop with checkpoint/resume;
- :mod:`.evaluate`   test-time sweeps over the number of inner steps, D(N, ΔN);
- :mod:`.gradient_noise` signal and noise of a meta-gradient (iMAML's plateau at small λ);
- :mod:`.runs`       the figure-level recipes, cached in :mod:`i2o.results`;
- :mod:`.floor`      the error floor per-set batch normalization imposes;
- :mod:`.claims`     the chapter's claims as gated predicates;
- :mod:`.figures`    the figures.

Importing this package switches JAX to float64 (``jax_enable_x64``): jaxopt's backtracking line
search in float32 was measured to slow down by more than 25× on some runs.
"""

import jax

FIGURE = "meta"

jax.config.update("jax_enable_x64", True)
