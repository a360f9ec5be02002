"""Results do not depend on the job pool: a chapter's smoke jobs computed by the book's pool
(:func:`i2o.compute.pool.run`, submitit's local processes) with 1 and with 2 processes, into two
empty results caches, have the same fingerprints
(:func:`i2o.provenance.fingerprint.fingerprint`)."""

from __future__ import annotations

import pytest

from i2o.compute import door, pool
from i2o.provenance import fingerprint

#: The chapter computed twice: affine's smoke jobs, 5 tasks of under a second each, so that the
#: test costs the pool's process starts (about 35 s on two idle cores).
FIGURE = "affine"


def _computed_by_the_pool(workers: int) -> dict:
    """``FIGURE``'s smoke jobs computed by the pool in ``workers`` processes into the results
    cache (empty); its fingerprint."""
    chapter = door.enter(FIGURE, "smoke")
    jobs = chapter.jobs()
    assert not any(job.is_cached() for job in jobs)
    done = pool.run([chapter], requested=workers, executor="local")
    assert done.workers == workers and not done.failed
    assert sorted(done.computed) == sorted(pool.entry_name(job) for job in jobs)
    return fingerprint.fingerprint([FIGURE], profile="smoke")["chapters"][FIGURE]


@pytest.mark.slow
def test_fingerprints_are_the_same_with_1_and_2_pool_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("I2O_PROGRESS", "0")
    found = {}
    for workers in (1, 2):
        monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / f"results-{workers}"))
        found[workers] = _computed_by_the_pool(workers)
    one, two = found[1], found[2]
    assert not one["missing"] and not two["missing"]
    assert one["digest"] is not None and len(one["entries"]) == len(door.enter(
        FIGURE, "smoke").jobs())
    differ = sorted(name for name in one["entries"] if one["entries"][name] !=
                    two["entries"].get(name))
    assert not differ, f"entries that depend on the pool's size: {differ}"
    assert one["digest"] == two["digest"]
