"""The deq_gaps chapter's conclusions, written from its claim rows (:mod:`.claims`): one
paragraph per task and one for the overparametrization sweep
(:func:`i2o.verdicts.prose.conclusions`)."""

from __future__ import annotations

from i2o.chapters.deq_gaps.tasks import TASKS
from i2o.verdicts.claims import Claims
from i2o.verdicts.prose import paragraph, sentence


def task_paragraph(claims: Claims, task: str) -> str:
    rows = claims.by_id
    spec = TASKS[task]
    name = spec.label
    gate = rows[f"{task}_gate"]
    parts = [f"**{name}.**"]
    if gate.holds is not True and spec.inverse:
        parts.append(f"It has not learned enough to be judged ({gate.check}), so this run "
                     "decides none of the claims for it; the curves above are shown as measured.")
    elif gate.holds is not True:
        parts.append(f"Not in the regime of the paper's claims ({gate.check}), so this run "
                     "decides none of them for this model; the curves above are shown as "
                     "measured.")
    elif spec.inverse and gate.facts.regime_reached is False:
        parts.append("It has learned, but it is not in the overparametrized regime of Theorem 1 "
                     "(it reconstructs its training images no better than test images), so the "
                     "verdicts below describe such a model, not the regime the paper's argument "
                     "is about.")
    elif spec.inverse:
        parts.append("It has learned and reconstructs its training images better than test "
                     "images (the overparametrized regime).")
    elif gate.facts.not_fitting:
        parts.append(f"Not every seed's model fits; the claims use those that do ({gate.check}).")
    beaten = rows.get(f"{task}_generalises")
    unread = beaten is not None and beaten.holds is not True
    if beaten is not None and gate.holds is True:
        parts.append(sentence(
            beaten, f"On test data it beats {spec.baseline}, fitted on the same training data "
            f"({beaten.value}), so its test curve is read.",
            f"It does not beat {spec.baseline} on test data ({beaten.value}).",
            f"Its test curve is not read: it does not beat {spec.baseline} on test data "
            f"({beaten.value}), a memoriser's curve outside the paper's regime, so the rows on "
            "test data are undecided"))
    for split, data in (("test", "on test data"),
                        ("train", "on training data (training loss)")):
        if split == "test" and unread:
            continue
        key = f"{task}_{split}_no_gain"
        if key in rows and gate.holds is True:
            parts.append(sentence(
                rows[key],
                f"{data.capitalize()}, more iterations than in training bring no improvement "
                f"beyond the margin ({rows[key].value}).",
                f"{data.capitalize()}, more iterations than in training **do improve** the model "
                f"beyond the margin ({rows[key].value}), unlike the paper's Figure 2.",
                f"{data.capitalize()}, whether more iterations improve the model is undecided"))
        key = f"{task}_{split}_fewer_hurt"
        if gate.holds is True:
            parts.append(sentence(
                rows[key], f"Fewer iterations hurt {data}: none of the counts below N "
                f"improves on N by more than the margin ({rows[key].value}).",
                f"Fewer iterations do not always hurt {data} ({rows[key].value}).",
                f"Whether fewer iterations hurt {data} is undecided; {rows[key].value}"))
    g4 = spec.appendix_g4
    if g4 is not None and g4.row_id in rows and gate.holds is True and not unread:
        row = rows[g4.row_id]
        fewer = g4.side == "below"
        side = "fewer" if fewer else "more"
        parts.append(sentence(
            row, f"As Appendix G.4 reports for its {name.split()[-1]}, {side} iterations than in "
            f"training are better on test data ({row.value}).",
            f"Unlike Appendix G.4, which finds {side} iterations better for its "
            f"{name.split()[-1]}, no count {'below' if fewer else 'above'} N improves on N by "
            f"more than the margin here ({row.value}).",
            f"Whether {side} iterations are better, as Appendix G.4 finds, is undecided"))
    residual = rows[f"{task}_residual"]
    parts.append(sentence(
        residual, f"The residual of the last iterate keeps falling beyond N ({residual.value}): "
        "the solver is neither stuck nor already converged, as the paper's guard requires.",
        f"The paper's guard fails: {residual.check.split('; ')[-1]} ({residual.value}); the "
        "rows on more iterations are left undecided.",
        "The paper's solver guard is undecided, and with it the rows on more iterations"))
    tenfold = rows.get(f"{task}_tenfold")
    if tenfold is not None and tenfold.holds is not None:
        parts.append(f"By the book's own stricter check, which gates nothing, it falls "
                     f"{'at least' if tenfold.holds else 'less than'} tenfold.")
    return paragraph(parts)


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """One paragraph per task, and one for the overparametrization sweep (the chapter has one
    section of conclusions: ``section`` is not used)."""
    out = [task_paragraph(claims, task) for task in TASKS]
    if "overparam" in claims.by_id:
        row = claims["overparam"]
        out.append("**Overparametrization sweep.** " + sentence(
            row, f"The better a DEQ fits its training set, the more its training loss rises "
            f"with extra iterations, as the paper's Figure 4 finds for iMAML ({row.value}).",
            f"The better a DEQ fits its training set, the less its training loss rises with "
            f"extra iterations: the opposite of the paper's Figure 4 ordering ({row.value}).",
            "Whether the DEQs that fit better gain less from extra iterations is undecided"))
        sizes = claims.facts.get("overparam_in_regime")
        if sizes is not None:
            out[-1] += (f" Sizes in the regime (training accuracy ≥ {sizes['threshold']:g} %): "
                        + (", ".join(map(str, sizes["sizes"])) + " images" if sizes["sizes"]
                           else "none") + ".")
    return out
