"""The answer box at the top of a chapter (:mod:`i2o.verdicts.answer`)."""

from __future__ import annotations

from i2o.chapters.deq_gaps.paper_claims import CLAIMS
from i2o.verdicts.answer import answer, answer_parts, counts
from i2o.verdicts.claims import Claims
from i2o.verdicts.decision import Decision
from i2o.verdicts.paper_claims import claim_of


def _table(verdicts: dict[str, bool | None]) -> Claims:
    table = Claims("deq_gaps", "quick", paper=CLAIMS)
    for id, holds in verdicts.items():
        table.decide(f"row {id}", Decision(holds, "why"), "measured", id=id)
    return table


def test_counts_name_each_verdict_present_in_order():
    table = _table({"a": True, "b": None, "c": True, "d": False})
    assert counts(table.rows) == "2 hold, 1 fails, 1 undecided"
    assert counts([]) == "no rows"


def test_the_answer_tallies_the_papers_claims_apart_from_the_books_own_checks():
    paper = "classification_test_no_gain"
    found = claim_of("deq_gaps", paper, CLAIMS)
    assert found is not None and not found.book_own
    assert claim_of("deq_gaps", "classification_near", CLAIMS).book_own
    text = answer(_table({paper: True, "language_test_no_gain": None,
                          "classification_near": False}))
    assert "tested by 2 rows: 1 holds, 1 undecided" in text
    assert "the book's own checks (1 row): 1 fails" in text
    quoted = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(quoted) == 1 and quoted[0].endswith("— 1 holds, 1 undecided")
    assert "profile `quick`" in text
    # the box at the top holds the tally; the list of the paper's claims goes under it
    box, listed = answer_parts(_table({paper: True, "language_test_no_gain": None,
                                       "classification_near": False}))
    assert "- " not in box and "tested by 2 rows" in box
    assert listed == quoted[0] and text == f"{box}\n\n{listed}"


def test_a_table_without_the_chapters_claims_counts_every_row_as_the_books_own():
    table = _table({"classification_test_no_gain": True})
    table.paper = ()
    assert "the paper's claims are tested by 0 rows" in answer(table)
    assert "tested by 1 row: 1 holds" in answer(table, CLAIMS)


def test_the_answer_changes_with_the_verdicts():
    held = answer(_table({"classification_test_no_gain": True}))
    failed = answer(_table({"classification_test_no_gain": False}))
    assert held != failed and "1 fails" in failed and "1 holds" in held


def test_the_answer_box_is_page_text_not_one_of_the_chapters_numbers():
    from i2o.provenance import numbers

    def record(name: str, text: str) -> dict:
        return {"output_type": "display_data", "metadata": {"scrapbook": {"name": name}},
                "data": {"application/papermill.record/text/plain": text}}

    notebook = {"cells": [{"cell_type": "code", "outputs": [
        record("toy-answer", "<IPython.core.display.Markdown object>"),
        record("toy-mean-gain", "0.5")]}]}
    assert numbers.glued(notebook) == {"toy-mean-gain": "0.5"}
