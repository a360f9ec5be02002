"""numbers.json (every glued number and claim row of the book) and ``python -m i2o.compare``."""

from __future__ import annotations

import copy
import json

import pytest

from i2o.base import locations
from i2o.book import execute, html_build, stamps
from i2o.compute import profiles
from i2o.provenance import compare, numbers
from i2o.verdicts import claims

ROWS = [{"claim": "IFT keeps its accuracy", "holds": True, "value": "86.9 % vs 85.1 %",
         "profile": "quick"},
        {"claim": "unrolled degrades", "holds": None, "value": "n/a", "profile": "quick"}]
BUILD = {"stability": {"numbers": {"acc-ift": "0.869", "label": "'IFT'"}, "claims": ROWS,
                       "profile": "quick", "params": {"seeds": [0]},
                       "provenance": {"numerics": "portable"}},
         "affine": {"numbers": {"eta": "0.5"}, "claims": [], "profile": "quick", "params": {},
                    "provenance": {"numerics": "portable"}}}


def _files(tmp_path, ours, theirs=BUILD):
    a, b = tmp_path / "theirs.json", tmp_path / "ours.json"
    a.write_text(json.dumps(theirs))
    b.write_text(json.dumps(ours))
    return str(a), str(b)


def test_equal_builds_agree(tmp_path, capsys):
    assert compare.main(list(_files(tmp_path, BUILD))) == 0
    out = capsys.readouterr().out
    assert "== stability: identical (2 numbers, 2 claims)" in out
    assert "verdicts: all agree" in out


def test_a_changed_number_is_shown_with_its_differences(tmp_path, capsys):
    ours = copy.deepcopy(BUILD)
    ours["stability"]["numbers"]["acc-ift"] = "0.9812"
    ours["stability"]["claims"][0]["value"] = "98.1 % vs 85.1 %"
    assert compare.main(list(_files(tmp_path, ours))) == 0  # numbers alone: exit 0
    out = capsys.readouterr().out
    assert "== stability: differs" in out and "== affine: identical" in out
    assert "number acc-ift: '0.869' → '0.9812' (|Δ| 0.112, relative 0.129)" in out
    assert "claim value: '86.9 % vs 85.1 %' → '98.1 % vs 85.1 %' (|Δ| 11.2" in out
    assert "label" not in out


def test_measured_costs_are_listed_apart_and_never_make_a_chapter_differ(tmp_path, capsys):
    theirs, ours = copy.deepcopy(BUILD), copy.deepcopy(BUILD)
    theirs["stability"]["costs"] = {"stability-collect-seconds": "436"}
    ours["stability"]["costs"] = {"stability-collect-seconds": "401"}
    assert compare.main(list(_files(tmp_path, ours, theirs))) == 0
    out = capsys.readouterr().out
    assert "== stability: identical (2 numbers, 2 claims); measured costs differ" in out
    assert "cost stability-collect-seconds: '436' → '401'" in out


def test_cost_names_follow_the_naming_rule():
    assert numbers.is_cost("meta-imaml-ms-per-step") and numbers.is_cost("sep-seconds")
    assert not numbers.is_cost("stability-ift-accuracy") and not numbers.is_cost("seconds-x")


def test_a_changed_verdict_fails_the_comparison(tmp_path, capsys):
    ours = copy.deepcopy(BUILD)
    ours["stability"]["claims"][1]["holds"] = False
    assert compare.main(list(_files(tmp_path, ours))) == 1
    out = capsys.readouterr().out
    assert "VERDICT undecided → fails: unrolled degrades" in out
    assert "verdicts: SOME DIFFER" in out


def test_a_missing_chapter_and_a_missing_claim_are_named(tmp_path, capsys):
    ours = copy.deepcopy(BUILD)
    del ours["affine"]
    ours["stability"]["claims"].pop()
    ours["meta"] = {"numbers": {}, "claims": []}
    assert compare.main(list(_files(tmp_path, ours))) == 1
    out = capsys.readouterr().out
    assert "== affine: missing in ours (not built there)" in out
    assert "== meta: missing in theirs" in out
    assert "CLAIM only in theirs: unrolled degrades" in out


def test_other_text_and_modes_are_reported_as_they_are():
    assert compare.describe_change("'IFT'", "'unrolled'") == "\"'IFT'\" → \"'unrolled'\""
    assert compare.describe_change("1e-3", "0.001").endswith("(same numbers, other spelling)")
    report = compare.compare({"c": {"provenance": {"numerics": "native"}}},
                             {"c": {"provenance": {"numerics": "portable"}}})
    assert any("numerics mode: native → portable" in line for line in report.lines)


def test_unreadable_input_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert compare.main([str(bad), str(bad)]) == 2
    assert "a numbers.json maps chapters to their numbers; got list" in capsys.readouterr().err
    assert compare.main([str(tmp_path / "none.json"), str(bad)]) == 2


def _glue(name, mime, value):
    return {"output_type": "display_data", "data": {f"{numbers._GLUE_PREFIX}{mime}": value},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": numbers._GLUE_PREFIX}}}


def test_numbers_json_holds_every_glued_number_and_claim_row_of_each_built_chapter(capsys):
    figure = profiles.figures()[0]
    provenance = {"numerics": "portable", "cpu": "test CPU"}
    cell = {"cell_type": "code", "source": "", "metadata": {}, "execution_count": 1,
            "outputs": [_glue("x-rank", "text/plain", "3"),
                        _glue("x-eta", "text/plain", ["0.12", "5"]),
                        _glue("x-collect-seconds", "text/plain", "436"),
                        {"output_type": "display_data",
                         "data": {profiles.PROVENANCE_MIME: provenance},
                         "metadata": {"scrapbook": {"name": profiles.PROVENANCE_RECORD}}},
                        {"output_type": "stream", "name": "stdout", "text": "7\n"}]}
    executed = stamps.executed_path(figure)
    executed.parent.mkdir(parents=True)
    notebook = {"cells": [cell], "metadata": {"i2o": {"profile": "quick", "params": {"n": 1},
                                                      "git": "abc", "provenance": provenance}},
                "nbformat": 4, "nbformat_minor": 5}
    executed.write_text(json.dumps(notebook))
    claims.Claims(figure, "quick", [claims.Claim("a claim", True, "1.0", "quick")]).write()
    assert execute.kernel_provenance(notebook) == provenance
    html_build.stage()
    written = json.loads((locations.build_dir() / "numbers.json").read_text())
    assert list(written) == [figure]  # the chapters not executed are absent
    assert written[figure]["numbers"] == {"x-rank": "3", "x-eta": "0.125"}
    assert written[figure]["costs"] == {"x-collect-seconds": "436"}
    assert written[figure]["claims"][0]["claim"] == "a claim"
    assert written[figure]["provenance"] == provenance and written[figure]["profile"] == "quick"
    assert numbers.main([]) == 0
    digest = numbers.digests(written)[figure]
    assert f"{figure}: sha256 {digest} (profile quick, numerics portable, test CPU)" in \
        capsys.readouterr().out
    written[figure]["provenance"]["cpu"] = "another CPU"
    written[figure]["costs"]["x-collect-seconds"] = "512"  # another run's time
    assert numbers.digests(written)[figure] == digest
    written[figure]["numbers"]["x-rank"] = "4"
    assert numbers.digests(written)[figure] != digest
    execute.failure_path(figure).write_text("boom\n")
    assert numbers.collect() == {}


@pytest.mark.parametrize("text, shape, values", [
    ("0.869", "#", [0.869]), ("'1.2e-05 at N = 18'", "'# at N = #'", [1.2e-05, 18.0]),
    ("np.float64(-3.5)", "np.float#(#)", [64.0, -3.5])])
def test_numbers_are_read_out_of_glued_text(text, shape, values):
    assert compare.numbers_in(text) == (shape, values)
