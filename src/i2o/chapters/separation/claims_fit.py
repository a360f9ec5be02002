"""The fit gates and the comparison "A is lower than B" that the separation chapter's claims share
(the gates themselves are described in :mod:`.claims`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from i2o.compute.profiles import Params
from i2o.verdicts import gates, margins

MARGIN = 0.02  # relative practical margin of "lower than"


def fits(model: dict[str, Any], variance: float, fit_fraction: float) -> tuple[bool, str]:
    """The fit gate of one trained model (arrays over seeds): its seed-mean training MSE at most
    ``fit_fraction`` × ``variance`` (:func:`i2o.verdicts.gates.compare`)."""
    train = float(np.mean(model["train_mse"]))
    threshold = fit_fraction * variance
    ok = gates.compare(train, "<=", threshold).holds is True
    return ok, f"training MSE {train:.3g} (fit needs ≤ {threshold:.3g})"


UNTRAINABLE = "DEQ not trainable with this recipe"


def symmetric_gate(deq: tuple[bool, str], comparator: tuple[bool, str], comparator_name: str,
                   predicate: Callable[[], gates.Decision]) -> gates.Decision:
    """The fit gate of a claim "the DEQ does better than the comparator"
    (:func:`i2o.verdicts.gates.symmetric_gate`): ``predicate()`` (decide on the data) when both fit,
    else the verdict the gate itself gives (the gates are described in :mod:`.claims`)."""
    (deq_fits, deq_text), (other_fits, other_text) = deq, comparator
    return gates.symmetric_gate(
        deq_fits, other_fits, predicate,
        fails=f"{UNTRAINABLE}: the DEQ's {deq_text}, while {comparator_name} fits",
        closed=f"{comparator_name} does not fit: {other_text}",
        neither=f"neither fits: the DEQ's {deq_text}; {comparator_name}'s {other_text}")


def named_lower_than(name: str, a: Any, b: Any) -> gates.Decision:
    """:func:`i2o.verdicts.margins.lower_than` of ``a`` against ``b`` (margin ``MARGIN``), its
    reason prefixed by the comparator's ``name``."""
    found = margins.lower_than(a, b, MARGIN)
    return found.with_reason(f"{name}: {found.reason}")


def seen_fit(entry: dict[str, Any], kind: str, p: Params) -> tuple[bool, str]:
    """The GOTU fit gate: the MSE on the whole seen part, not only the training points."""
    model = entry[kind]
    on_seen = {"train_mse": model.get("seen_mse", model["train_mse"])}
    ok, text = fits(on_seen, float(np.mean(model["seen_variance"])), p["fit_fraction"])
    return ok, text.replace("training MSE", "MSE on the seen part")
