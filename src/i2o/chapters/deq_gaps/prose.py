"""The deq_gaps chapter's conclusions, written from its claim rows (:mod:`.claims`): one
paragraph per task and one for the overparametrization sweep (:func:`i2o.prose.conclusions`)."""

from __future__ import annotations

from i2o.chapters.deq_gaps.claims import INVERSE, NAMES
from i2o.claims import Claims
from i2o.prose import paragraph, sentence


def task_paragraph(claims: Claims, task: str) -> str:
    rows = claims.by_id
    name = NAMES[task]
    gate = rows[f"{task}_gate"]
    parts = [f"**{name}.**"]
    if gate.holds is not True and task in INVERSE:
        parts.append(f"It has not learned enough to be judged ({gate.check}), so this run "
                     "decides none of the claims for it; the curves above are shown as measured.")
    elif gate.holds is not True:
        parts.append(f"Not in the regime of the paper's claims ({gate.check}), so this run "
                     "decides none of them for this model; the curves above are shown as "
                     "measured.")
    elif task in INVERSE and gate.facts.regime_reached is False:
        parts.append("It has learned, but it is not in the overparametrized regime of Theorem 1 "
                     "(it reconstructs its training images no better than test images), so the "
                     "verdicts below describe such a model, not the regime the paper's argument "
                     "is about.")
    elif task in INVERSE:
        parts.append("It has learned and reconstructs its training images better than test "
                     "images (the overparametrized regime).")
    elif gate.facts.not_fitting:
        parts.append(f"Not every seed's model fits; the claims use those that do ({gate.check}).")
    for split, data in (("test", "on test data"),
                        ("train", "on training data (training loss)")):
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
                rows[key], f"Fewer iterations hurt {data} ({rows[key].value}).",
                f"Fewer iterations do not hurt {data} ({rows[key].value}).",
                f"Whether fewer iterations hurt {data} is undecided; {rows[key].value}"))
    residual = rows[f"{task}_residual"]
    parts.append(sentence(
        residual, f"The residual of the last iterate keeps falling ({residual.value}).",
        f"Sanity check failed: the residual of the last iterate does not keep falling "
        f"({residual.value}); the solver is not converging there.",
        "The residual sanity check is undecided"))
    return paragraph(parts)


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """One paragraph per task, and one for the overparametrization sweep (the chapter has one
    section of conclusions: ``section`` is not used)."""
    out = [task_paragraph(claims, task) for task in NAMES]
    if "overparam" in claims.by_id:
        row = claims["overparam"]
        out.append("**Overparametrization sweep.** " + sentence(
            row, f"The better a DEQ fits its training set, the larger the share of its fit it "
            f"loses to extra iterations ({row.value}).",
            f"The share of its fit a DEQ loses to extra iterations is not larger when it fits "
            f"its training set better ({row.value}).",
            "Whether the DEQs that fit better lose a larger share of their fit to extra "
            "iterations is undecided"))
        sizes = claims.facts.get("overparam_in_regime")
        if sizes is not None:
            out[-1] += (f" Sizes in the regime (training accuracy ≥ {sizes['threshold']:g} %): "
                        + (", ".join(map(str, sizes["sizes"])) + " images" if sizes["sizes"]
                           else "none") + ".")
    return out
