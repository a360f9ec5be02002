"""Every number the book publishes, per chapter, in one file readers can compare: ``numbers.json``.

Written when the book is staged (:func:`i2o.book.stage`) to ``_build/numbers.json`` and served
with the HTML (``_build/html/numbers.json``, linked from the Reproduce page). For each chapter
whose notebook was executed::

    {"<figure>": {"numbers": {"<glue name>": <value as glued>, ...},
                  "claims": [<row of _build/claims/<figure>.json>, ...],
                  "profile": "quick", "params": {...}, "git": "...",
                  "provenance": {<the kernel's i2o.runtime.provenance()>}}}

"Value as glued" is what the text shows: the glued output's JSON if it has one, else its plain
text (``repr`` of the value). A chapter that was not built is absent, so that ``python -m
i2o.compare`` reports it as missing rather than as a change of every number.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from i2o import claims, profiles, runtime

FILENAME = "numbers.json"
_GLUE_PREFIX = "application/papermill.record/"


def glued(notebook: dict[str, Any]) -> dict[str, Any]:
    """The glued values of an executed notebook by name (papermill/myst-nb records), without the
    provenance record :func:`i2o.profiles.show` leaves."""
    found: dict[str, Any] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            if not name or name == profiles.PROVENANCE_RECORD:
                continue
            if _GLUE_PREFIX + "application/json" in data:
                found[name] = data[_GLUE_PREFIX + "application/json"]
            elif _GLUE_PREFIX + "text/plain" in data:
                text = data[_GLUE_PREFIX + "text/plain"]
                found[name] = "".join(text) if isinstance(text, list) else text
    return found


def _executed(figure: str) -> Path:
    return runtime.build_dir() / "notebooks" / Path(profiles.entry(figure)["notebook"]).name


def chapter(figure: str) -> dict[str, Any] | None:
    """What ``figure``'s last execution published, or ``None`` when it has no executed notebook
    (or its last run failed)."""
    path = _executed(figure)
    if not path.exists() or path.with_suffix(".notbuilt.txt").exists():
        return None
    notebook = json.loads(path.read_text())
    stamp = notebook.get("metadata", {}).get("i2o", {})
    rows_path = claims.claims_dir() / f"{figure}.json"
    rows = json.loads(rows_path.read_text()) if rows_path.exists() else []
    return {"numbers": glued(notebook), "claims": rows, "profile": stamp.get("profile"),
            "params": stamp.get("params"), "git": stamp.get("git"),
            "provenance": stamp.get("provenance")}


def collect() -> dict[str, dict[str, Any]]:
    """Every executed chapter's numbers, in manifest order."""
    return {figure: found for figure in profiles.figures()
            if (found := chapter(figure)) is not None}


def write(path: Path | None = None) -> Path:
    """Write :func:`collect` to ``path`` (default ``_build/numbers.json``) and return it."""
    path = path or runtime.build_dir() / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(collect(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path
