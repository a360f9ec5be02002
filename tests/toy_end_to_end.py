"""The steps of ``tests/test_toy_chapter.py``, run in one process whose ``i2o`` is a copy of the
package with the toy chapter added (the test sets ``PYTHONPATH``, ``I2O_ROOT`` and the caches).

``python toy_end_to_end.py WORK`` checks the chapter against the layout tests every chapter
passes, then runs door → pool → cache → claims → prose → notebook → bundle export and import →
publish → fingerprint, with the results caches under ``WORK``, and prints what each step observed
as one JSON object, which the test compares with what it expects.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from i2o.book import build, execute, published
from i2o.chapters.toy import claims
from i2o.compute import door, pool
from i2o.provenance import bundles, fingerprint, numbers
from i2o.verdicts import prose

FIGURE, PROFILE = "toy", "smoke"


def use_cache(folder: Path) -> None:
    os.environ["I2O_RESULTS_DIR"] = str(folder)


def refused(*argv: str) -> dict[str, Any]:
    """``python -m i2o.book run toy`` with a wrong parameter: its exit status and message."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        status = build.main(["run", FIGURE, "--profile", PROFILE, *argv])
    return {"status": status, "message": said.getvalue().strip()}


def verdict(**overrides: Any) -> dict[str, Any]:
    """The chapter's claims and prose at ``overrides``, its jobs read from the cache."""
    results = door.enter(FIGURE, PROFILE, **overrides).collect()
    table = claims.claims(results)
    return {"holds": [row.holds for row in table.rows], "computed": results.cost.computed,
            "jobs": results.cost.jobs, "prose": prose.conclusions(table, display=False)}


def entry_files(cache: Path) -> dict[str, bytes]:
    return {str(path.relative_to(cache)): path.read_bytes()
            for path in sorted((cache / FIGURE).glob("*/*")) if path.parent.suffix != ".ckpt"
            and not path.parent.name.startswith(".")}


def bundle_steps(work: Path, cache: Path) -> dict[str, Any]:
    """Export the computed chapter, export one whose entries are missing, import the first into
    a fresh cache (twice)."""
    manifest = bundles.export(FIGURE, PROFILE, work / "toy.tar")
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        status = bundles.export_main([FIGURE, "--profile", "quick", "-o", str(work / "q.tar")])
    use_cache(work / "imported")
    first, second = (bundles.import_bundle(work / "toy.tar") for _ in range(2))
    same = entry_files(work / "imported") == entry_files(cache)
    use_cache(cache)
    return {"files": len(manifest["files"]), "missing": manifest["missing"],
            "partial_status": status, "partial_said": said.getvalue().strip(),
            "written": len(first.written), "current": len(first.current),
            "written_again": len(second.written), "same_files": same}


def contract() -> dict[str, str]:
    """The layout tests every chapter of the manifest passes, run on the toy chapter: each
    check's name, with ``ok`` or its error."""
    import test_layout  # beside this file

    checks = (test_layout.test_every_chapter_has_its_faces,
              test_layout.test_job_classes_live_outside_the_chapter_faces,
              test_layout.test_notebooks_stay_thin,
              test_layout.test_chapter_id_notebook_stem_and_package_agree)
    found = {}
    for check in checks:
        try:
            check(FIGURE)
            found[check.__name__] = "ok"
        except AssertionError as error:
            found[check.__name__] = f"AssertionError: {error}"
    return found


def main(work: Path) -> dict[str, Any]:
    found: dict[str, Any] = {"contract": contract(),
                             "door": [refused("-p", "contraction", "1.5"),
                                      refused("-p", "test_iters", "2")]}
    cache = work / "pooled"
    use_cache(cache)
    chapter = door.enter(FIGURE, PROFILE)
    ran, again = (pool.run([chapter], requested=2) for _ in range(2))
    found["pool"] = {"workers": ran.workers, "computed": sorted(ran.computed),
                     "failed": list(ran.failed), "computed_again": len(again.computed)}
    found["holds"] = verdict()
    found["fails"] = verdict(train_iters=10)
    found["entries"] = len(list((cache / FIGURE).glob("residuals-seed*[0-9a-f]")))
    executed = execute.run(FIGURE, PROFILE)
    found["notebook"] = {"executed": executed.exists(), "numbers": numbers.chapter(FIGURE)}
    found["bundle"] = bundle_steps(work, cache)
    found["published"] = json.loads(published.publish_numbers(PROFILE).read_text())
    params = door.enter(FIGURE, PROFILE).params
    found["fingerprint"] = [fingerprint.chapter_fingerprint(FIGURE, params)]
    use_cache(work / "one-worker")
    door.enter(FIGURE, PROFILE).collect()
    found["fingerprint"].append(fingerprint.chapter_fingerprint(FIGURE, params))
    return found


if __name__ == "__main__":
    observed = main(Path(sys.argv[1]))
    print("\n" + json.dumps(observed, default=repr))
