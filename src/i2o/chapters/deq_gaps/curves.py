"""Test-performance gaps ``P(N + ΔN) − P(N)`` and the panels drawing them (Figs. 2, G.1, G.2, G.4).

The convention of the paper's Figure 2: performance ``P`` is cast so that lower is better (error
rate in %, perplexity, negative PSNR, negative mIoU, EPE, loss); the gap is 0 at ``ΔN = 0``; a
positive gap means the model got worse. The residual ``‖f(z) − z‖ / ‖f(z)‖`` is drawn on a second
axis to show that the solver keeps converging while the performance does not improve.

A :class:`GapCurve` is either the plotting view (:func:`view`) of the book's own DEQs' curves
(:class:`i2o.diagnose.Curves`, the object the verdicts read, with standard errors over seeds or
over the evaluation set) or read from the CSV files of the authors' evaluation scripts
(:mod:`.authors_csv`, without standard errors); :func:`plot_gap` draws both the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from i2o.verdicts.curves import TRANSFORMS, Curves, from_sweeps
from i2o.verdicts.decision import Over


@dataclass(frozen=True)
class GapCurve:
    """Performance and residual against the number of inner iterations, for one trained model.

    Attributes:
        label: panel title, e.g. ``"CIFAR-10 (classification)"``.
        metric: what ``value`` measures (lower is better), e.g. ``"top-1 error (%)"``.
        train_iters: ``N``, the iteration count used in training (must be in ``iterations``).
        iterations: the counts ``N + ΔN``, increasing.
        value: the performance at each count.
        gap: ``value − value[N]``.
        gap_se: standard error of each gap (``nan`` when unknown, e.g. authors' CSVs).
        residual: mean relative residual at each count (``nan`` when unknown).
        residual_se: its standard error over the evaluation set (``nan`` when unknown).
        paired_se: standard error over the evaluation examples of each gap of *one* model
            (``gap_se`` itself for one model; the seeds' mean for :func:`pool_seeds`; ``nan``
            when unknown): the resolution of a measured change between two counts.
        n: how many independent values ``gap_se`` is over (0: unknown).
        over: what they are — examples (one model, paired per-example differences) or seeds
            (several trained models, :func:`pool_seeds`).
    """

    label: str
    metric: str
    train_iters: int
    iterations: np.ndarray
    value: np.ndarray
    gap: np.ndarray
    gap_se: np.ndarray
    residual: np.ndarray
    residual_se: np.ndarray = field(default=None)  # type: ignore[assignment]
    paired_se: np.ndarray = field(default=None)  # type: ignore[assignment]
    n: int = 0
    over: Over = Over.EXAMPLES

    def __post_init__(self) -> None:
        its = np.asarray(self.iterations)
        if its.ndim != 1 or its.size == 0 or np.any(np.diff(its) <= 0):
            raise ValueError(f"iterations must be a non-empty increasing 1-D array; got {its}")
        if self.train_iters not in set(its.tolist()):
            raise ValueError(f"the training count N = {self.train_iters} is not among the "
                             f"evaluated iterations {its.tolist()}")
        for name in ("residual_se", "paired_se"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(its.shape, np.nan))
        for name in ("value", "gap", "gap_se", "residual", "residual_se", "paired_se"):
            if np.shape(getattr(self, name)) != its.shape:
                raise ValueError(f"GapCurve.{name} must have the shape of iterations {its.shape}")

    @property
    def delta(self) -> np.ndarray:
        """``ΔN`` for every evaluated count."""
        return np.asarray(self.iterations) - self.train_iters

    def at(self, n: int) -> int:
        index = np.flatnonzero(np.asarray(self.iterations) == n)
        if index.size == 0:
            raise KeyError(f"{n} is not an evaluated iteration count")
        return int(index[0])

    def summary(self) -> dict[str, float]:
        """The numbers the chapter's claims quote.

        - ``value_at_n``; ``value_at_max`` (largest ``N + ΔN``), ``n_max``;
        - ``best_gap`` / ``best_gap_se`` / ``best_gap_n``: the most negative gap for ``ΔN > 0``
          (``nan`` without such counts), i.e. the largest improvement from more iterations;
        - ``gap_at_max``; ``min_negative_gap``: the smallest gap for ``ΔN < 0``;
        - ``residual_at_n``, ``residual_at_max``.
        """
        delta = self.delta
        gap = np.asarray(self.gap, dtype=float)
        at_n = self.at(self.train_iters)
        out = {"train_iters": float(self.train_iters), "value_at_n": float(self.value[at_n]),
               "n_max": float(self.iterations[-1]), "value_at_max": float(self.value[-1]),
               "gap_at_max": float(gap[-1]), "gap_se_at_max": float(self.gap_se[-1]),
               "residual_at_n": float(self.residual[at_n]),
               "residual_at_max": float(self.residual[-1])}
        above = np.flatnonzero(delta > 0)
        if above.size:
            best = above[np.nanargmin(gap[above])] if np.any(np.isfinite(gap[above])) else above[0]
            out.update(best_gap=float(gap[best]), best_gap_se=float(self.gap_se[best]),
                       best_gap_n=float(self.iterations[best]))
        else:
            out.update(best_gap=np.nan, best_gap_se=np.nan, best_gap_n=np.nan)
        below = np.flatnonzero(delta < 0)
        out["min_negative_gap"] = float(np.nanmin(gap[below])) if below.size else np.nan
        out["fraction_negative_worse"] = float(np.mean(gap[below] > 0)) if below.size else np.nan
        return out


def view(curves: Curves, train_iters: int, label: str, metric: str) -> GapCurve:
    """The plotting view of :class:`i2o.diagnose.Curves` of a lower-is-better metric: the mean
    curve over its models with standard errors over the seeds (``gap_se = sd_s(gap_s) / √S``,
    ``n = S``, ``over = "seeds"``) when there are several, over the examples (paired per-example
    differences) for one; ``paired_se``, the resolution of one model's measured change, is the
    models' mean. The evaluation examples are the same for every seed, so the spread between
    seeds holds both the training variation and the evaluation noise."""
    its = np.asarray(curves.grid)
    base = curves.at(train_iters)
    per_model = curves.per_model()
    paired = np.stack([curves.paired_se(int(n), train_iters) for n in its], axis=1)
    residual = np.asarray(curves.residual, dtype=float)
    s = curves.n_models
    if s >= 2:
        gaps = per_model - per_model[:, [base]]
        means = residual.mean(axis=1)
        value, gap = per_model.mean(axis=0), gaps.mean(axis=0)
        gap_se = gaps.std(axis=0, ddof=1) / np.sqrt(s)
        res, res_se = means.mean(axis=0), means.std(axis=0, ddof=1) / np.sqrt(s)
        n, over = s, Over.SEEDS
    else:
        value = per_model[0]
        gap, gap_se = value - value[base], paired[0]
        n = curves.n_examples
        res = residual[0].mean(axis=0)
        res_se = (residual[0].std(axis=0, ddof=1) / np.sqrt(n) if n > 1
                  else np.full(its.shape, np.nan))
        over = Over.EXAMPLES
    return GapCurve(label=label, metric=metric, train_iters=int(train_iters), iterations=its,
                    value=value, gap=gap, gap_se=gap_se, residual=res, residual_se=res_se,
                    paired_se=paired.mean(axis=0), n=int(n), over=over)


def curve_from_sweep(result: Mapping[str, object], metric: str, train_iters: int, label: str,
                     transform: str = "mean", metric_label: str | None = None,
                     sign: float = 1.0) -> GapCurve:
    """The :class:`GapCurve` (:func:`view`) of one model's :func:`i2o.deq.sweep_iterations`
    result: ``metric`` names the per-example values, ``transform`` how they become the performance
    (:data:`TRANSFORMS`), ``sign = -1`` turns a higher-is-better quantity into a lower-is-better
    one (e.g. PSNR → negative PSNR)."""
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}; got {transform!r}")
    its = np.asarray(result["iterations"])
    if train_iters not in set(its.tolist()):
        raise ValueError(f"the training count N = {train_iters} is not among the swept "
                         f"{sorted(its.tolist())}")
    curves = from_sweeps([result], metric, -1.0, transform)
    if sign != 1.0:
        curves = replace(curves, values=sign * np.asarray(curves.values))
    return view(curves, train_iters, label, metric_label or metric)


def plot_gap(ax, curve: GapCurve, residual: bool = True, symlog: bool = True,
             colour: str = "C0", residual_colour: str = "C2", label: str | None = None):
    """Draw one panel of Figure 2: the gap (± 1 standard error when known), a black dashed line at
    ``ΔN = 0``, a red dashed line at gap 0, and the relative residual on a second (log) axis.

    Returns the residual axis (or ``None``).
    """
    # lazy: matplotlib only when drawing (runs and claims import this module for GapCurve)
    from matplotlib.ticker import FuncFormatter

    from i2o.book.plotting import TRAIN_N_LINE, ZERO_LINE

    its = np.asarray(curve.iterations)
    ax.plot(its, curve.gap, "-o", color=colour, markersize=3, label=label)
    if np.any(np.isfinite(curve.gap_se)):
        ax.fill_between(its, curve.gap - curve.gap_se, curve.gap + curve.gap_se, color=colour,
                        alpha=0.2, linewidth=0)
    ax.axvline(curve.train_iters, **TRAIN_N_LINE)
    ax.axhline(0.0, **ZERO_LINE)
    if symlog:
        spread = np.nanmax(np.abs(curve.gap)) if np.any(np.isfinite(curve.gap)) else 1.0
        ax.set_yscale("symlog", linthresh=spread / 20 if spread > 0 else 1.0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.2g}"))
    ax.set_xlabel(r"$N + \Delta N$")
    ax.set_ylabel(f"gap in {curve.metric} ↓", color=colour)
    ax.tick_params(axis="y", colors=colour)
    ax.set_title(curve.label)
    if not residual or not np.any(np.isfinite(curve.residual)):
        return None
    twin = ax.twinx()
    twin.plot(its, curve.residual, "-", color=residual_colour, alpha=0.8)
    if np.any(np.isfinite(curve.residual) & (curve.residual > 0)):
        twin.set_yscale("log")
    twin.set_ylabel("relative residual", color=residual_colour)
    twin.tick_params(axis="y", which="both", colors=residual_colour)
    twin.grid(False)
    return twin
