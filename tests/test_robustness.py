"""i2o.provenance.robustness: the agreement of verdicts across replicates, the Robustness page, bad
input, and one real run (the affine chapter, smoke, replicates 0 and 1). Budget: ~30 s (the real
run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bank import replicate_run

from i2o.base import locations
from i2o.compute import profiles
from i2o.provenance import replicate_summary, robustness, robustness_page


def _rows(*verdicts: bool | None, claim: str = "a claim") -> list[dict]:
    return [{"claim": claim, "holds": v, "value": f"value {i}", "check": "why"}
            for i, v in enumerate(verdicts)]


@pytest.mark.parametrize("verdicts, status", [
    (["holds", "holds", "holds"], replicate_summary.SAME_DECIDED),
    (["fails", "fails"], replicate_summary.SAME_DECIDED),
    (["undecided", "undecided"], replicate_summary.SAME_UNDECIDED),
    (["holds", "undecided", "holds"], replicate_summary.FLIPS),
    (["holds", "fails"], replicate_summary.FLIPS),
    (["holds", None, "holds"], replicate_summary.INCOMPLETE),
    ([], replicate_summary.INCOMPLETE),
])
def test_agreement(verdicts, status):
    assert replicate_summary.agreement(verdicts) == status


def test_chapter_table_matches_claims_by_text_and_marks_missing_replicates():
    runs = {0: [{"claim": "A", "holds": True, "value": "1"}, {"claim": "B", "holds": None}],
            1: [{"claim": "B", "holds": False, "value": "2"}, {"claim": "A", "holds": True}],
            2: None}
    table = replicate_summary.chapter_table(runs)
    assert [row["claim"] for row in table] == ["A", "B"]
    assert table[0]["replicates"]["0"]["verdict"] == "holds"
    assert table[1]["replicates"]["1"]["verdict"] == "fails"
    assert table[0]["replicates"]["2"] is None
    assert {row["agreement"] for row in table} == {replicate_summary.INCOMPLETE}
    both = replicate_summary.chapter_table({0: runs[0], 1: runs[1]})
    assert [row["agreement"] for row in both] == [replicate_summary.SAME_DECIDED,
                                                  replicate_summary.FLIPS]
    assert replicate_summary.counts(both) == {
        replicate_summary.SAME_DECIDED: 1, replicate_summary.FLIPS: 1,
        replicate_summary.SAME_UNDECIDED: 0, replicate_summary.INCOMPLETE: 0}


def test_rows_with_an_id_are_matched_by_id_and_keep_their_section():
    def row(claim, holds):
        return {"claim": claim, "holds": holds, "value": "", "check": "", "id": "arm_no_gain",
                "section": "arm"}

    # the wording quotes a measured count, which differs between replicates: the id matches them
    table = replicate_summary.chapter_table({0: [row("gain at N' = 8", True)],
                                      1: [row("gain at N' = 9", False)]})
    assert len(table) == 1 and table[0]["agreement"] == replicate_summary.FLIPS
    assert table[0]["section"] == "arm" and table[0]["claim"] == "gain at N' = 8"


def test_page_from_doctored_runs_shows_agreement_flips_and_missing_replicates(tmp_path):
    replicate_run("quick", 0, "affine", _rows(True, claim="steady") + _rows(True, claim="flipper"))
    replicate_run("quick", 1, "affine", _rows(True, claim="steady") + _rows(None, claim="flipper"))
    replicate_run("quick", 0, "meta", _rows(False, claim="m"))
    summary = replicate_summary.write_summary("quick", [0, 1])
    assert json.loads(replicate_summary.summary_path().read_text()) == summary
    affine, meta = summary["chapters"]["affine"], summary["chapters"]["meta"]
    assert affine["counts"][replicate_summary.SAME_DECIDED] == 1
    assert affine["counts"][replicate_summary.FLIPS] == 1 and affine["missing"] == []
    assert meta["missing"] == [1] and summary["chapters"]["stability"]["missing"] == [0, 1]
    assert summary["machines"][0]["cpu"] == "Test CPU"
    text = robustness_page.page(replicate_summary.read_summary())
    assert "1 claim(s) with the same verdict at every replicate, 1 that flip" in text
    assert 'make robustness PROFILE=quick REPLICATES="1" FIGURES="meta"' in text
    assert "title=\"value 0 — check: why\"" in text  # the reason on hover
    assert "cpu: Test CPU" in text
    staged = tmp_path / "stage"
    (staged / "book").mkdir(parents=True)
    assert "flipper" in robustness_page.write_page(staged).read_text()


def test_page_without_replicates_names_the_command():
    text = robustness_page.page(None)
    assert "No replicates computed yet" in text
    assert 'make robustness PROFILE=quick REPLICATES="0 1 2"' in text


def test_robustness_page_is_in_the_table_of_contents():
    toc = (locations.repo_root() / "_toc.yml").read_text()
    assert "book/robustness" in toc


@pytest.mark.parametrize("argv, message", [
    (["--replicates", "0", "0"], "must not repeat"),
    (["--replicates", "-1"], "integers ≥ 0"),
    (["--replicates", "1001"], "'replicate'"),
    (["--figures", "nope"], "unknown figure"),
    (["--profile", "huge"], "--profile must be one of"),
    (["--workers", "0"], "--workers"),
])
def test_bad_requests_are_refused_before_any_compute(argv, message, capsys):
    assert robustness.main(argv + ["--figures", "affine"] if "--figures" not in argv
                           else argv) == 2
    assert message in capsys.readouterr().err
    assert not replicate_summary.replicate_dir("quick", 0).exists()


def test_a_non_integer_replicate_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        robustness.main(["--replicates", "one"])
    assert "replicates are integers" in capsys.readouterr().err


def test_real_run_redraws_the_random_instances_and_a_rerun_computes_nothing():
    """The affine chapter (smoke) at replicates 0 and 1, through the command line."""
    argv = [sys.executable, "-m", "i2o.provenance.robustness", "--profile", "smoke",
            "--replicates", "0", "1", "--figures", "affine"]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-2000:]
    summary = replicate_summary.read_summary()
    affine = summary["chapters"]["affine"]
    assert affine["missing"] == [] and sum(affine["counts"].values()) == len(affine["claims"]) > 0
    # a Monte Carlo value (random instances) differs between the two draws
    values = [{r: at["value"] for r, at in row["replicates"].items()} for row in affine["claims"]]
    assert any(v["0"] != v["1"] for v in values)
    dates = {r: run["date"] for r, run in affine["runs"].items()}
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0
    rerun = replicate_summary.read_summary()["chapters"]["affine"]
    assert {r: run["date"] for r, run in rerun["runs"].items()} == dates  # not re-executed
    assert rerun["claims"] == affine["claims"]
    assert profiles.resolve("affine", "smoke", replicate=1)["replicate"] == 1
