"""Gates: whether a run can decide a claim at all, and the combinators that put verdicts together.

A paper claim about trained DEQs is decided in two stages. First the **gates**: :func:`fit_gate`
requires every model the claim depends on to fit its training set (a stated criterion, e.g.
training accuracy ≥ 90 %); :func:`fit_quorum` requires at least ``q`` of each group's models to
fit, and the claim is then decided on those models only (the others are named);
:func:`health_gate` requires that none of them diverged (:mod:`i2o.train.health`);
:func:`resolves` requires a margin to be at least the resolution of the measurement it is applied
to (a comparison whose margin is below what the measurement can tell apart cannot fail);
:func:`enough` and :func:`condition` state a count or a criterion of the caller's. A closed gate
returns an undecided :class:`~i2o.verdicts.decision.Decision` and the claim is ``null`` with its
reason. Then the **predicates**: an interval against a margin (:mod:`i2o.verdicts.margins`, on the
intervals of :mod:`i2o.verdicts.intervals`), a rank association (:mod:`i2o.verdicts.ranks`) or a
quantity without sampling noise against a bound (:func:`compare`).

Three combinators put them together: :func:`combine` (gates in a row, all open or the first
closed), :func:`gated` (gates, then a predicate: the verdict behind its gates) and :func:`all_of`
(a claim made of parts). :func:`symmetric_gate` is the stated exception, a gate that can fail a
claim (a subject that cannot qualify counts against it). Every decision is a
:class:`i2o.verdicts.decision.Decision` with typed :class:`~i2o.verdicts.decision.Facts`, which the
chapters' prose reads instead of the reasons' wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from i2o.verdicts.decision import Decision, Facts, Gate, Needs, Over


def undecided(reason: str, by: Gate, needs: Needs | None = None, **facts: Any) -> Decision:
    """An undecided verdict: gate ``by`` closed, for ``reason``."""
    return Decision(None, reason, Facts(closed_by=by, needs=needs, **facts))


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
