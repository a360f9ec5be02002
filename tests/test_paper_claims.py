"""The page "The paper's claims at a glance": its registry (every quote the paper's own words,
every published claim row mapped) and its generation (verdicts, book-own marks, links, fallback
to the published summaries, anchors on the chapters' claim rows)."""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict

import pytest
import yaml

from i2o.base import locations
from i2o.book import claim_anchors, claims_evidence, claims_page, published
from i2o.book.claims_evidence import BuildRun, ChapterEvidence
from i2o.compute import profiles
from i2o.verdicts import paper_claims
from i2o.verdicts.claims import Claims
from i2o.verdicts.paper_claims import PaperClaim, Reading, rows

CLAIMS = claims_page.registry()
REPO = locations.repo_root()
PAPERS = REPO.parent / "shared" / "papers"
#: rows of the registry not yet in a published summary (a row announced before its run publishes)
PENDING: set[tuple[str, str]] = {(chapter, pattern) for chapter in ("stability", "deq_gaps")
                                  for pattern in ("*_tenfold", "*_near", "*_reference")} | {
    # issue 61: rows announced before their run publishes
    ("meta", "figure4/size-ordering"), ("deq_gaps", "*_generalises")}


def _normalized(text: str) -> str:
    """Markdown links as their label, emphasis marks dropped, whitespace collapsed."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("*", "")
    return " ".join(text.split())


def _published_rows() -> set[tuple[str, str | None]]:
    found: set[tuple[str, str | None]] = set()
    quick = published.read("robustness", "quick")
    paper = published.read("numbers", "paper")
    assert quick is not None and paper is not None, "published/ lacks its summaries"
    for chapter, table in quick["chapters"].items():
        found |= {(chapter, row.get("id")) for row in table["claims"]}
    for chapter, table in paper["chapters"].items():
        found |= {(chapter, row.get("id")) for row in table["claims"]}
    return found


# -- the registry ------------------------------------------------------------------------------

@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_quote_is_the_papers_own_words(claim):
    source = PAPERS / f"{claim.source}.md"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    text = _normalized(source.read_text())
    for fragment in claim.fragments():
        assert _normalized(fragment) in text, f"{claim.id}: not in {source.name}: {fragment!r}"


def test_every_published_row_is_tested_by_exactly_one_claim():
    """A new row of a chapter fails here until the registry maps it (to a claim of the paper
    or to one of the book's own), so it cannot be left off the page unseen."""
    found = _published_rows()
    assert all(row_id for _, row_id in found), "a published row has no id"
    for chapter, row_id in sorted(found):
        testing = [c.id for c in CLAIMS if c.tests(chapter, row_id)]
        assert len(testing) == 1, f"{chapter} {row_id!r}: tested by {testing or 'no claim'}"


def test_every_pattern_matches_a_published_row():
    """No pattern is a typo: each matches a published row, or is a row announced as coming."""
    found = _published_rows()
    idle = {(p.chapter, p.pattern) for claim in CLAIMS for p in claim.rows
            if not any(p.matches(chapter, row_id) for chapter, row_id in found)}
    assert idle <= PENDING, idle - PENDING


def test_the_registry_is_well_formed():
    assert len({c.id for c in CLAIMS}) == len(CLAIMS)
    for claim in CLAIMS:
        assert claim.rows, claim.id
        assert claim.book_own or (claim.quote and claim.where), claim.id
        assert not claim.book_own or claim.statement, claim.id
        assert not claim.regime or claim.book_own, claim.id
        assert claim.source in (paper_claims.PAPER, paper_claims.COMPANION)
    own = {c.id for c in CLAIMS if c.book_own}
    for chapter, row_id in [("stability", "equally_stable"), ("deq_gaps", "overparam"),
                            ("meta", "noise/usable-meta-gradient"),
                            ("deq_gaps", "deq_residual"), ("stability", "fit")]:
        claim = paper_claims.claim_of(chapter, row_id, CLAIMS)
        assert claim is not None and claim.id in own, (chapter, row_id)


def test_each_chapter_declares_only_its_own_rows_and_reads_only_claims_it_tests():
    import importlib

    for figure in profiles.figures():
        declared = importlib.import_module(f"{profiles.entry(figure)['package']}.paper_claims")
        assert {p.chapter for claim in declared.CLAIMS for p in claim.rows} == {figure}, figure
        shared = set(paper_claims.SHARED_READINGS)
        assert set(declared.READINGS) <= {c.id for c in declared.CLAIMS} - shared, figure


def test_the_merge_joins_a_shared_claims_rows_and_refuses_two_wordings_or_two_readings():
    shared = paper_claims.FEWER_HURT
    one = (shared.on(rows("stability", "a")), PaperClaim("x", "q", "w", rows("stability", "x")))
    two = (shared.on(rows("deq_gaps", "b")),)
    joined = paper_claims.merged([one, two])
    assert [c.id for c in joined] == [shared.id, "x"]
    assert joined[0].tests("stability", "a") and joined[0].tests("deq_gaps", "b")
    reworded = (PaperClaim(shared.id, "other words", shared.where, rows("meta", "c")),)
    with pytest.raises(ValueError, match="declared twice with different words"):
        paper_claims.merged([one, reworded])
    reading = Reading("a", "s", "g", "f", "abc1234")
    assert paper_claims.merged_readings([{"x": reading}, {"x": reading}]) == {"x": reading}
    with pytest.raises(ValueError, match="two readings"):
        paper_claims.merged_readings([{"x": reading}, {"x": Reading("b", "s", "g", "f", "a")}])


def test_unmapped_names_the_rows_no_claim_tests():
    registry = (PaperClaim("a", "q", "w", rows("meta", "figure3/*")),)
    found = [("meta", "figure3/x/more-steps"), ("meta", "figure4/fit"), ("affine", "figure3/x")]
    assert paper_claims.unmapped(found, registry) == [("meta", "figure4/fit"),
                                                       ("affine", "figure3/x")]


# -- the page from a fake set of rows ---------------------------------------------------------

REGISTRY = (
    PaperClaim("fewer", "using fewer iterations", "Section 4",
               rows("stability", "ift_fewer_hurt", "unrolled_fewer_hurt")),
    PaperClaim("equal", "no gain of stability", "Section 5", rows("stability", "equally_stable"),
               book_own=True, statement="IFT and unrolled are equally stable"),
    PaperClaim("fig4", "the better the model", "Section 4, Figure 4", rows("meta", "figure4/*")),
)


def _row(row_id: str, holds: bool | None, profile: str = "quick") -> dict:
    return {"claim": f"claim {row_id}", "holds": holds, "value": f"value {row_id}",
            "check": "", "profile": profile, "id": row_id}


def _summary(verdicts: dict[str, list[str]]) -> dict:
    """A robustness summary of stability: each row's verdict at replicates 0, 1, …"""
    from i2o.provenance.replicate_summary import agreement

    claims = [{"claim": f"claim {i}", "id": i, "section": "",
               "replicates": {str(r): {"verdict": v, "value": f"r{r} {i}", "check": ""}
                              for r, v in enumerate(vs)},
               "agreement": agreement(vs)} for i, vs in verdicts.items()]
    return {"profile": "quick", "replicates": [0, 1, 2],
            "chapters": {"stability": {"claims": claims}}}


SUMMARY = _summary({"ift_fewer_hurt": ["holds"] * 3,
                    "unrolled_fewer_hurt": ["undecided", "holds", "holds"],
                    "equally_stable": ["fails"] * 3})
BUILD = BuildRun("quick", 125.0, (_row("ift_fewer_hurt", True), _row("unrolled_fewer_hurt", None),
                                  _row("equally_stable", False)))


def _page(chapters: dict[str, ChapterEvidence]) -> str:
    return claims_page.body(chapters, REGISTRY)


def _tr(page: str, text: str) -> str:
    return next(line for line in page.splitlines() if text in line and line.startswith("<tr"))


def test_the_page_shows_this_builds_verdicts_marks_the_books_own_and_links_the_rows():
    found = claims_evidence.evidence("stability", BUILD, SUMMARY, claims_evidence.PUBLISHED,
                                     "current", None, "", frozenset({"ift_fewer_hurt"}))
    page = _page({"stability": found})
    ift = _tr(page, "claim ift_fewer_hurt")
    assert "“using fewer iterations”" in ift and 'rowspan="2"' in ift
    assert 'href="stability.html#claim-ift_fewer_hurt"' in ift  # anchored on its page
    assert ">holds</span><br><small>this build</small>" in ift
    assert "same verdict<br><small>r0, r1, r2 · published, current</small>" in ift
    assert "not run at paper scale" in ift
    assert "<code>make fig-stability</code><br><small>2.1 min, this build</small>" in ift
    assert "<code>make fig-stability PROFILE=paper</code><br><small>not measured</small>" in ift
    unrolled = _tr(page, "claim unrolled_fewer_hurt")
    assert 'href="stability.html"' in unrolled  # not anchored: the chapter's page
    assert ">undecided</span>" in unrolled and "flips" in unrolled
    assert "make fig-stability" not in unrolled  # the command spans the chapter's rows
    equal = _tr(page, "claim equally_stable")
    assert "<strong>book's own</strong>: IFT and unrolled are equally stable" in equal
    assert ">fails</span>" in equal and "#cf222e" in equal
    assert "book's own" not in ift
    missing = _tr(page, "the better the model")
    assert "no row matching <code>figure4/*</code>" in missing
    assert "None: every claim row" in page


def test_without_a_build_the_verdicts_come_from_the_published_summaries():
    paper = {"chapters": {"stability": {"claims": [_row("ift_fewer_hurt", False, "paper")]}}}
    found = claims_evidence.evidence("stability", None, SUMMARY, claims_evidence.PUBLISHED,
                                     "stale: claims", paper, "current")
    page = _page({"stability": found})
    unrolled = _tr(page, "claim unrolled_fewer_hurt")
    assert ">undecided</span><br><small>published, r0, stale: claims</small>" in unrolled
    assert "no such row at paper" in unrolled
    ift = _tr(page, "claim ift_fewer_hurt")
    assert ">fails</span><br><small>published, current</small>" in ift  # the paper column
    assert 'title="value ift_fewer_hurt"' in ift
    assert "<small>not measured</small>" in ift
    assert "- `stability`: not executed in this build." in page


def test_a_chapter_built_at_paper_fills_the_paper_column_and_quick_stays_published():
    build = BuildRun("paper", 7200.0, (_row("ift_fewer_hurt", True, "paper"),))
    found = claims_evidence.evidence("stability", build, SUMMARY, claims_evidence.PUBLISHED,
                                     "current", None, "")
    ift = _tr(_page({"stability": found}), "claim ift_fewer_hurt")
    assert ">holds</span><br><small>published, r0, current</small>" in ift
    assert ">holds</span><br><small>this build</small>" in ift
    assert "PROFILE=paper</code><br><small>2.0 h, this build</small>" in ift


def test_nothing_known_and_rows_of_no_claim_are_said():
    page = _page({"stability": ChapterEvidence("stability", texts={"memory": "claim memory"})})
    assert "no row <code>ift_fewer_hurt</code>" in page
    assert "- `stability`: `memory` — claim memory" in page
    found = claims_evidence.evidence("stability", None, None, "", "", None, "")
    assert "no verdict" not in _page({"stability": found})  # no line for rows nobody has


# -- anchors, the build's rows, the staged page -----------------------------------------------

def _table() -> Claims:
    table = Claims("stability", "quick")
    table.add("A < B & \"quoted\" 'too'", True, "1", id="first")
    table.add("same text", None, "2", id="second")
    table.add("same text", False, "3", id="figure3/x/more-steps")
    table.add("a row without an id", True, "4")
    return table


def test_anchor_html_gives_each_named_row_of_a_claims_table_its_id():
    table = _table()
    text, placed = claim_anchors.anchor_html(table.to_html(), [asdict(r) for r in table.rows])
    assert placed == {"first", "second", "figure3/x/more-steps"}
    assert text.count("<tr id=") == 3
    order = re.findall(r'<tr id="([^"]+)">', text)
    assert order == ["claim-first", "claim-second", "claim-figure3/x/more-steps"]
    assert claim_anchors.anchor("figure3/x/more-steps") == "claim-figure3/x/more-steps"


def test_anchor_notebook_rewrites_the_staged_notebook(tmp_path):
    table = _table()
    notebook = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data",
         "data": {"text/html": table.to_html().splitlines(keepends=True)}}]}],
        "metadata": {}}
    path = tmp_path / "stability.ipynb"
    path.write_text(json.dumps(notebook))
    ids = claim_anchors.anchor_notebook(path, [asdict(r) for r in table.rows])
    assert ids == {"first", "second", "figure3/x/more-steps"}
    html = "".join(json.loads(path.read_text())["cells"][0]["outputs"][0]["data"]["text/html"])
    assert '<tr id="claim-second">' in html


def test_build_run_reads_the_builds_rows_of_the_stamps_profile():
    folder = locations.build_dir() / "claims"
    folder.mkdir(parents=True)
    (folder / "stability.json").write_text(json.dumps([_row("ift_fewer_hurt", True)]))
    run = claims_evidence.build_run("stability", {"profile": "quick", "seconds": 12.5})
    assert run is not None and run.profile == "quick" and run.seconds == 12.5
    assert run.rows[0]["id"] == "ift_fewer_hurt"
    assert claims_evidence.build_run("stability", {"profile": "paper", "seconds": 1.0}) is None
    assert claims_evidence.build_run("stability", {"figure": "stability", "not_built": "x"}) is None
    assert claims_evidence.build_run("meta", {"profile": "quick"}) is None


def test_write_fills_the_staged_template_and_the_toc_lists_the_page_first(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(published, "read", lambda kind, profile: None)
    staged = tmp_path / "stage"
    (staged / "book").mkdir(parents=True)
    (staged / claims_page.PAGE).write_text((REPO / claims_page.PAGE).read_text())
    (staged / claims_page.REPRODUCE_PAGE).write_text((REPO / claims_page.REPRODUCE_PAGE)
                                                     .read_text())
    notebooks = {f: tmp_path / f"{f}.ipynb" for f in profiles.figures()}
    page = claims_page.write(staged, notebooks).read_text()
    assert page.startswith("# The paper's claims at a glance")
    # each chapter's cost from an empty cache, forecast from the published job costs, on both
    # pages, and the whole book's
    assert "on 2 cores from an empty cache" in page and "The whole book at `quick`" in page
    reproduce = (staged / claims_page.REPRODUCE_PAGE).read_text()
    costs = reproduce.split(claims_page.COSTS_START)[1].split(claims_page.COSTS_END)[0]
    assert "filled in by" not in costs
    assert all(f"| `{figure}` |" in costs for figure in profiles.figures())
    assert "filled in by" not in page and "## The paper's claims" in page
    assert "no row <code>theorem1</code>" in page  # nothing built, nothing published
    (staged / claims_page.PAGE).write_text("# no markers\n")
    with pytest.raises(ValueError, match="markers"):
        claims_page.write(staged, notebooks)
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    artifact = next(p for p in toc["parts"] if p["caption"] == "The artifact")
    assert artifact["chapters"][0]["file"] == "book/claims"


def test_the_page_from_this_checkouts_published_summaries_maps_every_row():
    """The generated page, from ``published/`` alone, has no row of no claim (the id-coverage
    test above, as the reader sees it)."""
    quick = published.read("robustness", "quick")
    paper = published.read("numbers", "paper")
    chapters = {figure: claims_evidence.evidence(figure, None, quick, claims_evidence.PUBLISHED,
                                                 "", paper, "") for figure in quick["chapters"]}
    page = claims_page.body(chapters)
    assert "None: every claim row of the chapters is tested by a claim above" in page
    for claim in CLAIMS:
        shown = claim.statement if claim.book_own else claim.quote
        assert html.escape(shown, quote=True) in page, claim.id


def test_collect_anchors_the_built_chapter_and_reads_own_replicates_before_published(
        tmp_path, monkeypatch):
    """stability built at quick (its staged notebook's rows anchored, its verdicts this
    build's), its replicates from this build's ``make robustness``; meta's from published."""
    monkeypatch.setattr(published, "read", lambda kind, profile: None)
    build = locations.build_dir()
    (build / "claims").mkdir(parents=True)
    table = Claims("stability", "quick")
    table.add("claim ift_fewer_hurt", True, "1", id="ift_fewer_hurt")
    table.write()
    (build / "robustness.json").write_text(json.dumps(SUMMARY))
    staged = {f: tmp_path / f"{f}.ipynb" for f in profiles.figures()}
    staged["stability"].write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": {"text/html": table.to_html()}}]}],
        "metadata": {"i2o": {"profile": "quick", "seconds": 30.0}}}))
    meta = {"chapters": {"meta": {"claims": [
        {"claim": "claim fit", "id": "figure4/fit-ordering", "section": "figure4",
         "replicates": {"0": {"verdict": "undecided", "value": "", "check": "few models"}},
         "agreement": "undecided at every replicate"}]}}, "origin": {"commit": "abc"}}
    chapters, provenance = claims_evidence.collect(staged, (meta, {"meta": ("current", "why")}))
    stability, found_meta = chapters["stability"], chapters["meta"]
    assert stability.anchored == {"ift_fewer_hurt"}
    assert stability.link("ift_fewer_hurt") == "stability.html#claim-ift_fewer_hurt"
    assert stability.quick["ift_fewer_hurt"].origin == claims_evidence.THIS_BUILD
    assert stability.agreement["ift_fewer_hurt"].origin == claims_evidence.OWN_REPLICATES
    assert found_meta.quick["figure4/fit-ordering"] == claims_evidence.Verdict(
        "undecided", "", "published, r0", "current", "few models")
    assert found_meta.link("figure4/fit-ordering") == "meta.html"
    assert provenance and "published/robustness-quick.json" in provenance[0]
    written = json.loads(staged["stability"].read_text())["cells"][0]["outputs"][0]
    assert '<tr id="claim-ift_fewer_hurt">' in "".join(written["data"]["text/html"])


def test_a_verdict_that_did_not_hold_says_why_in_one_line_and_the_page_counts_them():
    from i2o.book.claims_evidence import Verdict

    long = "fit: 5/5 models; " + "every improvement CI below +0.25 " * 10
    assert claims_page.one_line_reason(long).endswith("…")
    assert len(claims_page.one_line_reason(long)) <= claims_page.REASON_CHARACTERS + 2
    gated = "too few models fit their training set (needs 4 per group); more text"
    assert claims_page.one_line_reason(gated).startswith("too few models fit")
    cell = claims_page._verdict_cell(Verdict("undecided", check=gated), "")
    assert "too few models fit" in cell
    assert "<em>" not in claims_page._verdict_cell(Verdict("holds", check=gated), "")
    claim = [c for c in CLAIMS if c.id == "figure-4"]
    found = {"meta": ChapterEvidence("meta", texts={"figure4/fit-ordering": "t"},
                                     quick={"figure4/fit-ordering": Verdict("fails")})}
    assert "0 holds, 1 fails, 0 undecided" in claims_page.tally(claim, found)


def test_every_reading_names_a_claim_and_a_commit_of_this_history():
    import subprocess

    READINGS = claims_page.readings()
    ids = {claim.id for claim in CLAIMS}
    assert set(READINGS) <= ids, set(READINGS) - ids
    page = claims_page.readings_table()
    assert page.count("<tr><td>") == len(READINGS)
    try:
        known = subprocess.run(["git", "log", "--format=%h", "--abbrev=7"], capture_output=True,
                               text=True, check=True, cwd=locations.repo_root()).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git history here")
    if len(known) < 10:
        pytest.skip("a shallow clone")
    missing = {r.fixed_in for r in READINGS.values()} - set(known)
    assert not missing, f"commits not in this history: {missing}"
