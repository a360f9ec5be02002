"""The page "The paper's claims at a glance" (``book/claims.md``), written when the book is staged.

One table row per claim of the paper (:data:`i2o.verdicts.paper_claims.CLAIMS`), and per claim the
book adds, spanning the chapter rows that test it; for each chapter row:

- its verdict at profile ``quick``: from this build's executed chapter (``_build/claims/
  <figure>.json``) when the build ran it at ``quick``; otherwise replicate 0 of the robustness
  summary at ``quick`` (this build's own ``make robustness``, else ``published/robustness-quick
  .json``), marked with where it comes from and, when published, whether it is current or stale
  (:func:`i2o.book.published.status`);
- whether it is the same at every replicate: the summary's ``agreement``
  (:func:`i2o.provenance.robustness.agreement`);
- its verdict at profile ``paper``: from this build when it ran the chapter at ``paper``, else
  from ``published/numbers-paper.json``, marked so; "not run at paper scale" otherwise;
- the commands that reproduce it (``make fig-<chapter>``, ``PROFILE=paper``) with the time this
  build's notebook took at that profile (its stamp, as the Reproduce page's timings), else "not
  measured";
- a link to the row in its chapter: :func:`anchor_notebook` gives each row of a staged chapter's
  claims table the id :func:`anchor` (the table itself, :meth:`i2o.verdicts.claims.Claims.to_html`,
  has none); a row that is not on the chapter's page links the page.

Chapter rows that no claim of the registry tests are listed at the end (none should be:
``tests/test_paper_claims.py``), so that no row is left off the page unseen. With no chapter
executed, every verdict comes from ``published/``, each marked so.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from i2o.book import published, site
from i2o.compute import profiles
from i2o.provenance import robustness
from i2o.verdicts import claims, paper_claims
from i2o.verdicts.paper_claims import PaperClaim

PAGE = "book/claims.md"
START, END = "<!-- i2o:claims:start -->", "<!-- i2o:claims:end -->"
QUICK, PAPER = "quick", "paper"
THIS_BUILD = "this build"
PUBLISHED = "published"
OWN_REPLICATES = "this build's replicates"
_COLOURS = {"holds": "#1a7f37", "fails": "#cf222e", "undecided": "#9a6700"}
_GLOB = re.compile(r"[*?\[]")
_TOP = "vertical-align:top"  # a cell spanning rows starts beside the first of them
_GROUP = "border-top:2px solid #8c959f"


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
    """A row's status across replicates (:data:`i2o.provenance.robustness.STATUSES`) and its
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


# -- the anchors of the chapters' claim rows -------------------------------------------------------

def anchor(row_id: str) -> str:
    """The HTML id of claim row ``row_id`` on its chapter's page (ids are unique per chapter)."""
    return "claim-" + quote(row_id, safe="/_.-~")


def anchor_html(text: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, set[str]]:
    """``text`` (a claims table, :meth:`i2o.verdicts.claims.Claims.to_html`) with an ``id`` on the
    ``<tr>`` of each row of ``rows`` that has an id, matched by its escaped claim text in order;
    return it and the ids placed."""
    waiting: dict[str, list[str]] = {}
    for row in rows:
        if row.get("id"):
            waiting.setdefault(html.escape(row["claim"]), []).append(row["id"])
    placed: set[str] = set()

    def place(match: re.Match[str]) -> str:
        ids = waiting.get(match.group(1))
        if not ids:
            return match.group(0)
        row_id = ids.pop(0)
        placed.add(row_id)
        return f'<tr id="{html.escape(anchor(row_id), quote=True)}"><td>{match.group(1)}</td>'

    return re.sub(r"<tr><td>(.*?)</td>", place, text, flags=re.S), placed


def anchor_notebook(path: Path, rows: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """Anchor the rows of the claims tables in the staged notebook ``path`` (rewritten in place
    when a row was anchored); return the ids anchored."""
    notebook = json.loads(path.read_text())
    placed: set[str] = set()
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            text = data.get("text/html")
            if text is None:
                continue
            joined = "".join(text) if isinstance(text, list) else text
            if "i2o-claims" not in joined:
                continue
            anchored, ids = anchor_html(joined, rows)
            if ids:
                data["text/html"] = anchored.splitlines(keepends=True)
                placed |= ids
    if placed:
        path.write_text(json.dumps(notebook, indent=1))
    return frozenset(placed)


# -- what each chapter says, from this build and from published/ ---------------------------------

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
    return {row["id"]: Verdict(robustness.verdict(row), str(row.get("value", "")), origin, state,
                               str(row.get("check", "")))
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


# -- the page ----------------------------------------------------------------------------------

def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _verdict_cell(found: Verdict | None, missing: str) -> str:
    if found is None:
        return f"<td><small>{_e(missing)}</small></td>"
    colour = _COLOURS.get(found.verdict, "inherit")
    where = found.origin + (f", {found.state}" if found.state else "")
    return (f"<td title=\"{_e(found.tip())}\"><span style=\"color:{colour};font-weight:bold\">"
            f"{_e(found.verdict)}</span><br><small>{_e(where)}</small></td>")


def _agreement_cell(found: Agreement | None) -> str:
    if found is None:
        return "<td><small>no replicates computed</small></td>"
    where = (", ".join(f"r{r}" for r in found.replicates) + f" · {found.origin}"
             + (f", {found.state}" if found.state else ""))
    return f"<td>{_e(found.status)}<br><small>{_e(where)}</small></td>"


def duration(seconds: float) -> str:
    """``8.7 min`` or ``42.0 s`` or ``1.5 h``."""
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.1f} s"


def _cost(found: ChapterEvidence, profile: str) -> str:
    seconds = found.seconds.get(profile)
    return f"{duration(seconds)}, this build" if seconds is not None else "not measured"


def _reproduce_cell(found: ChapterEvidence, span: int) -> str:
    name = found.figure
    return (f"<td rowspan=\"{span}\" style=\"{_TOP}\"><code>make fig-{_e(name)}</code><br><small>"
            f"{_e(_cost(found, QUICK))}</small><br><code>make fig-{_e(name)} PROFILE=paper</code>"
            f"<br><small>{_e(_cost(found, PAPER))}</small></td>")


@dataclass(frozen=True)
class Line:
    """One chapter row under a claim (``row_id`` ``None``: a pattern no row matches)."""

    chapter: str
    row_id: str | None
    pattern: str = ""


def lines_of(claim: PaperClaim, chapters: Mapping[str, ChapterEvidence]) -> list[Line]:
    """The chapter rows ``claim`` is tested by, pattern by pattern (in each chapter's order);
    a pattern no known row matches gives one line saying so."""
    out: list[Line] = []
    for pattern in claim.rows:
        found = chapters.get(pattern.chapter)
        ids = [i for i in (found.texts if found else {}) if pattern.matches(pattern.chapter, i)]
        out += [Line(pattern.chapter, i) for i in ids if Line(pattern.chapter, i) not in out]
        if not ids:
            out.append(Line(pattern.chapter, None, pattern.pattern))
    return out


def _claim_cell(claim: PaperClaim, span: int) -> str:
    parts = []
    if claim.book_own:
        kind = "book's own: regime or sanity check" if claim.regime else "book's own"
        parts.append(f"<strong>{kind}</strong>: {_e(claim.statement)}")
        if claim.quote:
            parts.append(f"<small>extends the paper's “{_e(claim.quote)}” ({_e(claim.where)})"
                         "</small>")
    else:
        parts.append(f"“{_e(claim.quote)}”<br><small>{_e(claim.where)}</small>")
    return f"<td rowspan=\"{span}\" style=\"{_TOP}\">{'<br>'.join(parts)}</td>"


def _missing_row(pattern: str) -> str:
    """What a line says when no known row matches the glob or id ``pattern``."""
    text = pattern
    kind = "no row matching" if _GLOB.search(text) else "no row"
    return f"{kind} <code>{_e(text)}</code> in this build or the published summaries"


def claim_rows(claim: PaperClaim, chapters: Mapping[str, ChapterEvidence]) -> list[str]:
    """The HTML ``<tr>`` s of one claim: the claim spans its lines, the commands span each run
    of lines of one chapter."""
    lines = lines_of(claim, chapters)
    out: list[str] = []
    for k, line in enumerate(lines):
        found = chapters.get(line.chapter) or ChapterEvidence(line.chapter)
        cells = [_claim_cell(claim, len(lines))] if k == 0 else []
        if line.row_id is None:
            cells.append(f"<td>{_missing_row(line.pattern)} <small>({_e(line.chapter)})</small>"
                         "</td><td></td><td></td><td></td>")
        else:
            text = found.texts.get(line.row_id, line.row_id)
            cells.append(f"<td><a href=\"{_e(found.link(line.row_id))}\">{_e(text)}</a> "
                         f"<small>({_e(line.chapter)})</small></td>")
            cells.append(_verdict_cell(found.quick.get(line.row_id), "no verdict at quick"))
            cells.append(_agreement_cell(found.agreement.get(line.row_id)))
            cells.append(_verdict_cell(found.paper.get(line.row_id),
                                       "no such row at paper" if found.paper_run
                                       else "not run at paper scale"))
        if k == 0 or lines[k - 1].chapter != line.chapter:
            span = 1
            while k + span < len(lines) and lines[k + span].chapter == line.chapter:
                span += 1
            cells.append(_reproduce_cell(found, span))
        start = f" style=\"{_GROUP}\"" if k == 0 else ""  # a line between two claims
        out.append(f"<tr{start}>" + "".join(cells) + "</tr>")
    return out


HEADER = ("<thead><tr><th>Claim</th><th>Tested by (the row in its chapter)</th>"
          "<th>quick</th><th>Same at every replicate?</th><th>paper</th>"
          "<th>Reproduce (cost)</th></tr></thead>")


def table(registry: Sequence[PaperClaim], chapters: Mapping[str, ChapterEvidence]) -> str:
    body = [row for claim in registry for row in claim_rows(claim, chapters)]
    return "\n".join(["<table class='i2o-claims-page'>", HEADER, "<tbody>", *body,
                      "</tbody></table>"])


SECTIONS = (
    ("The paper's claims", lambda c: not c.book_own and c.source == paper_claims.PAPER),
    ("The companion paper's claims (chapter `separation`)",
     lambda c: not c.book_own and c.source == paper_claims.COMPANION),
    ("Claims the book adds", lambda c: c.book_own and not c.regime),
    ("The book's regime gates and sanity checks", lambda c: c.regime),
)


def unregistered(chapters: Mapping[str, ChapterEvidence],
                 registry: Sequence[PaperClaim]) -> list[tuple[str, str]]:
    """Every ``(chapter, row id)`` shown by a source that no claim of ``registry`` tests."""
    return paper_claims.unmapped(((f, i) for f, c in chapters.items() for i in c.texts),
                                 registry)


def sources(chapters: Mapping[str, ChapterEvidence]) -> list[str]:
    """One line per chapter: what this build ran, for the reader to weigh the verdicts."""
    lines = []
    for figure, found in chapters.items():
        ran = ", ".join(f"{p} ({duration(s)})" for p, s in found.seconds.items())
        said = f"executed in this build at {ran}" if ran else "not executed in this build"
        lines.append(f"- `{figure}`: {said}" + (f"; {found.note}" if found.note else "") + ".")
    return lines


def body(chapters: Mapping[str, ChapterEvidence],
         registry: Sequence[PaperClaim] = paper_claims.CLAIMS,
         provenance: Sequence[str] = ()) -> str:
    """The generated part of the page (MyST Markdown with raw HTML tables). ``provenance``: a
    line per published file the verdicts were read from (:func:`provenance_lines`)."""
    lines = ["## Where the verdicts come from", "", *sources(chapters), *provenance, "",
             "A verdict marked *this build* was computed by this build's executed chapter, "
             "*this build's replicates* by its `make robustness`; one marked *published* was "
             "measured elsewhere and kept in `published/` (the lines above; the Reproduce page "
             "lists their machines), and *current* or *stale* says whether this checkout would "
             "compute the same results and turn them into verdicts with the same code. r0, r1, "
             "… are replicates; r0 is the book's own draw. Costs are this build's notebook "
             "times (seconds when its results were cached; the Reproduce page gives times "
             "measured from an empty results cache). Hover over a verdict for its measured "
             "value.", ""]
    for title, chosen in SECTIONS:
        picked = [claim for claim in registry if chosen(claim)]
        if picked:
            lines += [f"## {title}", "", "```{raw} html", table(picked, chapters), "```", ""]
    left = [f"- `{figure}`: `{row_id}` — {chapters[figure].texts[row_id]}"
            for figure, row_id in unregistered(chapters, registry)]
    left += [f"- `{figure}` (a row without an id): {text}"
             for figure, found in chapters.items() for text in found.unnamed]
    lines += ["## Rows of no claim above", ""]
    lines += left or ["None: every claim row of the chapters is tested by a claim above "
                      "(`i2o.verdicts.paper_claims`)."]
    lines.append("")
    return "\n".join(lines)


# -- staging ---------------------------------------------------------------------------------

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
    own = robustness.read_summary()
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


def write(staged: Path, notebooks: Mapping[str, Path], fallback: Fallback | None = None
          ) -> Path:
    """Fill the staged ``book/claims.md`` between its markers (:data:`START`, :data:`END`)."""
    page = staged / PAGE
    chapters, provenance = collect(notebooks, fallback)
    if not site.fill_between(page, START, END, body(chapters, provenance=provenance)):
        raise ValueError(f"{page} lacks the markers {START} … {END}")
    return page

