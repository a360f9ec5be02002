"""The separation chapter's predicates: each holds on a doctored result made to hold, fails on one
made to fail, and stays undecided when a gate is not met."""

from __future__ import annotations

import numpy as np
import pytest

from i2o.chapters.separation import claims, prose, runs
from i2o.compute import profiles
from i2o.verdicts import gates, intervals, margins
from i2o.verdicts.claims import Claims


@pytest.fixture
def p():
    return profiles.resolve("separation", "quick")


def _lower_than(a, b):
    found = margins.lower_than(a, b, claims.MARGIN)
    return found.holds, found.reason


def test_lower_than_holds_fails_and_needs_power():
    """The chapter's "A is lower than B" (:func:`i2o.verdicts.margins.lower_than`, margin
    ``MARGIN``); the texts are those of the chapter's own rule before it moved to
    :mod:`i2o.verdicts.gates`."""
    lower, higher = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]
    assert _lower_than(lower, higher) == (
        True, "1 vs 2 (difference +1.000, 90 % CI [+0.826, +1.174] over 3 seeds, margin 0.04)")
    assert _lower_than(higher, lower) == (
        False, "2 vs 1 (difference -1.000, 90 % CI [-1.174, -0.826] over 3 seeds, margin 0.04)")
    assert _lower_than([5.0, 5.0], [5.0, 5.0]) == (  # equal: not lower
        False, "5 vs 5 (difference +0.00, 90 % CI [+0.00, +0.00] over 2 seeds, margin 0.1)")
    assert _lower_than([1.0, 3.0], [1.5, 3.5]) == (  # too noisy
        None, "2 vs 2.5 (difference +0.50, 90 % CI [-3.63, +4.63] over 2 seeds, margin 0.05); "
              "too little power: CI [-3.63, +4.63] contains +0.05; at this spread about 169 "
              "seeds (now 2) would decide it")
    assert _lower_than([1.0], [2.0]) == (None, "1 vs 2; needs ≥ 2 seeds")
    # both means 0: no relative margin, the interval must lie above 0
    assert _lower_than([0.0, 0.0], [0.0, 0.0]) == (
        False, "0 vs 0 (difference +0.00, 90 % CI [+0.00, +0.00] over 2 seeds, margin 0)")
    assert margins.lower_than([-1.0, 1.0], [1.0, -1.0], claims.MARGIN).holds is None


def test_an_interval_is_described_to_three_significant_digits_of_its_spread():
    assert intervals.describe_significant(intervals.Interval(1.0, 0.8321, 1.1679, 3, "seeds")) == (
        "+1.000, 90 % CI [+0.832, +1.168] over 3 seeds")
    ci = intervals.Interval(-0.0017, -0.05264, 0.04924, 3, "seeds")
    assert intervals.describe_significant(ci) == "-0.0017, 90 % CI [-0.0526, +0.0492] over 3 seeds"
    # no spread (a deterministic comparison): to the third digit of the mean
    assert intervals.describe_significant(intervals.Interval(250.0, 250.0, 250.0, 2, "seeds")) == (
        "+250, 90 % CI [+250, +250] over 2 seeds")


def test_the_prose_gives_each_section_its_claims_as_bullets():
    table = Claims("separation", "quick")
    table.decide("A", gates.Decision(True, "1 vs 2"), "", id="sawtooth/a", section="sawtooth")
    table.decide("B", gates.Decision(None, "too noisy"), "", id="sawtooth/b", section="sawtooth")
    table.decide("C", gates.Decision(False, "3 vs 1"), "", id="gotu/c", section="gotu")
    assert prose.paragraphs(table, "sawtooth") == [
        "- *A*: **holds** — 1 vs 2.\n- *B*: is **undecided** — too noisy."]
    assert prose.paragraphs(table, "gotu") == ["- *C*: **fails** — 3 vs 1."]
    assert prose.paragraphs(table) == [*prose.paragraphs(table, "sawtooth"), "",
                                       "", *prose.paragraphs(table, "gotu")]
    with pytest.raises(ValueError, match="section must be one of"):
        prose.paragraphs(table, "appendix")


def test_construction_claim(p):
    good = {"m": np.arange(1, 6), "pieces": 2 ** np.arange(1, 6), "max_error": np.zeros(5),
            "n_steps": np.arange(1, 6)}
    assert claims.construction_claim(good).holds is True
    bad = {**good, "pieces": np.array([2, 4, 8, 16, 31])}
    assert claims.construction_claim(bad).holds is False
    assert claims.construction_claim({**good, "max_error": np.full(5, 2e-9)}).holds is False
    holds, value = pair(claims.construction_claim({**good, "n_steps": np.array([1, 2, 3, 4, 6])}))
    assert holds is False and "solver steps = m: False" in value


def _saw(p, deq_train, deq_test, fnn_train, fnn_test):
    """A doctored Section 1 result: every model of the quick profile, 3 seeds."""
    models = runs.saw_models(p)
    n = len(models)
    train = np.full((n, 3), fnn_train, dtype=float)
    test = np.full((n, 3), fnn_test, dtype=float) + np.array([0.0, 0.001, -0.001])
    deq = next(i for i, m in enumerate(models) if m == ("deq_lower", p["flops_deq_width"], 1))
    train[deq], test[deq] = deq_train, deq_test + np.array([0.0, 0.001, -0.001])
    runs_k = {"train_mse": train, "test_mse": test, "target_variance": np.full((n, 3), 0.1)}
    return {"models": {"kind": np.array([m[0] for m in models]),
                       "width": np.array([m[1] for m in models]),
                       "depth": np.array([m[2] for m in models])},
            "flops_matched": {f"depth{L}": w for L, w in runs.flops_matched_widths(p).items()},
            "k5": runs_k}


def test_flops_claim_holds_fails_and_gates_symmetrically(p):
    assert claims.flops_claim(_saw(p, 0.001, 0.002, 0.001, 0.05), 5, p).holds is True
    assert claims.flops_claim(_saw(p, 0.001, 0.05, 0.001, 0.002), 5, p).holds is False
    # the FNNs fit and the DEQ does not: a DEQ the recipe cannot train counts against the claim
    holds, value = pair(claims.flops_claim(_saw(p, 0.08, 0.002, 0.001, 0.05), 5, p))
    assert holds is False and claims.UNTRAINABLE in value
    # the DEQ fits and the FNNs do not: undecided
    holds, value = pair(claims.flops_claim(_saw(p, 0.001, 0.002, 0.08, 0.05), 5, p))
    assert holds is None and "does not fit" in value
    holds, value = pair(claims.flops_claim(_saw(p, 0.08, 0.002, 0.08, 0.05), 5, p))
    assert holds is None and "neither fits" in value


def _best_of_r(p, deq_train, deq_test, fnn_train, fnn_test):
    matched = {f"depth{L}": w for L, w in runs.flops_matched_widths(p).items()}
    n = 1 + len(matched)
    noise = np.array([0.0, 0.001, -0.001])
    train = np.full((n, 3), fnn_train, dtype=float)
    test = np.full((n, 3), fnn_test, dtype=float) + noise
    train[0], test[0] = deq_train, deq_test + noise
    return {"flops_matched": matched,
            "k5": {"lbfgs": {"best_train_mse": train, "best_test_mse": test,
                             "target_variance": np.full((n, 3), 0.1)}}}


def test_flops_best_of_r_claim_every_branch(p):
    assert claims.flops_best_of_r_claim(_best_of_r(p, 1e-4, 0.002, 1e-4, 0.05), 5, p).holds is True
    assert claims.flops_best_of_r_claim(_best_of_r(p, 1e-4, 0.05, 1e-4, 0.002), 5, p).holds is False
    holds, value = pair(claims.flops_best_of_r_claim(_best_of_r(p, 0.08, 0.05, 1e-4, 0.002), 5, p))
    assert holds is False and claims.UNTRAINABLE in value
    holds, value = pair(claims.flops_best_of_r_claim(_best_of_r(p, 1e-4, 0.002, 0.08, 0.05), 5, p))
    assert holds is None and "does not fit" in value


def test_lbfgs_restarts_fit_a_small_sawtooth():
    from i2o.chapters.separation import sawtooth

    fitted = sawtooth.train_restarts("fnn", 8, 2, 2, seed=0, train_size=64, test_size=128,
                                     restarts=2, max_iter=200)
    assert fitted["train_mse"].shape == (2,)
    assert fitted["best_train_mse"] == min(fitted["train_mse"])
    assert fitted["best_train_mse"] < 0.1 * fitted["target_variance"]  # Δ² has 4 pieces


@pytest.mark.parametrize("deq_fits, other_fits, expected", [
    (True, True, (False, "measured")),
    (False, True, (False, f"{claims.UNTRAINABLE}: the DEQ's a, while the FNN fits")),
    (True, False, (None, "the FNN does not fit: b")),
    (False, False, (None, "neither fits: the DEQ's a; the FNN's b"))])
def test_symmetric_gate_every_branch(deq_fits, other_fits, expected):
    gated = claims.symmetric_gate((deq_fits, "a"), (other_fits, "b"), "the FNN",
                                  lambda: gates.Decision(False, "measured"))
    assert (gated.holds, gated.reason) == expected


def test_fit_gate_holds_at_the_fraction_of_the_variance_and_fails_above_it():
    assert claims.fits({"train_mse": np.array([0.004, 0.006])}, 0.1, 0.05) == (
        True, "training MSE 0.005 (fit needs ≤ 0.005)")
    assert claims.fits({"train_mse": np.array([0.2, 0.2])}, 0.1, 0.05) == (
        False, "training MSE 0.2 (fit needs ≤ 0.005)")
    assert claims.fits({"train_mse": np.array([np.nan])}, 0.1, 0.05)[0] is False


def _diag(distance, stationarity=1e-15, found=True, residual=1e-14):
    run = {"flow": {"relative_residual": residual, "time": 10.0},
           "dln": {"relative_residual": 1e-14},
           "plus": {"found": found, "distance": distance, "distance_gd": 1e-4,
                    "stationarity": stationarity, "reason": "" if found else "unbounded"},
           "density_deq": 0.9, "density_dln": 0.3}
    run["minus"] = run["plus"]
    return {"s0": run, "s1": run, "seconds": 1.0}


def test_argmin_claim(p):
    assert claims.argmin_claim(_diag(1e-11), "plus", p).holds is True
    assert claims.argmin_claim(_diag(0.5), "plus", p).holds is False
    assert claims.argmin_claim(_diag(np.inf, 0.6, found=False), "plus", p).holds is False
    assert claims.argmin_claim(_diag(np.inf, 1e-12, found=False), "plus", p).holds is None
    one_unfound = _diag(1e-11)  # a problem without minimizer whose limit is a KKT point
    one_unfound["s1"] = {**one_unfound["s1"], "plus": {**one_unfound["s1"]["plus"],
                                                       "found": False, "stationarity": 1e-12}}
    holds, value = pair(claims.argmin_claim(one_unfound, "plus", p))
    assert holds is None and value.startswith("s0: distance 1.0e-11")
    holds, value = pair(claims.argmin_claim(_diag(1e-11, residual=1e-3), "plus", p))
    assert holds is None and "did not interpolate" in value


def test_density_claim(p):
    assert claims.density_claim(_diag(0.0), p).holds is True
    doctored = _diag(0.0)
    doctored["s1"] = {**doctored["s1"], "density_deq": 0.1}
    assert claims.density_claim(doctored, p).holds is False
    doctored["s1"] = {**doctored["s1"], "density_deq": 0.3}  # as dense as the DLN: not denser
    assert claims.density_claim(doctored, p).holds is False


def _gotu(unseen, train=(0.0, 0.0, 0.0), interpolates=True, unique=True, trains=None):
    def model(u, t):
        return {"train_mse": np.array(t), "unseen_mse": np.array(u),
                "seen_variance": np.full(3, 4.0), "feature_density": np.array(u) / 100}

    pred = {"interpolates": interpolates, "unique": unique, "unseen_mse": 19.25}
    entry = {"prediction": {"bias": pred, "no_bias": pred}}
    for kind, values in unseen.items():
        entry[kind] = model(values, (trains or {}).get(kind, train))
    return {"f1": entry}


def test_prediction_claim(p):
    at = {"linear_deq": [19.2, 19.3, 19.25]}
    assert claims.prediction_claim(_gotu(at), "f1", "linear_deq", p).holds is True
    off = {"linear_deq": [10.0, 11.0, 10.5]}
    assert claims.prediction_claim(_gotu(off), "f1", "linear_deq", p).holds is False
    at_tolerance = {"linear_deq": [19.25 * (1 + claims.PREDICTION_RTOL) - 1e-9] * 3}
    assert claims.prediction_claim(_gotu(at_tolerance), "f1", "linear_deq", p).holds is True
    beyond = {"linear_deq": [19.25 * (1 + claims.PREDICTION_RTOL) + 1e-9] * 3}
    assert claims.prediction_claim(_gotu(beyond), "f1", "linear_deq", p).holds is False
    unfit = _gotu(at, train=(3.0, 3.0, 3.0))
    assert claims.prediction_claim(unfit, "f1", "linear_deq", p).holds is None
    none = _gotu(at, interpolates=False)
    holds, value = pair(claims.prediction_claim(none, "f1", "linear_deq", p))
    assert holds is None and "no value" in value


def test_gotu_comparison_and_feature_density(p):
    better = {"deq_contractive": [1.0, 1.1, 0.9], "fnn": [3.0, 3.1, 2.9]}
    assert claims.gotu_comparison(_gotu(better), "f1", "deq_contractive", "fnn", p).holds is True
    worse = {"deq_contractive": [3.0, 3.1, 2.9], "fnn": [1.0, 1.1, 0.9]}
    assert claims.gotu_comparison(_gotu(worse), "f1", "deq_contractive", "fnn", p).holds is False
    # feature density: the doctored densities are unseen/100, so "better" has the sparser DEQ
    assert claims.feature_density_claim(_gotu(worse), p, "f1").holds is True
    assert claims.feature_density_claim(_gotu(better), p, "f1").holds is False
    unfit = _gotu(better, train=(3.0, 3.0, 3.0))
    holds, value = pair(claims.gotu_comparison(unfit, "f1", "deq_contractive", "fnn", p))
    assert holds is None and "neither fits" in value
    deq_unfit = _gotu(better, trains={"deq_contractive": (3.0, 3.0, 3.0)})
    holds, value = pair(claims.gotu_comparison(deq_unfit, "f1", "deq_contractive", "fnn", p))
    assert holds is False and claims.UNTRAINABLE in value
    fnn_unfit = _gotu(better, trains={"fnn": (3.0, 3.0, 3.0)})
    holds, value = pair(claims.gotu_comparison(fnn_unfit, "f1", "deq_contractive", "fnn", p))
    assert holds is None and "the FNN does not fit" in value
    # the feature density claim, gated the same way
    assert claims.feature_density_claim(deq_unfit, p, "f1").holds is False
    assert claims.feature_density_claim(fnn_unfit, p, "f1").holds is None


def test_two_affine_models_forced_equal_are_not_testable(p):
    apart = {"linear_deq": [1.0, 1.1, 0.9], "dln": [3.0, 3.1, 2.9]}
    holds, value = pair(claims.gotu_comparison(_gotu(apart), "f1", "linear_deq", "dln", p))
    assert holds is None and "not testable here" in value
    # several interpolants: the implicit bias can choose, so the comparison is made
    assert claims.gotu_comparison(_gotu(apart, unique=False), "f1", "linear_deq", "dln",
                                  p).holds is True
    holds, value = pair(claims.prediction_claim(_gotu(apart, unique=False), "f1", "linear_deq", p))
    assert holds is None and "several interpolants" in value


def test_density_claim_is_undecided_when_a_model_does_not_interpolate(p):
    doctored = _diag(0.0)
    doctored["s1"] = {**doctored["s1"], "dln": {"relative_residual": 1e-3}}
    holds, value = pair(claims.density_claim(doctored, p))
    assert holds is None and "did not interpolate" in value


def _steep(fnn_growth, reached=1, deq_reached=None, seeds=3):
    dims = np.array([6, 8, 10, 12])
    noise = np.array([[1.0, 1.05, 0.95][:seeds]])

    def kind(bits, hit):
        weights = 2.0 ** (bits * dims[:, None]) * noise
        return {"max_weight": weights, "reached": np.broadcast_to(hit, (4, seeds)).copy()}

    return {"dims": dims, "deq_lower": kind(0.0, reached if deq_reached is None else deq_reached),
            "fnn": kind(fnn_growth, reached)}


def test_steep_claim_every_branch():
    assert claims.steep_claim(_steep(0.5)).holds is True
    assert claims.steep_claim(_steep(0.0)).holds is False
    # a sign (READING.md, principle 1): 0.03 bits/dimension faster holds, under the old 0.05 margin
    assert claims.steep_claim(_steep(0.03)).holds is True
    holds, value = pair(claims.steep_claim(_steep(0.5, reached=0)))
    assert holds is None and "neither fits" in value
    holds, value = pair(claims.steep_claim(_steep(0.5, reached=1, deq_reached=0)))
    assert holds is False and claims.UNTRAINABLE in value
    holds, value = pair(claims.steep_claim(_steep(0.5, reached=0, deq_reached=1)))
    assert holds is None and "the FNN does not fit" in value
    holds, value = pair(claims.steep_claim(_steep(0.5, seeds=1)))
    assert holds is None and "needs ≥ 2" in value


def test_steep_claim_drops_a_seed_that_missed_the_level_at_one_d():
    one_miss = np.ones((4, 3), dtype=int)
    one_miss[3, 2] = 0  # the DEQ of seed 2 never reached the level at d = 12
    holds, value = pair(claims.steep_claim(_steep(0.5, deq_reached=one_miss)))
    assert holds is True and "over 3 and 2 seeds" in value
    two_miss = one_miss.copy()
    two_miss[0, 1] = 0
    holds, value = pair(claims.steep_claim(_steep(0.5, deq_reached=two_miss)))
    assert holds is False and claims.UNTRAINABLE in value


def pair(decision):
    """A decision's verdict and reason."""
    return decision.holds, decision.reason


def test_an_open_comparison_names_the_seed_list_that_would_decide_it(p):
    """A row undecided for want of seeds keeps what it needs (its facts) and names the run with
    more seeds of the list its intervals are over (``seeds``, ``steep_seeds``, ``gotu_seeds``);
    a row closed by a gate names none."""
    from i2o.compute import door
    from i2o.verdicts import deciding

    noisy = margins.lower_than([1.0, 3.0], [1.5, 3.5], claims.MARGIN)
    assert noisy.holds is None and noisy.facts.needs is not None
    table = Claims("separation", p.profile)
    for row_id in ("sawtooth/adam-k3", "steep/weights", "diagonal/feature-density",
                   "gotu/f1-deq-vs-fnn"):
        table.decide(row_id, noisy, "", id=row_id, section=row_id.split("/", 1)[0])
    table.decide("closed", gates.condition(False, "not fit"), "", id="gotu/closed",
                 section="gotu")
    deciding.name_remedies(table, p, deciding.Rates(), claims.seed_list)
    assert set(table.remedies) == {"sawtooth/adam-k3", "steep/weights",
                                   "diagonal/feature-density", "gotu/f1-deq-vs-fnn"}
    raised = {row_id: dict(remedy.overrides) for row_id, remedy in table.remedies.items()}
    assert [next(iter(r)) for r in raised.values()] == ["seeds", "steep_seeds", "gotu_seeds",
                                                        "gotu_seeds"]
    for row_id, overrides in raised.items():
        (name, chosen), = overrides.items()
        assert len(chosen) >= deciding.HEADROOM * noisy.facts.needs.count
        assert chosen[:len(p[name])] == list(p[name])
        assert table[row_id].decided_by == table.remedies[row_id].command()
        door.enter("separation", p.profile, **overrides)
