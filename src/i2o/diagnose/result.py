"""What a diagnosis returns (:class:`Diagnosis`): curves, gaps with intervals, residuals,
verdicts, the recommendation; as a table, a claims table, JSON and a figure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from i2o.verdicts import gates, rows
from i2o.verdicts.claims import Claims
from i2o.verdicts.curves import Curves
from i2o.verdicts.intervals import Interval
from i2o.verdicts.recommendation import Recommendation
from i2o.verdicts.rule import Verdicts


@dataclass
class Diagnosis:
    """The result of :func:`i2o.diagnose.diagnose`.

    Attributes:
        model: the adapter's name (or names, for several models).
        metric: the metric's name; ``higher_is_better`` its direction.
        train_iters: ``N``; ``margin``: δ; ``level``: of every interval.
        test: per-example curves on the test data; ``train``: on the training data (or ``None``).
        verdicts, recommendation: :mod:`.verdicts`.
        intervals: the intervals behind the verdicts (``I(N', N)`` for ``N' > N``, pointwise and
            Bonferroni-widened, and at the smallest ``N' < N``).
        shared: one solve per batch (``True``) or one per ``N'``; ``solves``: how many ran.
        seconds: wall-clock time of the test and training sweeps.
        fit: the fit criterion (a threshold on the training metric at ``N``, "stated", or
            ``None``) and ``train_at_n``, the training metric at ``N`` when measured.
    """

    model: str
    metric: str
    higher_is_better: bool
    train_iters: int
    margin: float
    level: float
    test: Curves
    train: Curves | None
    verdicts: Verdicts
    recommendation: Recommendation
    intervals: dict[str, list[Interval]]
    shared: bool
    solves: int
    seconds: float
    fit: float | str | None = None
    train_at_n: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def grid(self) -> list[int]:
        return [int(n) for n in np.asarray(self.test.grid)]

    def gap_intervals(self) -> list[Interval]:
        """Pointwise interval of ``D(N, ΔN)`` (in the metric's units, not signed) at every count."""
        out = []
        for n in self.grid:
            ci = self.test.improvement(n, self.train_iters, self.level)
            s = self.test.sign
            lo, hi = sorted((s * ci.lo, s * ci.hi))
            out.append(Interval(s * ci.mean, lo, hi, ci.n, ci.over, ci.level))
        return out

    # -- tables -------------------------------------------------------------------------------
    def _format(self, value: float | None) -> str:
        if value is None:
            return "not measured"
        if self.metric in ("accuracy", "error"):
            return f"{100 * value:.1f} %"
        return f"{value:.4g}"

    def claims(self, figure: str = "diagnose", profile: str = "", prefix: str = "",
               section: str = "") -> Claims:
        """The verdicts as an :class:`i2o.verdicts.claims.Claims` table, one row per verdict
        (:func:`i2o.verdicts.rows.write`), recorded as ``<prefix>fit`` (with a fit criterion),
        ``help``, ``hurt``, ``same``, ``fewer``, ``residual``, then ``recommendation``."""
        table = Claims(figure, profile)
        rows.write(table, self.verdicts, self._rows(), prefix, section)
        r = self.recommendation
        table.decide(f"{self.model}: recommended test-time N' = {r.n}",
                     gates.Decision(True if r.decided else None,
                                    "smallest N' whose CI against the best lies above −δ"
                                    + ("" if r.decided else "; a cheaper N' cannot be ruled out")),
                     r.describe(self.train_iters), self.verdicts.margin.text,
                     id=prefix + "recommendation", section=section)
        return table

    def _rows(self) -> list[rows.Row]:
        """The rows of the rule's verdicts, in the table's order."""
        above = self.intervals["above"]
        counts = [n for n in self.grid if n > self.train_iters]
        best, worst = rows.largest(above, counts), rows.smallest(above, counts)
        unit = f" ({self.metric}, improvement over N = {self.train_iters})"
        more = f"{self.model}: more iterations than N = {self.train_iters}"
        found = []
        if self.fit is not None:
            found.append(rows.Row(
                "gate", "fit", f"{self.model}: fits its training data (the regime of the paper's "
                "claims)", "stated by the user" if self.fit == "stated" else
                f"training {self.metric} at N: {self._format(self.train_at_n)}", margin=False))
        found += [
            rows.Row("help", "help", f"{more} help (by more than δ)",
                     f"best: {best[1].describe(digits=4)}{unit}" if best else "—"),
            rows.Row("hurt", "hurt", f"{more} hurt (by more than δ)",
                     f"worst: {worst[1].describe(digits=4)}{unit}" if worst else "—"),
            rows.Row("same", "same", f"{more} make no difference beyond δ",
                     f"{len(above)} counts above N" if above else "—")]
        low, fewer = self.intervals["below"], self.intervals.get("fewer", [])
        gain = rows.largest(fewer, [n for n in self.grid if n < self.train_iters])
        found.append(rows.Row(
            "fewer", "fewer", f"{self.model}: fewer iterations than N = {self.train_iters} hurt "
            "(every N' < N; none better than N by more than δ)",
            (f"cost of N' = {self.grid[0]}: " + low[0].describe(digits=4) + unit
             + (f"; best below N: {gain[1].describe(digits=4)}" if gain else ""))
            if low else "—"))
        res = self.test.residual_mean()
        at_n, at_max = float(res[self.test.at(self.train_iters)]), float(res[-1])
        falling = self.intervals.get("residual", [])
        found.append(rows.Row(
            "residual", "residual", f"The paper's solver guard, {self.model}: the residual keeps "
            "falling beyond N from above the solver's floor (otherwise the rows on more "
            "iterations are undecided)",
            (f"log10(residual at N' = {self.grid[-1]} / at N = {self.train_iters}): "
             + (falling[0].describe(digits=2) if falling else "not computed")
             + f"; mean {at_n:.3g} at N, {at_max:.3g} at N' = {self.grid[-1]}"), margin=False))
        return found

    def table(self) -> str:
        """The curve, gap, interval and residual at every count, as aligned text."""
        mean, res = self.test.mean(), self.test.residual_mean()
        lines = [f"{self.model}: {self.metric} ({'higher' if self.higher_is_better else 'lower'}"
                 f" is better) against N', trained with N = {self.train_iters}; "
                 f"{self.test.n_examples} test examples, {self.test.n_models} model(s)",
                 f"{'N′':>5} {'metric':>10} {'D(N,ΔN)':>10} {f'{100 * self.level:.0f}% CI':>22}"
                 f" {'residual':>10}" + (f" {'train':>10}" if self.train is not None else "")]
        train = self.train.mean() if self.train is not None else None
        for k, (n, ci) in enumerate(zip(self.grid, self.gap_intervals(), strict=True)):
            mark = " ←N" if n == self.train_iters else (" ←rec." if n == self.recommendation.n
                                                           else "")
            lines.append(f"{n:>5} {mean[k]:>10.4g} {ci.mean:>+10.4g} "
                         f"{f'[{ci.lo:+.3g}, {ci.hi:+.3g}]':>22} {res[k]:>10.3g}"
                         + (f" {train[k]:>10.4g}" if train is not None else "") + mark)
        return "\n".join(lines)

    def summary(self) -> str:
        """The verdict about more iterations and the recommendation, in two sentences."""
        more = {"help": "more iterations than N help", "hurt": "more iterations than N hurt",
                "no difference": f"more iterations than N make no difference beyond δ = "
                                 f"{self.margin:g}",
                "undecided": "the data cannot decide whether more iterations than N help or "
                             "hurt"}[self.verdicts.more]
        return (f"Verdict: {more}. Recommendation: "
                f"{self.recommendation.describe(self.train_iters)}.")

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def interval(ci: Interval) -> dict[str, Any]:
            return {"mean": ci.mean, "lo": ci.lo, "hi": ci.hi, "n": ci.n, "over": ci.over,
                    "level": ci.level}

        r = self.recommendation
        out: dict[str, Any] = {
            "model": self.model, "metric": self.metric, "higher_is_better": self.higher_is_better,
            "train_iters": self.train_iters, "margin": self.margin, "level": self.level,
            "grid": self.grid, "n_examples": self.test.n_examples,
            "n_models": self.test.n_models,
            "test": {"metric": self.test.mean().tolist(),
                     "per_model": self.test.per_model().tolist(),
                     "gap": self.test.gap(self.train_iters).tolist(),
                     "gap_interval": [interval(ci) for ci in self.gap_intervals()],
                     "residual": self.test.residual_mean().tolist()},
            "verdicts": self.verdicts.as_dict(),
            "recommendation": {"n": r.n, "best": r.best, "as_good": list(r.as_good),
                               "improvement": interval(r.improvement), "decided": r.decided,
                               "open_counts": list(r.open_counts)},
            "shared_solve": self.shared, "solves": self.solves, "seconds": self.seconds,
            "fit": self.fit, "train_at_n": self.train_at_n, "notes": list(self.notes),
        }
        if self.train is not None:
            out["train"] = {"metric": self.train.mean().tolist(),
                            "gap": self.train.gap(self.train_iters).tolist(),
                            "residual": self.train.residual_mean().tolist()}
        return out

    def save_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=True))
        return path

    def figure(self):
        """:func:`i2o.diagnose.plot.figure` of this diagnosis."""
        from i2o.diagnose.plot import figure  # lazy: matplotlib only when a figure is asked for

        return figure(self)
