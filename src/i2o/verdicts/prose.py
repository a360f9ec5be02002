"""Conclusion sentences generated from claim rows, never written by hand: the one prose writer,
with two renderings, a sentence per row (:func:`sentence`) and a bullet per row (:func:`bullet`).

Every chapter's conclusions are written by :func:`conclusions` from its claims table: the
chapter's ``prose`` module (``<package>.prose``, found through the manifest like
:mod:`i2o.compute.sweep` finds ``runs``) has ``paragraphs(claims, section) -> list[str]``, each
sentence built with :func:`sentence`: one text for a claim that holds, one for a claim that fails,
and for an undecided claim a sentence that says so and gives the reason the claim row carries (its
``check``). Sentences are joined with :func:`paragraph` (a list, a sentence per item);
:func:`conclusions` shows the result
(Markdown in a notebook, text elsewhere), followed by the runs that would decide the rows left
open (:func:`remedies`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from i2o.compute import profiles
from i2o.verdicts.claims import Claim, Claims


def sentence(row: Claim, holds: str, fails: str, undecided: str) -> str:
    """``holds`` / ``fails`` by the row's verdict; ``undecided`` followed by the row's reason."""
    if row.holds is True:
        return holds
    if row.holds is False:
        return fails
    reason = row.check or (f"run the {row.decided_by!r} profile" if row.decided_by else
                           "this profile cannot decide it")
    return f"{undecided.rstrip('.')} ({reason})."


_VERDICTS = {True: "**holds**", False: "**fails**", None: "is **undecided**"}


def bullet(row: Claim) -> str:
    """The second rendering, for a chapter that lists its claims: one Markdown bullet, the claim,
    its verdict and its reason (which quotes the measurement)."""
    return f"- *{row.claim}*: {_VERDICTS[row.holds]}" + (f" — {row.check}." if row.check else ".")


def paragraph(sentences: Iterable[str]) -> str:
    """``sentences`` as one short Markdown list, a sentence per item; a first sentence that is
    only a bold label (``"**Classification.**"``) stays above the list as its title."""
    kept = [s.strip() for s in sentences if s and s.strip()]
    title = kept.pop(0) if kept and _is_label(kept[0]) else ""
    items = "\n".join(f"- {s}" for s in kept)
    return f"{title}\n\n{items}" if title and items else title or items


def _is_label(text: str) -> bool:
    return text.startswith("**") and text.endswith("**") and text.count("**") == 2


def show(text: str) -> str:
    """Display ``text`` as Markdown in a notebook (print it elsewhere); return it."""
    try:
        from IPython import get_ipython  # lazy: IPython only inside a notebook
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(text))
            return text
    except ImportError:
        pass
    print(text)
    return text


def conclusions(claims: Claims, section: str = "", display: bool = True) -> str:
    """The conclusions of ``claims``'s chapter (of one ``section`` of it, for a chapter that
    concludes each section), written by the chapter's ``prose.paragraphs``; shown when
    ``display``; returned."""
    package = profiles.entry(claims.figure)["package"]
    writer = importlib.import_module(f"{package}.prose")
    parts = [p for p in writer.paragraphs(claims, section) if p and p.strip()]
    parts.append(remedies(claims, section))
    text = "\n\n".join(p for p in parts if p)
    return show(text) if display else text


def remedies(claims: Claims, section: str = "") -> str:
    """The runs that would decide the rows this run left open (of ``section`` only, when given),
    as a Markdown list (:mod:`i2o.verdicts.deciding`); ``""`` when there are none."""
    lines = [f"- *{claims[id].claim}*: {remedy.describe()}"
             for id, remedy in claims.remedies.items()
             if not section or claims[id].section == section]
    if not lines:
        return ""
    return ("**What would decide the rows this run leaves open**, at the spread it measured:\n"
            + "\n".join(lines))
