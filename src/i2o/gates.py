"""Verdicts that can fail: confidence intervals, margin predicates, fit and health gates.

A paper claim about trained DEQs is decided here in two stages:

1. **Gates** say whether the run can decide it at all. :func:`fit_gate` requires every model the
   claim depends on to fit its training set (a stated criterion, e.g. training accuracy ≥ 90 %);
   :func:`fit_quorum` requires at least ``q`` of each group's models to fit, and the claim is then
   decided on those models only (the others are named); :func:`health_gate` requires that none of
   them diverged (:mod:`i2o.train.health`); :func:`resolves` requires a margin to be at least the
   resolution of the measurement it is applied to (a comparison whose margin is below what the
   measurement can tell apart cannot fail). A closed gate returns an undecided
   :class:`~i2o.decision.Decision` and the claim is ``null`` with its reason.
2. **Predicates** decide the claim from a two-sided confidence interval ``[lo, hi]`` of the measured
   quantity at level ``1 − α`` (90 % by default, i.e. two one-sided tests at 5 %), against a margin
   ``δ > 0`` stated per task. Every predicate is three-valued: ``True`` / ``False`` when the
   interval settles it, ``None`` when it straddles the threshold (too little power), with a reason:

   - :func:`equivalent`: ``−δ < lo`` and ``hi < δ`` (TOST equivalence); fails when the interval
     lies entirely outside ``(−δ, δ)``;
   - :func:`above`: ``lo > δ`` (exceeds the margin); fails when ``hi < δ``;
   - :func:`not_below`: ``lo > −δ``; fails when ``hi < −δ``;
   - :func:`positive`: ``lo > 0``; fails when ``hi ≤ 0``;
   - :func:`negative`: ``hi < 0``; fails when ``lo ≥ 0``.

Three combinators put them together: :func:`combine` (gates in a row, all open or the first
closed), :func:`gated` (gates, then a predicate: the verdict behind its gates) and :func:`all_of`
(a claim made of parts). :func:`symmetric_gate` is the stated exception, a gate that can fail a
claim (a subject that cannot qualify counts against it). Every decision is a
:class:`i2o.decision.Decision` with typed :class:`~i2o.decision.Facts`, which the chapters' prose
reads instead of the reasons' wording.

The interval of a mean over ``n`` independent values (seeds, or evaluation examples when there is
only one seed: :attr:`Interval.over` says which) is ``m ± t_{1−α/2, n−1} · s / √n``; the interval of
a difference of two means is Welch's, with Welch–Satterthwaite degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from i2o.decision import Decision, Facts, Gate, Needs, Over

#: Default confidence level of every interval (two one-sided tests at 5 %).
LEVEL = 0.90

def undecided(reason: str, by: Gate, needs: Needs | None = None, **facts: Any) -> Decision:
    """An undecided verdict: gate ``by`` closed, for ``reason``."""
    return Decision(None, reason, Facts(closed_by=by, needs=needs, **facts))


def relative_margin(fraction: float, reference: float) -> float:
    """A pre-registered margin ``δ = fraction × |reference|``: a fraction, fixed before the run,
    of a named reference effect measured in the same run (e.g. the accuracy lost at N' = 1)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a relative margin's fraction must be in (0, 1]; got {fraction!r}")
    if not np.isfinite(reference):
        raise ValueError(f"the reference effect of a relative margin is not finite: {reference}")
    return float(fraction * abs(reference))


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a mean (or a difference of means)."""

    mean: float
    lo: float
    hi: float
    n: int                   # number of independent values (smallest group for a difference)
    over: Over               # what the ``n`` values are (seeds, examples, …)
    level: float = LEVEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "over", Over.named(self.over))

    def describe(self, scale: float = 1.0, unit: str = "", digits: int = 2) -> str:
        f = f"{{:+.{digits}f}}"
        return (f"{f.format(scale * self.mean)}{unit}, {100 * self.level:.3g} % CI "
                f"[{f.format(scale * self.lo)}, {f.format(scale * self.hi)}]{unit} over "
                f"{self.n} {self.over}")


def _values(samples: Iterable[float], name: str) -> np.ndarray:
    values = np.asarray(list(samples), dtype=float).ravel()
    if values.size < 2:
        raise ValueError(f"{name}: a confidence interval needs at least 2 values; got "
                         f"{values.size}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: non-finite values {values.tolist()}")
    return values


def interval(samples: Iterable[float], over: Over = Over.SEEDS, level: float = LEVEL
             ) -> Interval:
    """``mean ± t · sd / √n`` of the values in ``samples`` (Student's t, n − 1 dof)."""
    values = _values(samples, "interval")
    n = values.size
    mean = float(values.mean())
    se = float(values.std(ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    return Interval(mean, mean - half, mean + half, n, over, level)


def difference(a: Iterable[float], b: Iterable[float], over: Over = Over.SEEDS,
               level: float = LEVEL) -> Interval:
    """Welch interval of ``mean(a) − mean(b)`` (independent groups, unequal variances)."""
    x, y = _values(a, "difference (first group)"), _values(b, "difference (second group)")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se2 = va + vb
    mean = float(x.mean() - y.mean())
    if se2 == 0.0:
        return Interval(mean, mean, mean, min(x.size, y.size), over, level)
    dof = se2 ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, dof) * np.sqrt(se2))
    return Interval(mean, mean - half, mean + half, min(x.size, y.size), over, level)


def from_se(mean: float, se: float, n: int, over: Over = Over.EXAMPLES,
            level: float = LEVEL) -> Interval:
    """``mean ± t_{n−1} · se`` from an already computed standard error over ``n`` values (e.g.
    the paired per-example differences of :func:`i2o.chapters.deq_gaps.curves.curve_from_sweep`)."""
    if n < 2 or not np.isfinite(se) or not np.isfinite(mean):
        raise ValueError(f"from_se needs n ≥ 2 and finite mean and se; got n={n}, mean={mean}, "
                         f"se={se}")
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(se)
    return Interval(float(mean), float(mean) - half, float(mean) + half, int(n), over, level)


def needs(ci: Interval, boundaries: Sequence[float]) -> Needs | None:
    """What would decide an interval that contains a boundary: the number of ``ci.over`` at which
    an interval of the same spread (half-width ∝ 1/√n) would clear the boundary nearest its mean,
    ``n × (half-width / |mean − boundary|)²``; ``None`` when no number would (a mean on the
    boundary) or when it is not more than ``ci.n``."""
    half = (ci.hi - ci.lo) / 2
    gap = min(abs(ci.mean - b) for b in boundaries)
    if not np.isfinite(half) or half <= 0 or gap <= 1e-12 * max(1.0, half):
        return None
    n = int(np.ceil(ci.n * (half / gap) ** 2))
    return Needs(n, ci.over) if n > ci.n else None


def needed(ci: Interval, boundaries: Sequence[float]) -> str:
    """:func:`needs` as the end of a reason: ``"; at this spread about 12 seeds (now 3) would
    decide it"`` (or that a mean on the boundary cannot be decided; ``""`` otherwise)."""
    half = (ci.hi - ci.lo) / 2
    gap = min(abs(ci.mean - b) for b in boundaries)
    if not np.isfinite(half) or half <= 0:
        return ""
    if gap <= 1e-12 * max(1.0, half):
        return f"; its mean lies on the boundary: no number of {ci.over} would decide it"
    found = needs(ci, boundaries)
    return f"; at this spread {found.describe()} (now {ci.n}) would decide it" if found else ""


def _straddles(ci: Interval, text: str, boundaries: Sequence[float]) -> Decision:
    """Undecided for want of power: ``ci`` contains a boundary; the facts say what would decide
    it."""
    return Decision(None, f"too little power: CI [{ci.lo:+.3g}, {ci.hi:+.3g}] {text}"
                    + needed(ci, boundaries), Facts(needs=needs(ci, boundaries)))


def _margin(margin: float) -> float:
    if not margin > 0:
        raise ValueError(f"margin must be > 0; got {margin!r}")
    return float(margin)


def equivalent(ci: Interval, margin: float) -> Decision:
    """Holds when the interval lies inside ``(−δ, δ)``; fails when it lies entirely outside."""
    d = _margin(margin)
    if -d < ci.lo and ci.hi < d:
        return Decision(True, f"CI inside ±{d:g}")
    if ci.lo >= d or ci.hi <= -d:
        return Decision(False, f"CI entirely outside ±{d:g}")
    return _straddles(ci, f"straddles ±{d:g}", (-d, d))


def above(ci: Interval, margin: float) -> Decision:
    """Holds when ``lo > δ`` (the quantity exceeds δ); fails when ``hi < δ``."""
    d = _margin(margin)
    if ci.lo > d:
        return Decision(True, f"CI above +{d:g}")
    if ci.hi < d:
        return Decision(False, f"CI below +{d:g}")
    return _straddles(ci, f"contains +{d:g}", (d,))


def not_below(ci: Interval, margin: float) -> Decision:
    """Holds when ``lo > −δ`` (the quantity is at least −δ); fails when ``hi < −δ``."""
    d = _margin(margin)
    if ci.lo > -d:
        return Decision(True, f"CI above −{d:g}")
    if ci.hi < -d:
        return Decision(False, f"CI below −{d:g}")
    return _straddles(ci, f"contains −{d:g}", (-d,))


def positive(ci: Interval) -> Decision:
    """Holds when ``lo > 0``; fails when ``hi ≤ 0``."""
    if ci.lo > 0:
        return Decision(True, "CI above 0")
    if ci.hi <= 0:
        return Decision(False, "CI at or below 0")
    return _straddles(ci, "contains 0", (0.0,))


def negative(ci: Interval) -> Decision:
    """Holds when ``hi < 0``; fails when ``lo ≥ 0``."""
    if ci.hi < 0:
        return Decision(True, "CI below 0")
    if ci.lo >= 0:
        return Decision(False, "CI at or above 0")
    return _straddles(ci, "contains 0", (0.0,))


# -- gates --------------------------------------------------------------------------------------

def fit_gate(train_scores: dict[str, Sequence[float]], threshold: float,
             criterion: str = "training accuracy", higher_is_better: bool = True,
             unit: str = "%", scale: float = 100.0) -> Decision:
    """Open (``True``) when every model's training score meets ``threshold``.

    ``train_scores`` maps a group name (an arm, a task) to the scores of its models. Closed:
    ``(None, "model does not fit its training set: IFT 41.0 % training accuracy (needs ≥ 90 %)")``.
    """
    failing, lowest = [], []
    for group, scores in train_scores.items():
        values = np.asarray(list(scores), dtype=float)
        if values.size == 0:
            return undecided(f"no trained model in group {group!r}", Gate.FIT)
        bad = ~np.isfinite(values) | ((values < threshold) if higher_is_better
                                      else (values > threshold))
        finite = values[np.isfinite(values)]
        worst = (float("nan") if finite.size == 0 else
                 float(finite.min() if higher_is_better else finite.max()))
        lowest.append(f"{group} {scale * worst:.1f}{unit}")
        if bad.any():
            shown = ", ".join(f"{scale * v:.1f}" for v in values[bad])
            failing.append(f"{group} ({int(bad.sum())}/{values.size}: {shown}{unit})")
    sign = "≥" if higher_is_better else "≤"
    need = f"{criterion} {sign} {scale * threshold:g}{unit}"
    if failing:
        return undecided(f"model does not fit its training set: {'; '.join(failing)} (needs "
                         f"{need})", Gate.FIT)
    return Decision(True, f"fit: every model {need} (worst: {', '.join(lowest)})")


def fit_quorum(train_scores: Mapping[str, Sequence[float]], threshold: float, quorum: int,
               names: Mapping[str, Sequence[str]] | None = None,
               criterion: str = "training accuracy", higher_is_better: bool = True,
               unit: str = "%", scale: float = 100.0) -> tuple[Decision, dict[str, np.ndarray]]:
    """Open when at least ``quorum`` models of every group meet ``threshold``; the claims are then
    decided on the models that do (the masks returned, group → boolean per model).

    ``names`` maps a group to its models' names (default ``#0, #1, …``), so that a model that does
    not fit is reported by name: ``(None, "too few models fit their training set (needs 4 per
    group): IFT 3/5 (not fitting: seed 2 86.9 %, seed 4 88.0 %)")``. A non-finite score never
    fits.
    """
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        raise ValueError(f"quorum must be an integer ≥ 1; got {quorum!r}")
    sign = "≥" if higher_is_better else "≤"
    need = f"{criterion} {sign} {scale * threshold:g}{unit}"
    masks: dict[str, np.ndarray] = {}
    counts, missing, short = [], [], []
    for group, scores in train_scores.items():
        values = np.asarray(list(scores), dtype=float)
        labels = list(names[group]) if names is not None else [f"#{i}" for i in
                                                                 range(values.size)]
        if len(labels) != values.size:
            raise ValueError(f"group {group!r}: {values.size} scores but {len(labels)} names")
        with np.errstate(invalid="ignore"):
            fits = np.isfinite(values) & ((values >= threshold) if higher_is_better
                                          else (values <= threshold))
        masks[group] = fits
        counts.append(f"{group} {int(fits.sum())}/{values.size}")
        out = [f"{group} {label} {scale * v:.1f}{unit}"
               for label, v, ok in zip(labels, values, fits, strict=True) if not ok]
        missing += out
        if fits.sum() < quorum:
            short.append(group)
    left = f" (not fitting: {', '.join(missing)})" if missing else ""
    if short:
        return undecided(f"too few models fit their training set ({need}; needs {quorum} per "
                      f"group): {', '.join(counts)}{left}", Gate.FIT,
                      not_fitting=tuple(missing)), masks
    return Decision(True, f"fit: {', '.join(counts)} models reach {need} (needs {quorum} per "
                          f"group; the claims use these){left}",
                    Facts(not_fitting=tuple(missing))), masks


def resolves(margin: float, resolution: float, margin_text: str = "",
             resolution_text: str = "", n: int = 0, of: Over = Over.EXAMPLES) -> Decision:
    """Open when a margin ``δ`` is at least the ``resolution`` of the measurement it is applied
    to (e.g. the standard error of one accuracy on the test set): below it, a difference of ``δ``
    cannot be told from measurement noise and a comparison against ``δ`` cannot fail. When the
    resolution is a standard error over ``n`` values ``of`` something (examples), a closed gate's
    facts say how many would bring it down to ``δ``: ``n × (resolution / δ)²``."""
    if not resolution >= 0:
        raise ValueError(f"resolution must be ≥ 0; got {resolution!r}")
    what = f"δ = {margin:.3g}" + (f" ({margin_text})" if margin_text else "")
    floor = f"{resolution:.3g}" + (f" ({resolution_text})" if resolution_text else "")
    if margin > 0 and margin >= resolution:
        return Decision(True, f"discriminates: {what} ≥ resolution {floor}")
    more = (Needs(int(np.ceil(n * (resolution / margin) ** 2)), of)
            if n > 0 and margin > 0 else None)
    return undecided(f"cannot discriminate: {what} is below the resolution {floor}, so the "
                     "comparison could not fail", Gate.RESOLUTION, more)


def powered(ci: Interval, margin: float, ratio: float = 0.5) -> Decision:
    """Open when the interval's half-width is at most ``ratio × δ``: the study can tell "within
    δ" from "beyond δ" with headroom, so a verdict does not hinge on one draw of seeds. Closed
    otherwise, naming the number of values of the same spread that would open it."""
    d = _margin(margin)
    if not 0 < ratio:
        raise ValueError(f"ratio must be > 0; got {ratio!r}")
    half = (ci.hi - ci.lo) / 2
    if half <= ratio * d:
        return Decision(True, f"powered: CI half-width {half:.3g} ≤ {ratio:g} × δ = "
                              f"{ratio * d:.3g}")
    n = int(np.ceil(ci.n * (half / (ratio * d)) ** 2))
    return undecided(f"too little power: CI half-width {half:.3g} > {ratio:g} × δ = "
                  f"{ratio * d:.3g} over {ci.n} {ci.over}; at this spread about {n:,} "
                  f"{ci.over} would give it", Gate.POWER, Needs(n, ci.over))


def health_gate(flags: dict[str, Sequence[str | None]]) -> Decision:
    """Open when no model diverged. ``flags`` maps a group to each model's divergence reason
    (``None`` or ``""``: healthy), as :func:`i2o.train.health.diverged` returns it."""
    bad = [f"{group} #{i}: {reason}" for group, reasons in flags.items()
           for i, reason in enumerate(reasons) if reason]
    if bad:
        return undecided("training diverged: " + "; ".join(bad), Gate.HEALTH)
    return Decision(True, "no model diverged")


def combine(*gates: Decision) -> Decision:
    """All gates open → ``(True, reasons joined)`` with their facts merged; else the first closed
    gate, undecided, with its reason and facts."""
    facts = Facts()
    for gate in gates:
        if gate.holds is not True:
            return Decision(None, gate.reason, facts.merged(gate.facts))
        facts = facts.merged(gate.facts)
    return Decision(True, "; ".join(gate.reason for gate in gates), facts)


def enough(count: int, needed: int, opened: str, closed: str) -> Decision:
    """Open when there are at least ``needed`` independent values to decide on (e.g. two seeds
    for an interval over seeds): ``(True, opened)`` when ``count ≥ needed``, else
    ``(None, closed)``; the caller's texts say what was counted."""
    return condition(count >= needed, closed, opened, by=Gate.COUNT)


_RELATIONS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
              "==": np.equal}
_RELATION_SIGNS = {"<": "<", "<=": "≤", ">": ">", ">=": "≥", "==": "="}


def compare(value: float | Sequence[float] | np.ndarray, relation: str,
            bound: float) -> Decision:
    """A quantity without sampling noise (a float64 residual, a rank, a count, a statistic
    computed once on fixed data) against a bound fixed before the run: holds when ``value
    relation bound`` is true (``relation`` one of ``<``, ``<=``, ``>``, ``>=``, ``==``; for an
    array, for every element, so an empty one holds), fails otherwise. A NaN satisfies no
    relation, so it fails. Never undecided: whether the run can decide is a gate's question
    (:func:`enough`; a ``compare`` used as a gate of :func:`gated` closes it when it fails)."""
    if relation not in _RELATIONS:
        raise ValueError(f"relation must be one of {', '.join(_RELATIONS)}; got {relation!r}")
    values = np.asarray(value)
    met = _RELATIONS[relation](values, bound)
    sign = _RELATION_SIGNS[relation]
    if values.ndim == 0:
        shown = f"{values.item():.3g}"
        return (Decision(True, f"{shown} {sign} {bound:g}") if bool(met) else
                Decision(False, f"{shown} is not {sign} {bound:g}"))
    failing = int(values.size - np.count_nonzero(met))
    if failing == 0:
        return Decision(True, f"all {values.size} values {sign} {bound:g}")
    return Decision(False, f"{failing} of {values.size} values not {sign} {bound:g}")


def describe_significant(ci: Interval) -> str:
    """:meth:`Interval.describe` to the third significant digit of the interval's half-width (of
    its mean when it has none: a deterministic comparison), with at most 6 decimals."""
    half = (ci.hi - ci.lo) / 2
    scale = half if half > 1e-9 * abs(ci.mean) else (abs(ci.mean) or 1.0)
    return ci.describe(digits=int(np.clip(2 - np.floor(np.log10(scale)), 0, 6)))


def lower_than(a: Iterable[float], b: Iterable[float], fraction: float,
               over: Over = Over.SEEDS) -> Decision:
    """Is the mean of ``a`` lower than the mean of ``b`` (independent groups, e.g. a model's test
    errors over seeds against another's)? The rule: the Welch interval of ``mean(b) − mean(a)``
    (:func:`difference`) against the margin δ = ``fraction`` × the larger |mean|
    (:func:`relative_margin`) holds when it lies above δ and fails when it lies below (so equal
    means fail: :func:`above`; :func:`positive` when δ = 0, both means 0); undecided when it
    contains δ or when a group has fewer than 2 values (:func:`enough`). The reason gives both
    means, the interval (:func:`describe_significant`) and δ, then why an undecided one is."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    means = f"{np.mean(x):.4g} vs {np.mean(y):.4g}"
    count = enough(min(len(x), len(y)), 2, "", f"{means}; needs ≥ 2 {over}")
    if count.holds is not True:
        return count
    ci = difference(y, x, over)
    margin = relative_margin(fraction, max(abs(float(np.mean(x))), abs(float(np.mean(y)))))
    text = f"{means} (difference {describe_significant(ci)}, margin {margin:.2g})"
    found = above(ci, margin) if margin > 0 else positive(ci)
    return Decision(found.holds, text if found.holds is not None else f"{text}; {found.reason}",
                    found.facts)


def condition(ok: bool | np.bool_, closed: str, opened: str = "", by: Gate = Gate.CONDITION
              ) -> Decision:
    """The general gate: open ``(True, opened)`` when the caller's condition ``ok`` holds,
    closed ``(None, closed)`` otherwise; for a criterion none of the gates above states (a
    training budget, a share of diverged runs, a reference that was computed). The caller's texts
    say what was required; ``by`` names the gate in the facts."""
    return Decision(True, opened) if bool(ok) else Decision(None, closed, Facts(closed_by=by))


def gated(checks: Iterable[Decision], predicate: Decision | Callable[[], Decision],
          quote: bool = False) -> Decision:
    """A claim behind gates checked in order: the first closed gate, undecided, with its reason
    and facts; when every gate is open, the ``predicate``'s decision, its reason alone or, with
    ``quote``, prefixed by the open gates' reasons (for a row whose text should say what allowed
    the verdict). ``checks`` may be a generator: a gate after a closed one is not evaluated, nor
    is a callable ``predicate``, which may rely on what the gates guarantee (finite values, a
    reached count)."""
    facts, reasons = Facts(), []
    for gate in checks:
        if gate.holds is not True:
            return Decision(None, gate.reason, facts.merged(gate.facts))
        facts = facts.merged(gate.facts)
        reasons.append(gate.reason)
    found = predicate() if callable(predicate) else predicate
    reason = "; ".join([*reasons, found.reason]) if quote else found.reason
    return Decision(found.holds, reason, facts.merged(found.facts))


#: The one-sided level of :func:`rank_association`.
RANK_ALPHA = 0.05


@dataclass(frozen=True)
class RankAssociation:
    """Kendall's τ between two untied samples of ``n`` values, with the exact one-sided p-values
    of its permutation null (every ordering equally likely): ``p_negative`` = P(τ ≤ observed),
    ``p_positive`` = P(τ ≥ observed)."""

    tau: float
    p_negative: float
    p_positive: float
    n: int

    def p(self, direction: int) -> float:
        """The one-sided p-value of ``direction`` (−1: decreasing, +1: increasing)."""
        return self.p_negative if direction < 0 else self.p_positive


def kendall(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
            ) -> RankAssociation:
    """:class:`RankAssociation` of ``x`` and ``y`` (finite, untied; scipy's exact method)."""
    less = stats.kendalltau(x, y, method="exact", alternative="less")
    greater = stats.kendalltau(x, y, method="exact", alternative="greater")
    return RankAssociation(float(less.statistic), float(less.pvalue), float(greater.pvalue),
                           len(x))


def smallest_rank_p(n: int) -> float:
    """The smallest one-sided p-value Kendall's exact test gives with ``n`` untied values: one
    ordering in n!."""
    return 1.0 / math.factorial(n)


def rank_association(x: Sequence[float], y: Sequence[float], direction: int,
                     alpha: float = RANK_ALPHA) -> Decision:
    """A monotone association claimed across models, one value pair per model (:func:`kendall`),
    one-sided in the claimed ``direction`` (−1: decreasing, +1: increasing). Holds when the
    p-value of the claimed direction is at most ``alpha``; fails when that of the opposite
    direction is; undecided otherwise, by "count" when ``n`` models cannot reach ``alpha``
    (:func:`smallest_rank_p`), or when a value is not finite."""
    if direction not in (-1, 1):
        raise ValueError(f"direction must be −1 or +1; got {direction!r}")
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"x and y must be two vectors of one length; got {a.shape}, {b.shape}")
    n = a.size
    if n < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return undecided(f"needs ≥ 2 models with finite values; got {n}", Gate.COUNT)
    found = kendall(a, b)
    p, q = found.p(direction), found.p(-direction)
    shown = (f"Kendall's τ = {found.tau:+.2f} over {n} models, exact one-sided p = {p:.3g} "
             f"({'decreasing' if direction < 0 else 'increasing'}; needs ≤ {alpha:g})")
    if p <= alpha:
        return Decision(True, shown)
    if q <= alpha:
        return Decision(False, f"{shown}; the opposite ordering has p = {q:.3g}")
    smallest = smallest_rank_p(n)
    if smallest > alpha:
        return undecided(f"{shown}: {n} models cannot reach p ≤ {alpha:g} (the smallest "
                         f"one-sided p is 1/{n}! = {smallest:.3g}); more models would decide it",
                         Gate.COUNT)
    return undecided(f"{shown}: the ordering is not told from a random one", Gate.POWER)


def symmetric_gate(subject: bool, reference: bool, predicate: Callable[[], Decision],
                   fails: str, closed: str, neither: str) -> Decision:
    """The gate of a claim "the subject does better than the reference" that needs both to
    qualify (e.g. to fit their training set) before they are compared, symmetric in what it
    requires but not in what it concludes: when both qualify, ``predicate()``'s decision as it is;
    when only the reference does, ``(False, fails)`` (a subject that cannot qualify counts against
    the claim, never for it); when only the subject does, ``(None, closed)``; when neither,
    ``(None, neither)``. Unlike the other gates it can fail a claim, so it comes last, around the
    predicate (a :func:`gated` gate before it closes with ``None``); the predicate is called only
    when both qualify."""
    if subject and reference:
        return predicate()
    if reference:
        return Decision(False, fails)
    return Decision(None, closed if subject else neither, Facts(closed_by=Gate.FIT))


def all_of(decisions: Iterable[Decision], separator: str = "; ") -> Decision:
    """A claim made of several parts (one comparison per comparator, per problem, per setting):
    fails when one part fails, holds when every part holds (so a claim of no parts holds),
    undecided otherwise; the reason is the parts' reasons joined by ``separator``, in order."""
    verdicts, reasons, facts = [], [], Facts()
    for part in decisions:
        verdicts.append(part.holds)
        reasons.append(part.reason)
        facts = facts.merged(part.facts)
    if any(v is False for v in verdicts):
        return Decision(False, separator.join(reasons), facts)
    return Decision(True if all(v is True for v in verdicts) else None, separator.join(reasons),
                    facts)
