"""The chapter's conclusions, written from its claims table (:mod:`.claims`) by
:func:`i2o.verdicts.prose.conclusions`: rows ``<model>_<row>`` and the facts' recommended ``N'``."""

from __future__ import annotations

from i2o.chapters.diagnose import LABELS, MODELS
from i2o.verdicts.claims import Claims
from i2o.verdicts.prose import paragraph, sentence


def paragraphs(claims: Claims, section: str = "") -> list[str]:
    """One paragraph per model: fit, the answer about more and fewer iterations, the N' to use
    (the chapter has one conclusions section)."""
    parts = []
    for model in MODELS:
        label, rec = LABELS[model], claims.facts["recommended"][model]
        prefix = f"{model}_"
        row = {key.removeprefix(prefix): r for key, r in claims.by_id.items()
               if key.startswith(prefix)}
        text = [f"**{label}.**"]
        if row["fit"].holds is not True:
            text.append(f"It does not fit its training images ({row['fit'].value}; "
                        f"{row['fit'].check}), so its verdicts are undecided: the paper's claims "
                        "are about models that fit.")
            text.append(f"The curve alone suggests N' = {rec} (not a verdict).")
            parts.append(paragraph(text))
            continue
        text.append(f"It fits its training images ({row['fit'].value}).")
        text.append(sentence(
            row["help"], f"More iterations than in training help it beyond the margin "
            f"({row['help'].value}).", "More iterations than in training do not help it beyond "
            "the margin.", "Whether more iterations help it is undecided"))
        text.append(sentence(
            row["hurt"], f"They hurt it beyond the margin ({row['hurt'].value}): inner-iterations "
            "overfitting.", "They do not hurt it beyond the margin.",
            "Whether they hurt it is undecided"))
        if row["same"].holds is True or (row["help"].holds is False
                                         and row["hurt"].holds is False):
            text.append(sentence(row["same"], "Within the margin, more iterations change "
                                 "nothing: every interval above N lies inside ±δ.",
                                 "Some count above N differs by more than the margin.",
                                 "Whether they change nothing within the margin is undecided"))
        text.append(sentence(
            row["fewer"], f"Fewer iterations hurt it ({row['fewer'].value}).",
            f"Fewer iterations do not hurt it ({row['fewer'].value}).",
            "Whether fewer iterations hurt it is undecided"))
        if row["residual"].holds is False:
            text.append(f"Its solver does not keep converging beyond N ({row['residual'].value}).")
        text.append(sentence(
            row["recommendation"], f"Use N' = {rec} test-time iterations.", "",
            f"The recommendation is N' = {rec}, but the data cannot decide it"))
        parts.append(paragraph(text))
    return parts
