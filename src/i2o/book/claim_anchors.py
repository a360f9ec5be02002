"""Anchors on the chapters' claim rows: each row of a staged chapter's claims table gets the id
:func:`anchor`, so that the page "The paper's claims at a glance" (:mod:`i2o.book.claims_page`)
links to the row itself."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote


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
