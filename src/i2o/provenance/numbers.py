"""Every number the book publishes, per chapter, in one file readers can compare: ``numbers.json``.

Written when the book is staged (:func:`i2o.book.html_build.stage`) to ``_build/numbers.json`` and
served with the HTML (``_build/html/numbers.json``, linked from the Reproduce page). For each
chapter whose notebook was executed::

    {"<figure>": {"numbers": {"<glue name>": <value as glued>, ...},
                  "costs": {"<glue name>": <value as glued>, ...},
                  "claims": [<row of _build/claims/<figure>.json>, ...],
                  "profile": "quick", "params": {...}, "git": "...",
                  "provenance": {<the kernel's i2o.base.lineage.provenance()>}}}

"Value as glued" is what the text shows: the glued output's JSON if it has one, else its plain
text (``repr`` of the value). Glued *costs* (names ending in a unit of time or memory, see
:func:`is_cost`: wall and CPU times, peak memory) are kept apart: they are measurements of the
machine, not results, and differ between two runs of the same build. A chapter that was not
built is absent, so that ``python -m i2o.compare`` reports it as missing rather than as a change
of every number.

``python -m i2o.numbers`` writes the file and prints each chapter's SHA-256 and CPU model, for a
build's closing note: a build on another CPU with the same digests published the same numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.base.digests import sha256
from i2o.compute import profiles
from i2o.verdicts import claims

FILENAME = "numbers.json"
_GLUE_PREFIX = "application/papermill.record/"
#: Glue-name endings of measured costs (the naming rule every chapter's ``numbers`` follows).
COST_SUFFIXES = ("-seconds", "-minutes", "-hours", "-ms-per-step", "-mb")


def is_cost(name: str) -> bool:
    """Is the glued number ``name`` a measured cost (time or memory) rather than a result?"""
    return name.endswith(COST_SUFFIXES)


#: The glue-name ending of a chapter's answer box (:mod:`i2o.verdicts.answer`): page text
#: generated from the claims, which the numbers already hold, so not a number of its own.
ANSWER_SUFFIX = "-answer"


def glued(notebook: dict[str, Any]) -> dict[str, Any]:
    """The glued values of an executed notebook by name (papermill/myst-nb records), without the
    provenance record :func:`i2o.compute.profiles.show` leaves and the answer box's text."""
    found: dict[str, Any] = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            if not name or name == profiles.PROVENANCE_RECORD or name.endswith(ANSWER_SUFFIX):
                continue
            if _GLUE_PREFIX + "application/json" in data:
                found[name] = data[_GLUE_PREFIX + "application/json"]
            elif _GLUE_PREFIX + "text/plain" in data:
                text = data[_GLUE_PREFIX + "text/plain"]
                found[name] = "".join(text) if isinstance(text, list) else text
    return found


def _executed(figure: str) -> Path:
    return locations.build_dir() / "notebooks" / Path(profiles.entry(figure)["notebook"]).name


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
    values = glued(notebook)
    return {"numbers": {k: v for k, v in values.items() if not is_cost(k)},
            "costs": {k: v for k, v in values.items() if is_cost(k)},
            "claims": rows, "profile": stamp.get("profile"),
            "params": stamp.get("params"), "git": stamp.get("git"),
            "provenance": stamp.get("provenance")}


def collect() -> dict[str, dict[str, Any]]:
    """Every executed chapter's numbers, in manifest order."""
    return {figure: found for figure in profiles.figures()
            if (found := chapter(figure)) is not None}


def write(path: Path | None = None) -> Path:
    """Write :func:`collect` to ``path`` (default ``_build/numbers.json``) and return it."""
    path = path or locations.build_dir() / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(collect(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def digests(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each chapter's SHA-256 over its numbers and claim rows only (canonical JSON), not its
    costs or provenance: two builds on different CPUs whose digests agree published the same
    numbers."""
    return {figure: sha256(json.dumps(
        {"numbers": entry["numbers"], "claims": entry["claims"]}, sort_keys=True,
        ensure_ascii=False).encode()) for figure, entry in found.items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.numbers``: write ``_build/numbers.json`` from the executed notebooks and
    print each chapter's digest with the CPU it was computed on (for a build's closing note)."""
    argparse.ArgumentParser(prog="python -m i2o.numbers",
                            description=(main.__doc__ or ": ").split(": ", 1)[1]).parse_args(argv)
    path = write()
    found = json.loads(path.read_text())
    for figure, digest in digests(found).items():
        facts = found[figure].get("provenance") or {}
        print(f"{figure}: sha256 {digest} (profile {found[figure].get('profile')}, numerics "
              f"{facts.get('numerics', '?')}, {facts.get('cpu', 'unknown CPU')})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
