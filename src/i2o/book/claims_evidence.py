"""What the page "The paper's claims at a glance" (:mod:`i2o.book.claims_page`) knows of each
chapter: each row's text and verdicts at ``quick`` and ``paper``, whether its replicates agree,
and the time this build's notebook took, read from this build's executed chapters and, where it
lacks them, from the robustness summaries and ``published/``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from i2o.book import published, site
from i2o.book.claim_anchors import anchor, anchor_notebook
from i2o.compute import profiles
from i2o.provenance import replicate_summary
from i2o.verdicts import claims

QUICK, PAPER = "quick", "paper"
THIS_BUILD = "this build"
PUBLISHED = "published"
OWN_REPLICATES = "this build's replicates"


@dataclass(frozen=True)
class Verdict:
    """A row's verdict, its measured value and check, where it comes from (:data:`THIS_BUILD`,
    :data:`OWN_REPLICATES` or :data:`PUBLISHED`) and, when published, its status (``current``
    or ``stale: …``)."""

    verdict: str
    value: str = ""
    origin: str = THIS_BUILD
    state: str = ""
    check: str = ""

    def tip(self) -> str:
        """The measured value and the check, as the Robustness page's tooltips."""
        return " — check: ".join(part for part in (self.value, self.check) if part)


@dataclass(frozen=True)
class Agreement:
    """A row's status across replicates (:data:`i2o.provenance.replicate_summary.STATUSES`) and its
    source."""

    status: str
    replicates: tuple[int, ...]
    origin: str
    state: str = ""


@dataclass
class ChapterEvidence:
    """What the page shows of one chapter: each row's text and verdicts, the ids anchored on the
    chapter's page, and the time this build's notebook took at the profile it ran."""

    figure: str
    texts: dict[str, str] = field(default_factory=dict)
    quick: dict[str, Verdict] = field(default_factory=dict)
    paper: dict[str, Verdict] = field(default_factory=dict)
    agreement: dict[str, Agreement] = field(default_factory=dict)
    anchored: frozenset[str] = frozenset()
    seconds: dict[str, float] = field(default_factory=dict)
    #: its cost from an empty cache by profile, as the page says it (:mod:`i2o.compute.plan`)
    costs: dict[str, str] = field(default_factory=dict)
    #: the chapter ran at ``paper`` (in this build or published), so a row it lacks is "no such row"
    paper_run: bool = False
    note: str = ""
    #: rows without an id (no claim can name them), by their text
    unnamed: list[str] = field(default_factory=list)

    def see(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Record the rows' texts (a row already seen keeps its text; one without an id goes
        to :attr:`unnamed`)."""
        for row in rows:
            if row.get("id"):
                self.texts.setdefault(row["id"], row["claim"])
            elif row["claim"] not in self.unnamed:
                self.unnamed.append(row["claim"])

    def page(self) -> str:
        return f"{Path(profiles.entry(self.figure)['notebook']).stem}.html"

    def link(self, row_id: str) -> str:
        """The row on its chapter's page when it is anchored there, else the page."""
        return self.page() + (f"#{anchor(row_id)}" if row_id in self.anchored else "")


@dataclass(frozen=True)
class BuildRun:
    """One chapter as this build executed it: the profile, the notebook's time, its rows."""

    profile: str
    seconds: float | None
    rows: tuple[dict[str, Any], ...]


def build_run(figure: str, stamp: Mapping[str, Any]) -> BuildRun | None:
    """This build's run of ``figure`` (its staged notebook's ``stamp`` and ``_build/claims/
    <figure>.json``), or ``None`` when it was not built or its rows are of another profile."""
    if not stamp or "not_built" in stamp or "profile" not in stamp:
        return None
    try:
        rows = json.loads((claims.claims_dir() / f"{figure}.json").read_text())
    except (OSError, ValueError):
        return None
    if any(row.get("profile") != stamp["profile"] for row in rows):
        return None
    seconds = stamp.get("seconds")
    return BuildRun(stamp["profile"], float(seconds) if seconds is not None else None,
                    tuple(rows))


def _from_rows(rows: Iterable[Mapping[str, Any]], origin: str, state: str) -> dict[str, Verdict]:
    return {row["id"]: Verdict(replicate_summary.verdict(row), str(row.get("value", "")), origin,
                               state, str(row.get("check", "")))
            for row in rows if row.get("id")}


def first_replicate(at: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    """The lowest replicate computed (replicate 0, the book's draw, when present) and its
    verdict, from a robustness row's ``replicates``; ``None`` when none was computed."""
    present = sorted((int(r), v) for r, v in at.items() if v is not None)
    return present[0] if present else None


def evidence(figure: str, build: BuildRun | None, summary: Mapping[str, Any] | None,
             summary_origin: str, summary_state: str, numbers_paper: Mapping[str, Any] | None,
             paper_state: str, anchored: frozenset[str] = frozenset()) -> ChapterEvidence:
    """One chapter's rows and verdicts.

    ``summary``: a robustness summary at ``quick`` (its ``chapters``), from ``summary_origin``
    with status ``summary_state`` (``""`` for this build's own); ``numbers_paper``: a published
    ``numbers-paper.json`` (status ``paper_state``). ``anchored``: the row ids with an anchor on
    the chapter's page.
    """
    found = ChapterEvidence(figure, anchored=anchored)
    if build is not None:
        found.see(build.rows)
        if build.seconds is not None:
            found.seconds[build.profile] = build.seconds
        if build.profile not in (QUICK, PAPER):
            found.note = (f"this build ran it at profile {build.profile!r}, whose verdicts are "
                          "not shown")
    table = (summary or {}).get("chapters", {}).get(figure)
    found.see((table or {}).get("claims", []))
    for row in (table or {}).get("claims", []):
        if not row.get("id"):
            continue
        at = row.get("replicates", {})
        replicates = tuple(sorted(int(r) for r in at))
        found.agreement[row["id"]] = Agreement(row["agreement"], replicates, summary_origin,
                                               summary_state)
        if (first := first_replicate(at)) is not None:
            replicate, at_first = first
            found.quick[row["id"]] = Verdict(at_first["verdict"], at_first.get("value", ""),
                                             f"{summary_origin}, r{replicate}", summary_state,
                                             at_first.get("check", ""))
    paper_rows = ((numbers_paper or {}).get("chapters", {}).get(figure) or {}).get("claims")
    if paper_rows is not None:
        found.paper_run = True
        found.paper.update(_from_rows(paper_rows, PUBLISHED, paper_state))
        found.see(paper_rows)
    if build is not None and build.profile == QUICK:
        found.quick.update(_from_rows(build.rows, THIS_BUILD, ""))
    if build is not None and build.profile == PAPER:
        found.paper = _from_rows(build.rows, THIS_BUILD, "")
        found.paper_run = True
    return found


Fallback = tuple[Mapping[str, Any], Mapping[str, tuple[str, str]]]


@dataclass(frozen=True)
class SummarySource:
    """A robustness summary at ``quick``, where it comes from, and each chapter's status."""

    summary: Mapping[str, Any]
    origin: str
    states: Mapping[str, str]

    def has(self, figure: str) -> bool:
        return figure in self.summary.get("chapters", {})


def quick_sources(fallback: Fallback | None) -> list[SummarySource]:
    """The robustness summaries at ``quick`` in the order they are read: this build's own
    (``make robustness``), then the published one (``fallback``,
    :func:`i2o.book.published.robustness_fallback`) for the chapters this build's lacks."""
    sources = []
    own = replicate_summary.read_summary()
    if own is not None and own.get("profile") == QUICK:
        sources.append(SummarySource(own, OWN_REPLICATES, {}))
    if fallback is not None:
        data, states = fallback
        sources.append(SummarySource(data, PUBLISHED, {f: s for f, (s, _) in states.items()}))
    return sources


def provenance_lines(summary: Mapping[str, Any] | None,
                     numbers_paper: Mapping[str, Any] | None) -> list[str]:
    """A line per published file the page read (``summary``: the published robustness summary,
    when a chapter's verdicts came from it), with where it came from."""
    lines = []
    if summary is not None:
        lines.append(f"- `quick` verdicts and replicates marked *published*: "
                     f"`published/robustness-quick.json`, {published.origin_line(summary)}.")
    if numbers_paper is not None:
        lines.append(f"- `paper` verdicts marked *published*: `published/numbers-paper.json`, "
                     f"{published.origin_line(numbers_paper)}.")
    return lines


def collect(notebooks: Mapping[str, Path], fallback: Fallback | None = None
            ) -> tuple[dict[str, ChapterEvidence], list[str]]:
    """Every chapter's evidence, anchoring the rows of its staged notebook (``notebooks``:
    figure → staged notebook, as :func:`i2o.book.html_build.stage` writes them), and the provenance
    lines of the published files read."""
    sources = quick_sources(fallback)
    numbers_paper = published.read("numbers", PAPER)
    paper_states = published.statuses(numbers_paper, PAPER) if numbers_paper else {}
    chapters, read_published = {}, None
    for figure in profiles.figures():
        path = Path(notebooks[figure])
        build = build_run(figure, site.stamp_of(path))
        anchored = anchor_notebook(path, build.rows) if build and path.exists() else frozenset()
        source = next((s for s in sources if s.has(figure)), None)
        if source is not None and source.origin == PUBLISHED:
            read_published = source.summary
        chapters[figure] = evidence(
            figure, build, source.summary if source else None, source.origin if source else "",
            source.states.get(figure, "") if source else "", numbers_paper,
            paper_states.get(figure, ""), anchored)
    return chapters, provenance_lines(read_published, numbers_paper)
