"""Conclusion sentences generated from claim rows, never written by hand.

A chapter states a conclusion through :func:`sentence`: one text for a claim that holds, one for a
claim that fails, and for an undecided claim a sentence that says so and gives the reason the
claim row carries (its ``check``). Chapters join the sentences with :func:`paragraph` and show them
with :func:`show` (Markdown in a notebook, text elsewhere).
"""

from __future__ import annotations

from collections.abc import Iterable

from i2o.claims import Claim


def sentence(row: Claim, holds: str, fails: str, undecided: str) -> str:
    """``holds`` / ``fails`` by the row's verdict; ``undecided`` followed by the row's reason."""
    if row.holds is True:
        return holds
    if row.holds is False:
        return fails
    reason = row.check or (f"run the {row.decided_by!r} profile" if row.decided_by else
                           "this profile cannot decide it")
    return f"{undecided.rstrip('.')} ({reason})."


def paragraph(sentences: Iterable[str]) -> str:
    return " ".join(s.strip() for s in sentences if s and s.strip())


def show(text: str) -> str:
    """Display ``text`` as Markdown in a notebook (print it elsewhere); return it."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(text))
            return text
    except ImportError:
        pass
    print(text)
    return text
