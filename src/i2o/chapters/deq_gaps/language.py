"""The language-modelling task: a character-level DEQ transformer on Tiny Shakespeare.

Trained with a fixed number ``N`` of solver iterations (:class:`LanguageJob`), then swept over
``N + ΔN`` (:func:`language_probes` feeds :func:`i2o.deq.sweep_iterations`). The metric is
the perplexity ``exp(mean negative log-likelihood per character)``; each evaluated example is a
window of ``context`` characters (its mean per-character NLL), so standard errors are over windows.

Training text: the first ``train_chars`` characters of the training split (``0``: all of it), so
that a small model can fit its training text in a CPU budget; the training-data curves are
evaluated on that same text.

Training (``backward``), after ``pretrain_steps`` steps of a shallow warm-up (the network of
``pretrain_layers`` explicit applications of ``f_θ`` from ``z = 0``, as the public DEQ-Transformer
script pre-trains before its equilibrium steps):

- ``"ift"`` — implicit differentiation (the adjoint equation solved with the forward solver and
  ``N`` steps), optionally with the Jacobian regularisation of Bai et al. (2021): ``jac_weight ·
  ‖∂f/∂z‖_F² / dim`` at ``z*`` (Hutchinson, one probe);
- ``"unrolled"`` — backpropagation through the ``N`` solver iterations.

The head sees ``f(z_N)`` in training and in every evaluation (the sweep scores ``f(z)`` of the
returned iterate), so the only thing that changes at test time is ``N``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from i2o.base import runtime
from i2o.chapters.deq_gaps import FIGURE
from i2o.chapters.deq_gaps.jobs import check_reference, history_arrays
from i2o.compute.job import Job
from i2o.data.shakespeare import CharCorpus, load_shakespeare, random_windows, tiled_windows
from i2o.deq import DEQ, Probe, SolverSpec, sweep_iterations
from i2o.deq.reference import reference_solve
from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig, jacobian_frobenius
from i2o.models.parameters import count_parameters
from i2o.train.loop import Plan, train_steps
from i2o.train.seeding import seed_everything

BACKWARDS = ("ift", "unrolled")
#: The temperatures at which every probe also scores the NLL (:mod:`.calibration` fits one of
#: them on half the test windows): a grid fine enough that the NLL, flat at its minimum, is
#: within a small fraction of its optimum over T at the nearest point.
TEMPERATURES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5)


def temperature_metric(t: float) -> str:
    """The sweep's metric name of the NLL at temperature ``t``."""
    return f"nll_t{t:g}"



@dataclass(frozen=True, kw_only=True)
class LanguageJob(Job):
    """One language model trained on its training text and swept on ``eval_windows`` windows of
    the test split and of that text (the job ``language``)."""

    figure: ClassVar[str] = FIGURE

    context: int = 64
    width: int = 64
    heads: int = 4
    ffn_width: int = 128
    weight_norm: bool = True
    #: training's solver: N = ``forward_spec.max_iter`` steps, ``tol = 0``
    forward_spec: SolverSpec = SolverSpec(method="broyden", max_iter=8, tol=0.0)
    backward: str = "ift"
    #: the IFT adjoint's solver (the forward one: same method, N steps)
    backward_spec: SolverSpec = SolverSpec(method="broyden", max_iter=8, tol=0.0)
    jac_weight: float = 0.0           # Jacobian regularisation (IFT only)
    steps: int = 1000                 # every optimiser step, the warm-up's included
    pretrain_steps: int = 0           # shallow warm-up steps before the DEQ is trained
    pretrain_layers: int = 2          # explicit applications of f in the warm-up
    train_chars: int = 0              # training text: its first characters (0: all)
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    grid: tuple[int, ...]             # the swept counts N + ΔN
    eval_windows: int                 # windows evaluated (test split, and of the training text)
    reference_iters: int = 0          # cap of the converged reference solve on test data (0: none)
    replicate: int = 0

    def __post_init__(self) -> None:
        if self.backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {BACKWARDS}; got {self.backward!r}")
        if self.jac_weight < 0:
            raise ValueError(f"jac_weight must be ≥ 0; got {self.jac_weight}")
        for name in ("forward_spec", "backward_spec"):
            if not isinstance(getattr(self, name), SolverSpec):
                raise TypeError(f"{name} must be a SolverSpec; got "
                                f"{type(getattr(self, name)).__name__}")
        for name, value, least in (("forward_spec.max_iter", self.forward_spec.max_iter, 1),
                                   ("pretrain_steps", self.pretrain_steps, 0),
                                   ("train_chars", self.train_chars, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer ≥ {least}; got {value!r}")
        if self.pretrain_steps >= self.steps:
            raise ValueError(f"pretrain_steps ({self.pretrain_steps}) must be smaller than steps "
                             f"({self.steps}), or no DEQ is ever trained")
        if self.pretrain_layers < 1:
            raise ValueError(f"pretrain_layers must be ≥ 1; got {self.pretrain_layers}")
        check_reference(self.reference_iters, self.train_iters)
        if 0 < self.train_chars <= self.context:
            raise ValueError(f"train_chars must be 0 (all) or more than context = {self.context}; "
                             f"got {self.train_chars}")

    @property
    def name(self) -> str:
        return "language"

    @property
    def train_iters(self) -> int:
        """``N``: the forward solver's steps in training."""
        return self.forward_spec.max_iter

    def config(self, vocab_size: int) -> TransformerConfig:
        return TransformerConfig(vocab_size=vocab_size, context=self.context, width=self.width,
                                 heads=self.heads, ffn_width=self.ffn_width,
                                 weight_norm=self.weight_norm)

    def deq(self) -> DEQ:
        return DEQ(forward=self.forward_spec, backward=self.backward,
                   backward_spec=self.backward_spec, output="fz")

    def training_text(self, corpus: CharCorpus) -> np.ndarray:
        """The character ids the model is trained on (and its training curves evaluated on)."""
        return corpus.train[:self.train_chars] if self.train_chars else corpus.train

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        """Train the DEQ transformer on its training text (the first ``train_chars`` characters
        of the first 90 % of Tiny Shakespeare); sweep it on ``eval_windows`` windows of the test
        split and of the training text, with the solver it was trained with (the DEQ's forward
        solver, which fixes the iterate an unrolled model returns)."""
        corpus = load_shakespeare()
        model, history = train_language_model(self, corpus, self.checkpoints(), progress)
        spec, text = self.deq().forward_spec, self.training_text(corpus)
        out = {
            "test": sweep_iterations(language_probes(model, corpus.test, self.eval_windows),
                                     self.grid, spec),
            "train": sweep_iterations(language_probes(model, text, self.eval_windows),
                                      self.grid, spec),
            "history": history_arrays(history),
            "n_parameters": count_parameters(model),
            "n_characters": np.asarray([len(text), len(corpus.test)]),
        }
        if self.reference_iters:
            out["test_reference"] = reference_solve(
                language_probes(model, corpus.test, self.eval_windows), spec,
                self.reference_iters)
        return out


def train_language_model(job: LanguageJob, corpus: CharCorpus,
                         checkpoint_dir: Path | str | None = None,
                         progress: bool | None = None
                         ) -> tuple[DEQTransformerLM, dict[str, list[float]]]:
    """Seed, build and train (or resume) the model of ``job`` on its training text."""
    seed_everything(job.seed)
    device = runtime.device()
    model = DEQTransformerLM(job.config(corpus.vocab_size)).to(device)
    deq = job.deq()
    train_ids = job.training_text(corpus)
    regularised = job.jac_weight > 0 and job.backward == "ift"

    def step_loss(step: int) -> tuple[torch.Tensor, dict[str, float]]:
        generator = np.random.default_rng([job.seed, step])
        inputs, targets = random_windows(train_ids, job.context, job.batch_size, generator)
        inputs, targets = torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device)
        x = model.inject(inputs)
        if step < job.pretrain_steps:
            z = model.initial_state(x)
            for _ in range(job.pretrain_layers):
                z = model.f(z, x)
            nll = model.token_nll(z, targets).mean()
            logs = {"nll": float(nll.detach()), "residual_rel": float("nan")}
            if regularised:
                logs["jacobian"] = float("nan")  # keeps every logged series one value per step
            return nll, logs
        out, stats = deq(model.f, x, model.initial_state(x))
        nll = model.token_nll(out, targets).mean()
        loss = nll
        logs = {"nll": float(nll.detach()), "residual_rel": stats.forward.residual_rel}
        if regularised:
            z_star = stats.forward.z.detach().requires_grad_()
            penalty = jacobian_frobenius(model.f(z_star, x), z_star)
            loss = loss + job.jac_weight * penalty
            logs["jacobian"] = float(penalty.detach())
        return loss, logs

    plan = Plan(steps=job.steps, lr=job.lr, seed=job.seed)
    history = train_steps(model, step_loss, plan, checkpoint_dir, progress, "language model")
    return model, history


def language_probes(model: DEQTransformerLM, ids: np.ndarray, windows: int | None,
                    batch_size: int = 64) -> Iterator[Probe]:
    """Probes over the first ``windows`` non-overlapping windows of ``ids``, with per-window
    metrics (each a mean over the window's characters):

    - ``nll``: the negative log-likelihood per character, in nats;
    - ``top1_error``: the fraction of characters whose most likely prediction is wrong;
    - ``nll_t<T>`` for each ``T`` of :data:`TEMPERATURES`: the NLL of the logits divided by ``T``
      (temperature scaling, for :mod:`.calibration`; ``T = 1`` is ``nll``)."""
    inputs, targets = tiled_windows(ids, model.cfg.context, windows)
    device = next(model.parameters()).device
    model.eval()
    for start in range(0, len(inputs), batch_size):
        tokens = torch.from_numpy(inputs[start:start + batch_size]).to(device)
        wanted = torch.from_numpy(targets[start:start + batch_size]).to(device)
        x = model.inject(tokens)

        def score(z: torch.Tensor, fz: torch.Tensor, wanted=wanted) -> dict[str, torch.Tensor]:
            logits = model.logits(fz).transpose(1, 2)  # (B, vocabulary, T)
            found = {"nll": F.cross_entropy(logits, wanted, reduction="none").mean(dim=1),
                     "top1_error": (logits.argmax(dim=1) != wanted).double().mean(dim=1)}
            for t in TEMPERATURES:
                found[temperature_metric(t)] = F.cross_entropy(
                    logits / t, wanted, reduction="none").mean(dim=1)
            return found

        yield Probe(g=lambda z, x=x: model.f(z, x), z0=model.initial_state(x), score=score)
