"""The stability chapter's conclusions, written from its claim rows (:mod:`.claims`)."""

from __future__ import annotations

from i2o.claims import Claim
from i2o.prose import paragraph, sentence

LABELS = {"ift": "IFT", "unrolled": "unrolled"}


def conclusions(rows: dict[str, Claim]) -> str:
    """The summary paragraph of the chapter: one sentence per decided (or undecided) claim."""
    parts = []
    if rows["health"].holds is False:
        parts.append(f"**Warning: training diverged** ({rows['health'].value}); the claims that "
                     "depend on these models are undecided.")
    fit = rows["fit"]
    if fit.holds is False:
        parts.append(f"Too few models of this run fit their training set ({fit.check}), so the "
                     "paper's claims, which are about models that do, are not decided here.")
    elif "not fitting" in fit.check:
        parts.append(f"Not every model fits its training set; the claims below use those that "
                     f"do ({fit.check}).")
    else:
        parts.append(f"Every model fits its training set ({fit.check.removeprefix('fit: ')}).")
    parts.append(sentence(
        rows["not_more_stable"],
        "In this run the IFT-trained networks are **not more stable** than the unrolled ones "
        f"({rows['not_more_stable'].value}), as the paper's Figure 5 claims.",
        "In this run the IFT-trained networks are **more stable** than the unrolled ones by more "
        f"than the margin ({rows['not_more_stable'].value}), against the paper's Figure 5 claim.",
        "This run cannot say whether IFT-trained networks are more stable than unrolled ones"))
    if rows["not_more_stable"].holds is not None:
        parts.append(sentence(
            rows["equally_stable"],
            "Their accuracy changes are equal within the margin.",
            "Their accuracy changes differ by more than the margin.",
            "Whether their accuracy changes are equal within the margin is open"))
    for arm, label in LABELS.items():
        gain, residual = rows[f"{arm}_no_gain"], rows[f"{arm}_residual"]
        falling = residual.holds is True
        parts.append(sentence(
            gain,
            f"More test iterations than in training do not improve the {label} networks beyond "
            "the margin" + (" although the residual of the last iterate keeps falling: a better "
                            "solution of the inner problem does not give a better classifier."
                            if falling else "."),
            f"More test iterations than in training do improve the {label} networks beyond the "
            f"margin ({gain.value}): no inner-iterations overfitting in this run.",
            f"Whether more test iterations improve the {label} networks is undecided"))
        parts.append(sentence(
            rows[f"{arm}_fewer_hurt"],
            f"Fewer iterations than in training lower their accuracy "
            f"({rows[f'{arm}_fewer_hurt'].value}).",
            f"Fewer iterations than in training do not lower their accuracy "
            f"({rows[f'{arm}_fewer_hurt'].value}).",
            "Whether fewer iterations lower their accuracy is undecided"))
        if residual.holds is False:
            parts.append(f"Sanity check failed for {label}: the residual of the last iterate does "
                         f"not keep falling beyond the training N ({residual.value}), so its "
                         "solver is not converging there.")
    return paragraph(parts)
