"""i2o.book.published: summaries measured elsewhere, kept in ``published/``, shown by the Robustness
and Reproduce pages when the build has none of its own, each chapter marked current or stale."""

from __future__ import annotations

import json

import pytest
from bank import replicate_run

from i2o.base import locations
from i2o.book import published
from i2o.compute import profiles
from i2o.provenance import bundles, numbers, replicate_summary, robustness_page

COMPUTED_BY_THIS_CODE = published.missing_entries


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """An empty ``published/`` folder of its own; the doctored replicate runs have no cache
    entries, so the check that this code computed them is off (tests that need it restore it)."""
    folder = tmp_path / "published"
    monkeypatch.setattr(published, "folder", lambda: folder)
    monkeypatch.setattr(published, "missing_entries", lambda figure, profile, replicates: {})
    return folder


def _replicate_run(profile: str, replicate: int, figure: str, holds: bool | None) -> None:
    rows = [{"claim": "a claim", "id": "a", "holds": holds, "value": "v", "check": "why"}]
    replicate_run(profile, replicate, figure, rows, cpu="Elsewhere CPU")


def _robustness_run(profile: str = "smoke", figures=("affine", "meta")) -> None:
    for replicate in (0, 1):
        for figure in figures:
            _replicate_run(profile, replicate, figure, True)
    replicate_summary.write_summary(profile, [0, 1], list(figures))


def test_a_published_robustness_summary_is_current_for_this_code(kept):
    _robustness_run()
    written = published.publish_robustness("smoke")
    data = json.loads(written.read_text())
    assert written == kept / "robustness-smoke.json"
    assert set(data["digests"]) == {"affine", "meta"}
    assert set(data["digests"]["meta"]["keys"]) == {"0", "1"}
    assert data["origin"]["commit"] and data["chapters"]["affine"]["counts"]
    assert published.statuses(data, "smoke") == {"affine": published.CURRENT,
                                                 "meta": published.CURRENT}


def test_a_summary_of_other_jobs_or_other_claims_code_is_stale(kept):
    _robustness_run()
    data = json.loads(published.publish_robustness("smoke").read_text())
    # the same chapters computed with other parameters (quick's): other cache keys
    assert published.statuses(data, "quick") == {"affine": published.STALE_RESULTS,
                                                 "meta": published.STALE_RESULTS}
    # the same jobs, turned into verdicts by another version of the claims code
    data["digests"]["meta"]["claims_code"] = "0" * 64
    assert published.status("meta", "smoke", data["digests"]["meta"]) == published.STALE_CLAIMS
    assert published.status("affine", "smoke", data["digests"]["affine"]) == published.CURRENT
    data["digests"]["gone"] = data["digests"]["affine"]  # a chapter no longer in the book
    assert published.statuses(data, "smoke")["gone"] == published.STALE_RESULTS


def test_the_robustness_page_shows_the_published_summary_only_when_the_build_has_none(
        kept, tmp_path):
    _robustness_run(profile="quick", figures=("affine",))
    published.publish_robustness("quick")
    staged = tmp_path / "stage"
    (staged / "book").mkdir(parents=True)
    replicate_summary.summary_path().unlink()  # a fresh build: no replicate of its own
    text = robustness_page.write_page(staged, published.robustness_fallback()).read_text()
    assert "Measured elsewhere" in text and "Elsewhere CPU" in text
    assert f"Published summary, **{published.CURRENT}**" in text
    _robustness_run(profile="quick", figures=("affine",))  # the build's own run
    text = robustness_page.write_page(staged, published.robustness_fallback()).read_text()
    assert "Measured elsewhere" not in text and "Published summary" not in text


def test_without_a_published_summary_the_page_names_the_command(kept, tmp_path):
    staged = tmp_path / "stage"
    (staged / "book").mkdir(parents=True)
    page = robustness_page.write_page(staged, published.robustness_fallback())
    assert "No replicates computed yet" in page.read_text()
    assert "`published/` is empty" in published.reproduce_section()


def test_the_reproduce_page_lists_every_summary_with_its_status(kept, tmp_path):
    _robustness_run()
    data = json.loads(published.publish_robustness("smoke").read_text())
    data["digests"]["meta"]["claims_code"] = "0" * 64
    published.path("robustness", "smoke").write_text(json.dumps(data))
    page = tmp_path / "reproduce.md"
    page.write_text(f"# Reproduce\n\n{published.START}\nold\n{published.END}\ntail\n")
    assert published.fill_reproduce(page)
    text = page.read_text()
    assert "old" not in text and text.endswith(f"{published.END}\ntail\n")
    assert "`published/robustness-smoke.json`" in text and "Elsewhere CPU" in text
    assert f"| affine | 1 same verdict, 0 flip, 0 undecided throughout | {published.CURRENT}" \
        in text
    assert f"| meta | 1 same verdict, 0 flip, 0 undecided throughout | " \
           f"{published.STALE_CLAIMS}" in text
    no_markers = tmp_path / "other.md"
    no_markers.write_text("# Other\n")
    assert not published.fill_reproduce(no_markers)


def test_the_reproduce_page_has_the_markers():
    text = (locations.repo_root() / "book" / "reproduce.md").read_text()
    assert text.index(published.START) < text.index(published.END)


def test_bad_requests_are_refused_with_the_reason(kept, capsys):
    with pytest.raises(FileNotFoundError, match="make robustness"):
        published.publish_robustness("quick")
    _robustness_run(profile="smoke")
    with pytest.raises(ValueError, match="is of profile 'smoke', not 'quick'"):
        published.publish_robustness("quick")
    _replicate_run("smoke", 0, "stability", True)  # stability only at replicate 0
    replicate_summary.write_summary("smoke", [0, 1], ["affine", "stability"])
    with pytest.raises(ValueError, match="replicates missing"):
        published.publish_robustness("smoke")
    with pytest.raises(ValueError, match="no chapter executed at profile 'paper'"):
        published.publish_numbers("paper")
    assert published.main(["numbers"]) == 2
    assert "needs --profile" in capsys.readouterr().err
    assert published.main(["robustness", "--profile", "paper"]) == 2
    assert not kept.exists()


def test_publishing_a_profile_takes_only_the_chapters_executed_at_it(kept, monkeypatch, capsys):
    executed = {"meta": "paper", "affine": "quick"}
    monkeypatch.setattr(profiles, "figures", lambda: ["affine", "meta", "stability"])
    monkeypatch.setattr(numbers, "chapter", lambda figure: {
        "profile": executed[figure], "params": {"replicate": 0}, "numbers": {}, "claims": []}
        if figure in executed else None)
    monkeypatch.setattr(published, "chapter_digests", lambda figure, profile, replicates: {})
    described = {"files": 2, "bytes": 3_000_000, "contents_sha256": "c" * 64, "missing": []}
    monkeypatch.setattr(bundles, "describe_entries", lambda figure, profile, replicate: described)
    data = json.loads(published.publish_numbers("paper").read_text())
    assert list(data["chapters"]) == ["meta"] and data["profile"] == "paper"
    assert data["bundles"] == {"meta": {"files": 2, "bytes": 3_000_000,
                                        "contents_sha256": "c" * 64}}
    assert f"2 files, 3.0 MB, contents digest `{'c' * 64}`" in "\n".join(
        published._bundle_lines(data, "paper"))
    assert "left out, executed at another profile: {'affine': 'quick'}" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"at profile 'smoke'.*'meta': 'paper'"):
        published.publish_numbers("smoke")


def test_a_chapter_this_code_did_not_compute_is_not_published(kept, monkeypatch, tmp_path):
    """A summary whose chapter has no cache entries under this checkout's keys (computed by other
    code, or read from another cache) would be called current by digests taken now: refused,
    naming the chapter and what to do, and nothing is written."""
    monkeypatch.setattr(published, "missing_entries", COMPUTED_BY_THIS_CODE)
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "empty-cache"))
    _robustness_run(figures=("meta",))
    with pytest.raises(ValueError, match=r"meta: cache entries .* at replicate 0.*FIGURES=meta"):
        published.publish_robustness("smoke")
    assert not kept.exists()
    assert published.missing_entries("meta", "smoke", [0])[0][0] > 0


def test_publishing_some_chapters_keeps_the_others_as_published(kept):
    _robustness_run()
    first = json.loads(published.publish_robustness("smoke").read_text())
    for replicate in (0, 1):
        _replicate_run("smoke", replicate, "meta", None)
        _replicate_run("smoke", replicate, "affine", False)
    replicate_summary.write_summary("smoke", [0, 1], ["affine", "meta"])
    data = json.loads(published.publish_robustness("smoke", ["meta"]).read_text())
    assert data["chapters"]["affine"] == first["chapters"]["affine"]  # not republished
    assert data["digests"]["affine"] == first["digests"]["affine"]
    assert data["chapters"]["meta"]["counts"] != first["chapters"]["meta"]["counts"]
    assert data["origin"]["chapters"] == ["meta"]
    assert data["origin"]["earlier"]["commit"] == first["origin"]["commit"]
    used = {run["machine"] for c in data["chapters"].values() for run in c["runs"].values()}
    assert {m["id"] for m in data["machines"]} == used
    with pytest.raises(ValueError, match="not in .*robustness.json: stability"):
        published.publish_robustness("smoke", ["stability"])
    for replicate in (0, 1, 2):
        _replicate_run("smoke", replicate, "meta", None)
    replicate_summary.write_summary("smoke", [0, 1, 2], ["meta"])
    more = json.loads(published.publish_robustness("smoke", ["meta"]).read_text())
    assert replicate_summary.chapter_replicates(more, "meta") == [0, 1, 2]
    assert replicate_summary.chapter_replicates(more, "affine") == [0, 1]  # as published before
    assert more["replicates"] == [0, 1, 2]
    assert "0, 1, 2 of meta" in published._replicates_line(more)
    assert "0, 1 of affine" in published._replicates_line(more)
    assert "of every chapter" in published._replicates_line(data)
    page = robustness_page.page(more)  # a column per replicate of each chapter's own
    assert page.count("<th>r2</th>") == 1 and page.count("<th>r1</th>") == 2


def test_replicates_computed_in_another_session_add_up_while_they_are_current(kept):
    """A chapter's replicates 0-1 published, then 2-3 computed in another session (another empty
    cache) and published: the chapter holds 0-3, each row's verdict at each; when the published
    replicates are stale (other claims code), the new run replaces them instead."""
    _robustness_run(figures=("meta",))
    published.publish_robustness("smoke")
    for replicate in (2, 3):
        _replicate_run("smoke", replicate, "meta", False)
    replicate_summary.write_summary("smoke", [2, 3], ["meta"])
    data = json.loads(published.publish_robustness("smoke", ["meta"]).read_text())
    assert replicate_summary.chapter_replicates(data, "meta") == [0, 1, 2, 3]
    (row,) = data["chapters"]["meta"]["claims"]
    assert [row["replicates"][r]["verdict"] for r in "0123"] == ["holds"] * 2 + ["fails"] * 2
    assert row["agreement"] == replicate_summary.FLIPS
    assert set(data["chapters"]["meta"]["runs"]) == {"0", "1", "2", "3"}
    assert set(data["digests"]["meta"]["keys"]) == {"0", "1", "2", "3"}
    assert published.statuses(data, "smoke") == {"meta": published.CURRENT}
    data["digests"]["meta"]["claims_code"] = "0" * 64
    (kept / "robustness-smoke.json").write_text(json.dumps(data))
    replaced = json.loads(published.publish_robustness("smoke", ["meta"]).read_text())
    assert replicate_summary.chapter_replicates(replaced, "meta") == [2, 3]
    assert replaced["chapters"]["meta"]["counts"][replicate_summary.SAME_DECIDED] == 1


@pytest.mark.book
def test_a_built_book_publishes_its_numbers(built_book, kept, monkeypatch):
    monkeypatch.setattr(published, "missing_entries", COMPUTED_BY_THIS_CODE)
    monkeypatch.setenv("I2O_BUILD_DIR", str(built_book["build"]))
    monkeypatch.setenv("I2O_RESULTS_DIR", str(built_book["build"].parent / "results"))
    data = json.loads(published.publish_numbers("smoke").read_text())
    served = json.loads((built_book["html"] / "numbers.json").read_text())
    assert {f: c["claims"] for f, c in data["chapters"].items()} == \
        {f: c["claims"] for f, c in served.items()}
    assert set(published.statuses(data, "smoke").values()) == {published.CURRENT}
    section = published.reproduce_section()
    assert "numbers-smoke.json" in section
    digest = numbers.digests({"meta": data["chapters"]["meta"]})["meta"]
    assert f"digest `{digest[:16]}…`" in section
    assert f"contents digest `{data['bundles']['meta']['contents_sha256']}`" in section


def test_a_published_profile_is_compared_row_by_row_with_the_published_replicates(kept):
    """The Reproduce page sets each claim of a published numbers summary (here "quick") beside the
    same claim at every replicate of a published robustness summary of another profile ("smoke"),
    matched by id, else by wording; a claim the replicates lack shows dashes."""
    for replicate, holds in ((0, True), (1, None)):
        rows = [{"claim": "a claim", "id": "a", "holds": holds},
                {"claim": "worded alike", "holds": False}]
        replicate_run("smoke", replicate, "meta", rows, cpu="Elsewhere CPU")
    replicate_summary.write_summary("smoke", [0, 1], ["meta"])
    table = json.loads(published.publish_robustness("smoke").read_text())
    assert table["chapters"]["meta"]["claims"][0]["id"] == "a"
    claims = [{"claim": "a claim, reworded", "id": "a", "holds": False},
              {"claim": "worded alike", "holds": True},
              {"claim": "only here", "id": "new", "holds": None}]
    assert published.beside_replicates(claims, table["chapters"]["meta"]["claims"]) == [
        {"claim": "a claim, reworded", "verdict": "fails",
         "replicates": {"0": "holds", "1": "undecided"}},
        {"claim": "worded alike", "verdict": "holds",
         "replicates": {"0": "fails", "1": "fails"}},
        {"claim": "only here", "verdict": "undecided", "replicates": {}}]
    published.path("numbers", "quick").write_text(json.dumps(
        {"profile": "quick", "chapters": {"meta": {"claims": claims, "numbers": {},
                                                   "params": {"replicate": 0}}},
         "origin": {"commit": "abc"}, "digests": {}}))
    text = published.reproduce_section()
    assert "meta, quick replicate 0 beside smoke replicates 0, 1" in text
    assert "| claim | quick r0 | smoke r0 | smoke r1 |" in text
    assert "| a claim, reworded | fails | holds | undecided |" in text
    assert "| worded alike | holds | fails | fails |" in text
    assert "| only here | undecided | — | — |" in text


def test_the_committed_summaries_are_readable_and_name_every_chapter():
    for kind, profile, data in published.available():
        assert kind in published.KINDS and profile in profiles.PROFILES
        assert data["origin"]["commit"] and set(data["digests"]) == set(data["chapters"])
        assert set(data["chapters"]) <= set(profiles.figures())
