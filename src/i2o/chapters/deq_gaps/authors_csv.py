"""Read the CSV files written by the authors' evaluation scripts, to redraw the paper's Figure 2.

The paper's Figure 2 (and G.1, G.2) was drawn from CSV files appended to, one row per test-time
iteration count, by the scripts of the authors' forks (``zaccharieramzi/deq`` and
``zaccharieramzi/deq-flow``, branch ``anonymized-for-paper``), run on the official pretrained models
with ``DEQ.F_THRES <N + ΔN> DEQ.F_EPS 1e-7``. Their layouts (one :class:`CsvLayout` each):

=================  =========================================  ============  ==========  ========
task (``kind``)    written by                                 iterations    metric      residual
=================  =========================================  ============  ==========  ========
``imagenet``       ``mdeq_vision/tools/cls_valid.py``         f_thres_val   top1        cvg_rel
``cityscapes``     ``mdeq_vision/tools/seg_test.py``          f_thres_val   miou        cvg_rel
``wikitext``       ``deq_sequence/train_transformer.py``      n_forward     val_ppl     val_cvg_rel
``sintel``         ``deq-flow: deq_flow/main.py``             f_thres_val   perf (EPE)  cvg_rel
=================  =========================================  ============  ==========  ========

``top1`` is an accuracy in % (the book plots the error ``100 − top1``) unless the script ran with
``--use_loss_as_perf`` (then it is the loss: ``metric="loss"``); ``miou`` is turned into ``−mIoU``;
perplexity and EPE are already lower-is-better. ``cvg_rel``/``cvg_abs`` are the relative/absolute
residuals the DEQ code reports. The WikiText file has ``train_``/``val_``/``test_`` columns (the
paper's panel uses ``val``). Several rows with the same count (e.g. seeds) are averaged; the
Sintel file is filtered on ``dataset == sintel`` and ``solver == broyden`` when those columns exist.
The training counts are the paper's (Appendix F.1): 26, 27, 30 and 36.

Only the standard library's :mod:`csv` is used; every error names the file and the columns.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from i2o.chapters.deq_gaps.curves import GapCurve


@dataclass(frozen=True)
class CsvLayout:
    """Where a task's numbers are in the authors' CSV, and how to cast them to lower-is-better."""

    title: str
    iterations: str
    metric: str
    residual: str
    train_iters: int
    metric_label: str
    cast: str = "identity"            # "identity", "error_from_accuracy" or "negate"
    filters: Mapping[str, str] = field(default_factory=dict)


KINDS: dict[str, CsvLayout] = {
    "imagenet": CsvLayout("ImageNet (image classification)", "f_thres_val", "top1", "cvg_rel",
                          26, "top-1 error (%)", "error_from_accuracy"),
    "cityscapes": CsvLayout("Cityscapes (image segmentation)", "f_thres_val", "miou", "cvg_rel",
                            27, "−mIoU", "negate"),
    "wikitext": CsvLayout("WikiText-103 (language modelling)", "n_forward", "{split}_ppl",
                          "{split}_cvg_rel", 30, "perplexity"),
    "sintel": CsvLayout("Sintel (optical flow)", "f_thres_val", "perf", "cvg_rel", 36, "EPE",
                        filters={"dataset": "sintel", "solver": "broyden"}),
}
SPLITS = ("train", "val", "test")


class AuthorsCsvError(ValueError):
    """A CSV file does not have the layout of the authors' scripts."""


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_rows(path: Path | str) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"authors' results file {path} does not exist")
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    if not rows:
        raise AuthorsCsvError(f"{path} has a header but no row (or is empty)")
    return rows


def layout(kind: str, split: str = "val", metric: str | None = None) -> CsvLayout:
    """The :class:`CsvLayout` of ``kind``; ``split`` for WikiText; ``metric="loss"`` for ImageNet
    files written with ``--use_loss_as_perf`` (the ``top1`` column then holds the loss)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}; got {split!r}")
    base = KINDS[kind]
    chosen = CsvLayout(base.title, base.iterations, base.metric.format(split=split),
                       base.residual.format(split=split), base.train_iters, base.metric_label,
                       base.cast, dict(base.filters))
    if metric is None:
        return chosen
    if kind != "imagenet" or metric != "loss":
        raise ValueError(f"metric={metric!r} is only meaningful as 'loss' for kind 'imagenet'")
    return CsvLayout(base.title, base.iterations, base.metric, base.residual, base.train_iters,
                     "cross-entropy loss", "identity", dict(base.filters))


def read_curve(path: Path | str, kind: str, train_iters: int | None = None, split: str = "val",
               metric: str | None = None, label: str | None = None) -> GapCurve:
    """A :class:`.curves.GapCurve` (no standard errors) from one authors' CSV file.

    Args:
        path: the CSV file (e.g. ``imagenet_n_iter_results.csv``).
        kind: ``"imagenet"``, ``"cityscapes"``, ``"wikitext"`` or ``"sintel"`` (module docstring).
        train_iters: the training count ``N`` (default: the paper's for ``kind``); must be a row.
        split: ``"val"`` (default, as the paper's panel), ``"test"`` or ``"train"`` (WikiText).
        metric: ``"loss"`` for ImageNet files written with ``--use_loss_as_perf`` (Figure G.2).
        label: panel title (default: the task's name).
    """
    spec = layout(kind, split, metric)
    rows = read_rows(path)
    header = set(rows[0])
    needed = {spec.iterations, spec.metric} | set(spec.filters)
    missing = sorted(needed - header)
    if missing:
        raise AuthorsCsvError(f"{path} is not a {kind!r} results file of the authors' scripts: "
                              f"missing column(s) {missing}; it has {sorted(header)}")
    for column, wanted in spec.filters.items():
        rows = [r for r in rows if r.get(column) == wanted]
    if not rows:
        raise AuthorsCsvError(f"{path}: no row with {dict(spec.filters)}")
    groups: dict[int, list[dict[str, str]]] = {}
    for row in rows:
        n = _number(row[spec.iterations])
        if not math.isfinite(n):
            raise AuthorsCsvError(f"{path}: {spec.iterations}={row[spec.iterations]!r} is not a "
                                  "number")
        groups.setdefault(int(round(n)), []).append(row)
    its = np.asarray(sorted(groups))
    values = np.asarray([np.nanmean([_number(r[spec.metric]) for r in groups[n]]) for n in its])
    if spec.cast == "error_from_accuracy":
        values = 100.0 - values
    elif spec.cast == "negate":
        values = -values
    has_residual = spec.residual in header
    residual = np.asarray([np.nanmean([_number(r.get(spec.residual, "")) for r in groups[n]])
                           if has_residual else np.nan for n in its])
    train_iters = spec.train_iters if train_iters is None else int(train_iters)
    if train_iters not in groups:
        raise AuthorsCsvError(f"{path}: no row with {spec.iterations} = {train_iters} (the "
                              f"training count); rows have {its.tolist()}")
    base = values[int(np.flatnonzero(its == train_iters)[0])]
    return GapCurve(label=label or spec.title, metric=spec.metric_label, train_iters=train_iters,
                    iterations=its, value=values, gap=values - base,
                    gap_se=np.full(its.shape, np.nan), residual=residual)


def read_figure2(files: Mapping[str, Path | str]) -> list[GapCurve]:
    """Curves for the paper's Figure 2 from ``{kind: csv path}`` (any subset of the four tasks)."""
    return [read_curve(path, kind) for kind, path in files.items()]
