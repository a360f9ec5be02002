"""Meta-learning on sinusoid regression: MAML and iMAML in JAX (Section 4, Figures 3 and 4).

The paper's meta-learning experiments (Appendix F.3) meta-train a 1-40-40-1 MLP on the sinusoid
tasks of Finn et al. (2017), either with MAML (unrolled inner gradient descent, Eq. 4) or with
iMAML (a proximally regularized inner problem solved by jaxopt and differentiated implicitly,
Eq. 5), then vary the number of inner iterations at test time.

- :mod:`.tasks`      the sinusoid task distribution and fixed training sets;
- :mod:`.mlp`        the MLP, without normalization or with per-set / joint batch
  normalization;
- :mod:`.model`      a meta-trained model as a job (:class:`i2o.compute.job.Job`): what both methods
  share (the outer loop, its seeds and checkpoints);
- :mod:`.maml`       MAML adaptation and meta-loss, and the MAML model;
- :mod:`.imaml`      iMAML adaptation (jaxopt) and meta-loss with implicit hypergradient, and the
  iMAML model;
- :mod:`.descent`    jaxopt's gradient descent with line search written for ``vmap`` (a
  meta-batch's inner problems as one program; used on a GPU);
- :mod:`.checkpoint` atomic checkpoints of pytrees;
- :mod:`.outer`      the outer (meta-training) loop with checkpoint/resume;
- :mod:`.evaluate`   test-time sweeps over the number of inner steps, D(N, ΔN), and the job of
  one model's sweep;
- :mod:`.gradient_noise` signal and noise of a meta-gradient (iMAML's plateau at small λ), and
  its job at the chapter's initialization;
- :mod:`.floor`      the error floor per-set batch normalization imposes, and its job;
- :mod:`.mechanism_probe` the probes of a Figure 4 model at every checkpoint (hypergradient,
  finite-difference slopes, curvature of the inner problems, line-search trials) and their job;
- :mod:`.mechanism`  the rule that names why a probed model's outer loss rose, its table and text;
- :mod:`.runs`       the chapter's parameters → its jobs → its results (:class:`.runs.MetaResults`);
- :mod:`.claims`     the chapter's claims as gated predicates (:mod:`i2o.verdicts.gates`), its face;
the
  predicates in :mod:`.claims_gates` (the gates of a claim about one model),
  :mod:`.claims_figure3`, :mod:`.claims_figure4` and :mod:`.claims_noise`;
- :mod:`.prose`      the conclusions written from the claims;
- :mod:`.figures`    the figures.

Importing this package switches JAX to float64 (``jax_enable_x64``): jaxopt's backtracking line
search in float32 was measured to slow down by more than 25× on some runs.

Importing the package therefore imports JAX: a process first asks XLA for its threads and pins
(:func:`i2o.base.runtime.jax_single_thread`, before any module of the chapter is imported: the
notebook's cell after its parameters, :func:`i2o.compute.door.runs_module`; the sweep's workers
start with them in their environment).
"""

import jax

FIGURE = "meta"

jax.config.update("jax_enable_x64", True)
