"""The claims of Section 4 (generalization on the unseen, GOTU): a trained affine model reaches
its predicted unseen MSE, a DEQ against the FNN or the diagonal linear network, and the
frozen-coordinate task.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np

from i2o.chapters.separation.claims_fit import MARGIN, fits, seen_fit, symmetric_gate
from i2o.compute.profiles import Params
from i2o.verdicts import gates, margins

PREDICTION_RTOL = 0.05  # a trained affine model "reaches" its predicted unseen MSE within 5 %


_NAMES = {"deq_lower": "the DEQ", "linear_deq": "the linear DEQ",
          "dln": "the diagonal linear network",
          "deq_contractive": "the ReLU DEQ", "fnn": "the FNN"}


def prediction_claim(gotu: dict[str, Any], target: str, kind: str, p: Params
                     ) -> gates.Decision:
    """A trained affine model reaches the unseen MSE of the unique affine interpolant: within
    ``PREDICTION_RTOL`` of it (:func:`i2o.verdicts.gates.compare`). Gates: the theory gives a value
    (the interpolant exists and is unique), then the model fits."""
    entry = gotu[target]
    pred = entry["prediction"]["bias" if kind == "linear_deq" else "no_bias"]

    def checks() -> Iterator[gates.Decision]:
        yield gates.condition(bool(pred["interpolates"]) and bool(pred["unique"]),
                              "the theory gives no value: "
                              + ("no affine interpolant of the seen part"
                                 if not pred["interpolates"] else "several interpolants"))
        ok, text = seen_fit(entry, kind, p)
        yield gates.condition(ok, f"not fit: {text}")

    def measured() -> gates.Decision:
        unseen = float(np.mean(entry[kind]["unseen_mse"]))
        expected = float(pred["unseen_mse"])
        found = gates.compare(abs(unseen - expected), "<=", PREDICTION_RTOL * expected)
        return found.with_reason(f"unseen MSE {unseen:.4g}, predicted {expected:.4g} (within "
                                 f"{PREDICTION_RTOL:.0%})")

    return gates.gated(checks(), measured)


_AFFINE = {"linear_deq": "bias", "dln": "no_bias"}  # affine models and their interpolant


def forced_equal(entry: dict[str, Any], a: str, b: str) -> str | None:
    """Why models ``a`` and ``b`` cannot differ on the unseen part when both fit (``None`` if
    they can): both affine, each with a unique interpolant of the seen part, of equal unseen
    MSE."""
    if a not in _AFFINE or b not in _AFFINE:
        return None
    preds = [entry["prediction"][_AFFINE[kind]] for kind in (a, b)]
    if not all(bool(q["interpolates"]) and bool(q["unique"]) for q in preds):
        return None
    if not np.isclose(float(preds[0]["unseen_mse"]), float(preds[1]["unseen_mse"])):
        return None
    return (f"not testable here: both models are affine and the seen part has a unique affine "
            f"interpolant, so every model that fits scores {float(preds[0]['unseen_mse']):.4g} "
            f"on the unseen part")


def gotu_comparison(gotu: dict[str, Any], target: str, a: str, b: str, p: Params
                    ) -> gates.Decision:
    """Model ``a`` (a DEQ) has a lower unseen MSE than model ``b``: undecided when the setup
    forces them equal, then the symmetric fit gate, then :func:`i2o.verdicts.margins.lower_than`."""
    entry = gotu[target]
    reason = forced_equal(entry, a, b)

    def fitted() -> gates.Decision:
        return symmetric_gate(seen_fit(entry, a, p), seen_fit(entry, b, p), _NAMES[b], partial(
            margins.lower_than, entry[a]["unseen_mse"], entry[b]["unseen_mse"], MARGIN))

    return gates.gated([gates.condition(reason is None, reason or "")], fitted)


# --- Section 4, the frozen-coordinate task -------------------------------------------------------

def _frozen_fit(entry: dict[str, Any], kind: str, p: Params) -> tuple[bool, str]:
    return fits(entry[kind], float(np.mean(entry["seen_variance"])), p["fit_fraction"])


def frozen_prediction_claim(frozen: dict[str, Any], kind: str, p: Params
                            ) -> gates.Decision:
    """Every trained ``kind`` model of the frozen-coordinate task (:mod:`.frozen`) reaches its
    predicted unseen MSE within ``PREDICTION_RTOL`` (every seed's,
    :func:`i2o.verdicts.gates.compare`), at every ``f̂(∅)`` (:func:`i2o.verdicts.gates.all_of`);
    undecided when one does not fit."""

    def task(entry: dict[str, Any]) -> gates.Decision:
        ok, text = _frozen_fit(entry, kind, p)
        measured = np.asarray(entry[kind]["unseen_mse"], dtype=float)
        expected = float(entry["prediction"][kind])

        def within() -> gates.Decision:
            worst = float(np.max(np.abs(measured - expected)))
            found = gates.compare(worst, "<=", PREDICTION_RTOL * abs(expected))
            return found.with_reason(
                f"f̂(∅) = {entry['mean']:g}: unseen MSE {measured.mean():.4g} "
                f"(max deviation {worst:.2g}), predicted {expected:.4g}")

        return gates.gated([gates.condition(ok, f"f̂(∅) = {entry['mean']:g}: not fit, {text}")],
                           within)

    found = gates.all_of(task(entry)
                         for entry in sorted(frozen.values(), key=lambda e: e["mean"]))
    return found.with_reason(found.reason + f" (within {PREDICTION_RTOL:.0%})")


def frozen_comparison(entry: dict[str, Any], p: Params) -> gates.Decision:
    """On one frozen-coordinate task, the linear DEQ with bias has a lower unseen MSE than the
    diagonal linear network: the symmetric fit gate, then :func:`i2o.verdicts.margins.lower_than`
    over seeds."""
    lower = partial(margins.lower_than, entry["linear_deq"]["unseen_mse"],
                    entry["dln"]["unseen_mse"], MARGIN)
    return symmetric_gate(_frozen_fit(entry, "linear_deq", p), _frozen_fit(entry, "dln", p),
                          _NAMES["dln"], lower)
