"""The deq-gaps chapter's figures (2, G.1, G.2, G.4, the overparametrization sweep, the authors'
Figure 2) and printed summaries, from :func:`.runs.collect` (nothing here computes a result)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from i2o.chapters.deq_gaps import chapter
from i2o.chapters.deq_gaps.runs import GapsResults

PANELS = ("classification", "language", "deq")


def _titled(fig: Figure, title: str, p: Mapping[str, Any]) -> Figure:
    fig.suptitle(f"{title} — profile {getattr(p, 'profile', '')!r}", y=1.02)
    return fig


def figure_2(r: GapsResults, p: Mapping[str, Any]) -> Figure:
    """Test-performance gap of the three tasks."""
    return _titled(chapter.gap_figure([r.test[t] for t in PANELS]), "Test-performance gap", p)


def figure_g1(r: GapsResults, p: Mapping[str, Any]) -> Figure:
    """Training-performance gap of the three tasks."""
    return _titled(chapter.gap_figure([r.train[t] for t in PANELS]),
                   "Training-performance gap", p)


def figure_g2(r: GapsResults, p: Mapping[str, Any]) -> Figure:
    """Loss gap on test (top row) and training data (bottom row)."""
    fig = chapter.gap_figure([r.test_loss[t] for t in PANELS] + [r.train_loss[t] for t in PANELS],
                             columns=3)
    return _titled(fig, "Loss gap, test (top) and training data (bottom)", p)


def figure_g4(r: GapsResults, p: Mapping[str, Any]) -> Figure:
    """The inverse problem's DEQ and ELDER on test data."""
    return _titled(chapter.gap_figure([r.test["deq"], r.test["elder"]]),
                   "Inverse problem, test data", p)


def overparam_figure(r: GapsResults, p: Mapping[str, Any]) -> Figure:
    """D(N, ΔN) of the MDEQ classifier trained on subsets of growing size."""
    return _titled(chapter.overparam_figure(r.overparam),
                   "Overparametrization sweep, CIFAR-10 MDEQ", p)


def authors_figure(p: Mapping[str, Any]) -> Figure | None:
    """The paper's own Figure 2 from the authors' CSVs in ``authors_results`` (None: none)."""
    return chapter.authors_figure(p["authors_results"])


def run_report(r: GapsResults, p: Mapping[str, Any]) -> str:
    """Sizes and costs of the trained DEQs, then each task's value at N, at the largest count,
    its most negative gap and its residuals."""
    lines = [chapter.sizes_table(r.results, r.jobs, p), "",
             f"computed or read in {r.seconds:.0f} s; 'train s' is the wall time of the training "
             "steps when the job was computed"]
    for task, curve in r.test.items():
        s = curve.summary()
        lines.append(
            f"{task:>14}: {curve.metric} at N = {curve.n_train}: {s['value_at_n']:.3f}; "
            f"at {int(s['n_max'])}: {s['value_at_max']:.3f}; most negative gap for ΔN > 0: "
            f"{s['best_gap']:+.3f} ± {s['best_gap_se']:.3f} at {int(s['best_gap_n'])}; "
            f"residual {s['residual_at_n']:.2g} → {s['residual_at_max']:.2g}")
    return "\n".join(lines)


def baseline_report(r: GapsResults) -> str:
    """−PSNR of the inverse problem's initial guess, per variant."""
    return "\n".join(f"{variant}: −PSNR of the initial guess A⁺y (nearest upsampling): "
                     f"{r.results[variant]['test_baseline_neg_psnr']:.2f} dB"
                     for variant in ("deq", "elder"))


def overparam_report(r: GapsResults) -> str:
    """Per subset size: training loss and error at N, D at the largest count, test-error gap."""
    lines = []
    for row in r.overparam:
        s, e = row["train_loss"].summary(), row["test_error"].summary()
        lines.append(
            f"{row['size']:>6} images ({row['epochs']} epochs): training loss at N "
            f"{s['value_at_n']:.3f}, training error "
            f"{row['train_error'].summary()['value_at_n']:.1f} %; D at {int(s['n_max'])}: "
            f"{s['gap_at_max']:+.3f} ± {s['gap_se_at_max']:.3f}; test-error gap at "
            f"{int(e['n_max'])}: {e['gap_at_max']:+.2f} ± {e['gap_se_at_max']:.2f}")
    return "\n".join(lines)


def authors_missing_report() -> str:
    return ("authors_results is empty or holds none of "
            f"{', '.join(chapter.AUTHORS_FILES.values())}: nothing to redraw")
