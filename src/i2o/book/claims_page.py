"""The page "The paper's claims at a glance" (``book/claims.md``), written when the book is staged.

One table row per claim of the paper (:func:`registry`: each chapter's ``paper_claims.CLAIMS``,
merged in the book's order), and per claim the book adds, spanning the chapter rows that test
it; for each chapter row:

- its verdict at profile ``quick``: from this build's executed chapter (``_build/claims/
  <figure>.json``) when the build ran it at ``quick``; otherwise replicate 0 of the robustness
  summary at ``quick`` (this build's own ``make robustness``, else ``published/robustness-quick
  .json``), marked with where it comes from and, when published, whether it is current or stale
  (:func:`i2o.book.published.status`);
- whether it is the same at every replicate: the summary's ``agreement``
  (:func:`i2o.provenance.replicate_summary.agreement`);
- its verdict at profile ``paper``: from this build when it ran the chapter at ``paper``, else
  from ``published/numbers-paper.json``, marked so; "not run at paper scale" otherwise;
- the commands that reproduce it (``make fig-<chapter>``, ``PROFILE=paper``) with the time this
  build's notebook took at that profile (its stamp, as the Reproduce page's timings), else "not
  measured";
- a link to the row in its chapter: :func:`i2o.book.claim_anchors.anchor_notebook` gives each
  row of a staged chapter's claims table the id :func:`i2o.book.claim_anchors.anchor` (the table
  itself, :meth:`i2o.verdicts.claims.Claims.to_html`, has none); a row that is not on the
  chapter's page links the page.

Chapter rows that no claim of the registry tests are listed at the end (none should be:
``tests/test_paper_claims.py``), so that no row is left off the page unseen. With no chapter
executed, every verdict comes from ``published/``, each marked so.
"""

from __future__ import annotations

import html
import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from i2o.book import site
from i2o.book.claims_evidence import (
    PAPER,
    QUICK,
    Agreement,
    ChapterEvidence,
    Fallback,
    Verdict,
    collect,
)
from i2o.compute import door, plan, profiles
from i2o.verdicts import paper_claims
from i2o.verdicts.paper_claims import PaperClaim, Reading

PAGE = "book/claims.md"
#: The Reproduce page, whose table of chapter costs (between :data:`COSTS_START` and
#: :data:`COSTS_END`) this page's costs fill.
REPRODUCE_PAGE = "book/reproduce.md"
COSTS_START, COSTS_END = "<!-- i2o:chapter-costs:start -->", "<!-- i2o:chapter-costs:end -->"
START, END = "<!-- i2o:claims:start -->", "<!-- i2o:claims:end -->"
_COLOURS = {"holds": "#1a7f37", "fails": "#cf222e", "undecided": "#9a6700"}
_GLOB = re.compile(r"[*?\[]")
_TOP = "vertical-align:top"  # a cell spanning rows starts beside the first of them
_GROUP = "border-top:2px solid #8c959f"


def _declared(figure: str) -> ModuleType | None:
    """The chapter's ``paper_claims`` module (the manifest's ``package``), ``None`` when it
    declares none (its rows are then listed as rows of no claim)."""
    name = f"{profiles.entry(figure)['package']}.paper_claims"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name != name:
            raise
        return None


def registry() -> tuple[PaperClaim, ...]:
    """Every chapter's claims (``paper_claims.CLAIMS``), merged in the book's order
    (:func:`i2o.verdicts.paper_claims.merged`)."""
    found = (_declared(figure) for figure in profiles.figures())
    return paper_claims.merged(module.CLAIMS for module in found if module is not None)


def readings() -> dict[str, Reading]:
    """Every chapter's readings (``paper_claims.READINGS``) and the shared claims' readings."""
    found = (_declared(figure) for figure in profiles.figures())
    return paper_claims.merged_readings(
        [paper_claims.SHARED_READINGS, *(m.READINGS for m in found if m is not None)])


def _e(text: str) -> str:
    return html.escape(text, quote=True)


#: the longest one-line reason shown beside an undecided or failed verdict (the whole check is
#: in the cell's tooltip and in the chapter's claims table)
REASON_CHARACTERS = 160


def one_line_reason(check: str, limit: int = REASON_CHARACTERS) -> str:
    """The reason a reader sees beside a verdict that did not hold: the check's last clause
    (the predicate's own, after the open gates' reasons) or, when a gate closed the row, its
    first; cut at ``limit`` characters on a word."""
    parts = [part.strip() for part in check.split("; ") if part.strip()]
    if not parts:
        return ""
    closed = next((p for p in parts if p.startswith(("too ", "cannot ", "no ", "model does not",
                                                     "solver guard", "does not generalise",
                                                     "training diverged"))), None)
    text = closed or parts[-1]
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def _verdict_cell(found: Verdict | None, missing: str) -> str:
    if found is None:
        return f"<td><small>{_e(missing)}</small></td>"
    colour = _COLOURS.get(found.verdict, "inherit")
    where = found.origin + (f", {found.state}" if found.state else "")
    why = one_line_reason(found.check) if found.verdict in ("undecided", "fails") else ""
    said = f"<br><small><em>{_e(why)}</em></small>" if why else ""
    return (f"<td title=\"{_e(found.tip())}\"><span style=\"color:{colour};font-weight:bold\">"
            f"{_e(found.verdict)}</span><br><small>{_e(where)}</small>{said}</td>")


def tally(registry: Sequence[PaperClaim], chapters: Mapping[str, ChapterEvidence]) -> str:
    """One line: how many chapter rows hold, fail and are undecided at ``quick``, for the
    paper's claims and for the book's own, counted over the rows this page shows."""
    counts: dict[bool, dict[str, int]] = {False: {}, True: {}}
    for claim in registry:
        for line in lines_of(claim, chapters):
            found = (chapters.get(line.chapter) or ChapterEvidence(line.chapter)).quick.get(
                line.row_id or "")
            if found is not None:
                mine = counts[claim.book_own]
                mine[found.verdict] = mine.get(found.verdict, 0) + 1

    def said(found: dict[str, int]) -> str:
        return ", ".join(f"{found.get(v, 0)} {v}" for v in ("holds", "fails", "undecided"))

    return (f"**At profile quick, replicate 0:** the rows testing the papers' claims: "
            f"{said(counts[False])}; the book's own rows (gates, checks, stricter questions): "
            f"{said(counts[True])}.")


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
    if profile in found.costs:
        return found.costs[profile]
    seconds = found.seconds.get(profile)
    return f"{duration(seconds)}, this build" if seconds is not None else "not measured"


def empty_cache_costs(chapters: Mapping[str, ChapterEvidence], cores: int = 2) -> str:
    """Each chapter's cost from an empty cache at quick and paper, alone on ``cores`` cores, into
    its :attr:`ChapterEvidence.costs` (:func:`i2o.compute.plan.cost_of`: the recorded or
    published cost of each of its jobs, then its notebook); a chapter that cannot be planned
    keeps this build's notebook time. Returns the line of the whole book's at quick."""
    plans = []
    for figure, found in chapters.items():
        for profile in (QUICK, PAPER):
            try:
                planned = plan.plan_chapter(door.enter(figure, profile), profile)
            except Exception:  # a chapter that cannot be entered here: its notebook time
                continue
            found.costs[profile] = plan.cost_of([planned], profile, cores).text()
            if profile == QUICK:
                plans.append(planned)
    if not plans:
        return ""
    return (f"The whole book at `{QUICK}` (`make book`): "
            f"{plan.cost_of(plans, QUICK, cores).text()}; the Reproduce page gives the measured "
            f"times.")


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


def readings_table(claims: Sequence[PaperClaim] | None = None) -> str:
    """"How the book reads each claim": one row per claim with a written reading
    (:func:`readings`), in the order of ``claims`` (default: :func:`registry`)."""
    rows = ["<table class='i2o-claims-page'><thead><tr><th>Sentence (where)</th>"
            "<th>Reading</th><th>Statistic</th><th>Guards</th><th>Decided by (fixed in)</th>"
            "</tr></thead><tbody>"]
    written = readings()
    for claim in registry() if claims is None else claims:
        found = written.get(claim.id)
        if found is None:
            continue
        said = claim.quote or claim.statement
        rows.append(f"<tr><td>“{_e(said)}” <small>({_e(claim.where)})</small></td>"
                    f"<td>{_e(found.asserts)}</td><td><small>{_e(found.statistic)}</small></td>"
                    f"<td><small>{_e(found.guards)}</small></td><td><small><code>"
                    f"{_e(found.decided_by)}</code> ({_e(found.fixed_in)})</small></td></tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


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
         claims: Sequence[PaperClaim] | None = None,
         provenance: Sequence[str] = (), whole_book: str = "") -> str:
    """The generated part of the page (MyST Markdown with raw HTML tables). ``claims``: the
    registry (default: :func:`registry`); ``provenance``: a
    line per published file the verdicts were read from (:func:`provenance_lines`);
    ``whole_book``: the line of the whole book's cost (:func:`empty_cache_costs`)."""
    registered = registry() if claims is None else claims
    lines = [tally(registered, chapters), "", *([whole_book, ""] if whole_book else []),
             "## Where the verdicts come from", "",
             *sources(chapters), *provenance, "",
             "A verdict marked *this build* was computed by this build's executed chapter, "
             "*this build's replicates* by its `make robustness`; one marked *published* was "
             "measured elsewhere and kept in `published/` (the lines above; the Reproduce page "
             "lists their machines), and *current* or *stale* says whether this checkout would "
             "compute the same results and turn them into verdicts with the same code. r0, r1, "
             "… are replicates; r0 is the book's own draw. Costs are forecasts from an empty "
             "results cache on 2 cores, from the cost recorded for each of the chapter's jobs "
             "(by this build's cache, else in `published/job-costs.json`), then its notebook; "
             "the Reproduce page gives the whole book's measured times. Hover over a verdict "
             "for its measured value; an undecided or failed verdict says why beneath it.", ""]
    for title, chosen in SECTIONS:
        picked = [claim for claim in registered if chosen(claim)]
        if picked:
            lines += [f"## {title}", "", "```{raw} html", table(picked, chapters), "```", ""]
    left = [f"- `{figure}`: `{row_id}` — {chapters[figure].texts[row_id]}"
            for figure, row_id in unregistered(chapters, registered)]
    left += [f"- `{figure}` (a row without an id): {text}"
             for figure, found in chapters.items() for text in found.unnamed]
    lines += ["## How the book reads each claim", "",
              "Each reading states what the sentence asserts, no more and no less (principles: "
              "a direction is tested as a direction, \"no benefit\" as one-sided equivalence, a "
              "gate closes a row only where it bears on validity, the regime is the paper's, "
              "fixed before it decides). The commit is the one that fixed the reading; "
              "`git log` shows it predates the verdicts computed after it.", "",
              "```{raw} html", readings_table(registered), "```", ""]
    lines += ["## Rows of no claim above", ""]
    lines += left or ["None: every claim row of the chapters is tested by a claim above "
                      "(`i2o.verdicts.paper_claims`)."]
    lines.append("")
    return "\n".join(lines)


def write(staged: Path, notebooks: Mapping[str, Path], fallback: Fallback | None = None
          ) -> Path:
    """Fill the staged ``book/claims.md`` between its markers (:data:`START`, :data:`END`)."""
    page = staged / PAGE
    chapters, provenance = collect(notebooks, fallback)
    whole_book = empty_cache_costs(chapters)
    if not site.fill_between(page, START, END, body(chapters, provenance=provenance,
                                                    whole_book=whole_book)):
        raise ValueError(f"{page} lacks the markers {START} … {END}")
    reproduce = staged / REPRODUCE_PAGE
    if reproduce.exists():
        site.fill_between(reproduce, COSTS_START, COSTS_END, costs_table(chapters, whole_book))
    return page


def costs_table(chapters: Mapping[str, ChapterEvidence], whole_book: str = "") -> str:
    """The Reproduce page's table of each chapter's cost from an empty cache (the claims page's
    Reproduce column, :func:`empty_cache_costs`), and the whole book's line."""
    lines = ["| chapter | `quick` | `paper` |", "|---|---|---|"]
    for figure, found in chapters.items():
        lines.append(f"| `{figure}` | {_cost(found, QUICK)} | {_cost(found, PAPER)} |")
    return "\n".join([*lines, "", whole_book] if whole_book else lines)
