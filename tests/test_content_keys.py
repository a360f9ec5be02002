"""Keys by content (:func:`i2o.compute.cache_key.module_source_hash`) and the move of a cache and
of the published digests from the keys of earlier schemes to them (:mod:`i2o.provenance.rekey`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_keys import _package
from toy_jobs import toy

from i2o.book import published
from i2o.compute import cache_entries, cache_key, import_graph, profiles
from i2o.provenance import fingerprint, rekey

PACKAGE = import_graph.PACKAGE_DIR
STABILITY = "i2o.chapters.stability.jobs"


def _copy(tmp_path: Path, name: str = "i2o") -> Path:
    root = tmp_path / name / "i2o"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_moving_the_broyden_solver_to_another_room_changes_no_key_and_a_byte_of_it_does(
        tmp_path):
    """The solver moves from ``deq/`` to a new room ``solvers/``; its importer and its own
    relative imports are rewritten to the new place. The content key of a stability job is the
    same, its located key (what keys held before) is not; one changed byte of the moved solver
    changes the content key."""
    before_root, after_root = _copy(tmp_path, "before"), _copy(tmp_path, "after")
    moved = after_root / "solvers" / "broyden.py"
    moved.parent.mkdir()
    (moved.parent / "__init__.py").write_text('"""Solvers."""\n')
    text = (after_root / "deq" / "broyden.py").read_text()
    assert "from .history import" in text and "from .spec import" in text
    moved.write_text(text.replace("from .", "from i2o.deq."))
    (after_root / "deq" / "broyden.py").unlink()
    solve = after_root / "deq" / "solve.py"
    assert "from .broyden import broyden" in solve.read_text()
    solve.write_text(solve.read_text().replace("from .broyden import broyden",
                                               "from i2o.solvers.broyden import broyden"))
    assert "i2o.solvers.broyden" in cache_key.dependencies(STABILITY, after_root)
    assert "i2o.deq.broyden" in cache_key.dependencies(STABILITY, before_root)

    content = cache_key.module_source_hash(STABILITY, before_root)
    assert cache_key.module_source_hash(STABILITY, after_root) == content
    assert rekey.located_source_hash(STABILITY, after_root) != \
        rekey.located_source_hash(STABILITY, before_root)
    assert "spec.max_iter - 1" in moved.read_text()
    moved.write_text(moved.read_text().replace("spec.max_iter - 1", "spec.max_iter - 2", 1))
    assert cache_key.module_source_hash(STABILITY, after_root) != content


def test_an_import_rebound_to_other_code_changes_the_key_and_a_rename_of_a_module_does_not(
        tmp_path):
    """A module named like none of the cache machinery (``cache_key.CACHE_MACHINERY``, whose
    closure is not followed) binds ``f`` first from one module and then from another."""
    files = {"low_one.py": "def f():\n    return 1\n", "low_two.py": "def f():\n    return 2\n",
             "work.py": "from i2o.low_one import f\nfrom i2o import low_two\n"
                       "VALUE = f() + low_two.f()\n"}
    first = _package(tmp_path / "a", files)
    rebound = _package(tmp_path / "b", {
        **files, "work.py": files["work.py"].replace("low_one import f", "low_two import f")})
    renamed = _package(tmp_path / "c", {
        "other_one.py": files["low_one.py"], "low_two.py": files["low_two.py"],
        "work.py": files["work.py"].replace("i2o.low_one", "i2o.other_one")})
    key = cache_key.module_source_hash("i2o.work", first)
    assert cache_key.module_source_hash("i2o.work", rebound) != key
    assert cache_key.module_source_hash("i2o.work", renamed) == key
    assert rekey.located_source_hash("i2o.work", renamed) != \
        rekey.located_source_hash("i2o.work", first)


def test_content_of_cuts_i2o_imports_out_and_keeps_the_others(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import numpy as np\nfrom i2o.deq.broyden import (broyden,  # solver\n"
                    "    make_stack as stack)\nfrom .spec import SolverSpec\n\n\n"
                    "def f():\n    import i2o.deq.solve\n    return np\n")
    assert cache_key.content_of(path).decode().splitlines() == [
        "import numpy as np", "def f():", "    return np"]
    assert cache_key.content_of(path, inside=False).decode().splitlines()[1] == \
        "from .spec import SolverSpec"
    assert "from i2o.deq.broyden" in cache_key.code_of(path).decode()
    assert cache_key.bound_names_content_of(path).decode().splitlines() == [
        "import numpy as np", "import broyden, stack", "import SolverSpec", "def f():",
        "    import i2o", "    return np"]  # the scheme before: the names, grouped and ordered


def test_moving_a_module_imported_beside_another_changes_no_key(tmp_path):
    """``from i2o import low, mid`` becomes two imports in another order when ``low`` moves to a
    room of its own: the content key is the same, the key of the scheme before (imports read as
    their names, grouped and ordered as written) is not, which ``rekey`` moves."""
    files = {"low.py": "def f():\n    return 1\n", "mid.py": "def g():\n    return 2\n",
             "work.py": "from i2o import low, mid\nVALUE = low.f() + mid.g()\n"}
    before = _package(tmp_path / "a", files)
    after = _package(tmp_path / "b", {
        "base/__init__.py": "", "base/low.py": files["low.py"], "mid.py": files["mid.py"],
        "work.py": "from i2o import mid\nfrom i2o.base import low\n"
                   "VALUE = low.f() + mid.g()\n"})
    assert cache_key.module_source_hash("i2o.work", after) == \
        cache_key.module_source_hash("i2o.work", before)
    assert rekey.bound_names_source_hash("i2o.work", after) != \
        rekey.bound_names_source_hash("i2o.work", before)
    changed = _package(tmp_path / "c", {**files, "low.py": "def f():\n    return 3\n"})
    assert cache_key.module_source_hash("i2o.work", changed) != \
        cache_key.module_source_hash("i2o.work", before)


def _no_jobs(figures):
    return iter(())


@pytest.mark.parametrize("scheme", rekey.EARLIER, ids=lambda scheme: scheme.__name__)
def test_rekey_moves_a_valid_entry_and_its_checkpoints_and_leaves_other_codes(
        tmp_path, monkeypatch, toy_computations, scheme):
    results = tmp_path / "results"
    monkeypatch.setenv("I2O_RESULTS_DIR", str(results))
    job, other = toy(1), toy(2)
    earlier = scheme(job.module)
    with monkeypatch.context() as patched:
        patched.setattr(cache_key, "module_source_hash", lambda module, *a, **k: earlier)
        job.run()
        other.run()
        old_entry = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
        old_checkpoints = job.checkpoints()
    assert not job.is_cached()  # an earlier scheme's keys are not content keys
    other_entry = next(p for p in (results / "toy").iterdir()
                       if p.name.startswith(other.name) and not p.name.endswith(".ckpt"))
    stale_meta = json.loads((other_entry / "meta.json").read_text())
    stale_meta["source"] = "0" * 64  # computed by some other code
    (other_entry / "meta.json").write_text(json.dumps(stale_meta))
    print_before = fingerprint.entry_fingerprint(old_entry)

    report = rekey.rekey(results, jobs=_no_jobs)
    assert (report.moved, report.other_code, report.current, report.checkpoints) == (1, 1, 0, 1)
    assert job.is_cached() and not other.is_cached() and other_entry.exists()
    new_entry = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
    assert not old_entry.exists() and not old_checkpoints.exists()
    assert fingerprint.entry_fingerprint(new_entry) == print_before
    assert cache_entries.recorded_key(json.loads((new_entry / "meta.json").read_text())) \
        .startswith(new_entry.name.rsplit("-", 1)[1])
    job.run()
    assert toy_computations["toy/residuals-seed1"] == 1  # read, not computed again
    again = rekey.rekey(results, jobs=_no_jobs)
    assert (again.moved, again.current, again.other_code) == (0, 1, 1)


def _computed_under_located_keys(tmp_path, monkeypatch, seed):
    """A toy job run into a fresh results folder with the keys of located code (before content
    keys): (the results folder, the job, its entry there)."""
    results = tmp_path / "results"
    monkeypatch.setenv("I2O_RESULTS_DIR", str(results))
    job = toy(seed)
    with monkeypatch.context() as patched:
        patched.setattr(cache_key, "module_source_hash", rekey.located_source_hash)
        job.run()
        entry = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
    return results, job, entry


def test_rekey_finishes_a_move_interrupted_after_the_record_was_rewritten(
        tmp_path, monkeypatch, toy_computations):
    results, job, entry = _computed_under_located_keys(tmp_path, monkeypatch, 4)
    meta = json.loads((entry / "meta.json").read_text())
    meta["source"] = cache_key.module_source_hash(job.module)  # rewritten, then interrupted
    (entry / "meta.json").write_text(json.dumps(meta))
    assert not job.is_cached()
    assert rekey.rekey(results, jobs=_no_jobs).moved == 1
    assert job.is_cached() and toy_computations["toy/residuals-seed4"] == 1


def test_rekey_verify_recomputes_a_moved_entry_and_compares_its_fingerprint(
        tmp_path, monkeypatch, toy_computations):
    results, job, _ = _computed_under_located_keys(tmp_path, monkeypatch, 5)
    moved = rekey.rekey(results, jobs=_no_jobs).moved_to
    assert rekey.verify(moved, 1, jobs=lambda figures: iter([job])) == [
        (f"toy/{moved[0].name}", True)]
    assert toy_computations["toy/residuals-seed5"] == 2  # computed again, in a scratch folder
    target = moved[0] / "arrays.npz"
    flat = dict(np.load(target))
    flat["residuals"] = flat["residuals"] + 1.0
    np.savez(target, **flat)
    assert rekey.verify(moved, 1, jobs=lambda figures: iter([job]))[0][1] is False


def test_rekey_rewrites_the_published_digests_current_under_located_keys_and_not_stale_ones(
        tmp_path):
    figure, profile = "affine", "smoke"
    params = profiles.resolve(figure, profile, replicate=0)
    claims = f"{profiles.entry(figure)['package']}.claims"
    located_keys = rekey._entry_names_digest(figure, params, rekey.located_source_hash)
    summary = {"profile": profile, "chapters": {"affine": {"value": "N ≤ 60"}},
               "digests": {figure: {"keys": {"0": located_keys, "1": "f" * 64},
                                    "claims_code": rekey.located_source_hash(claims)}}}
    (tmp_path / f"numbers-{profile}.json").write_text(
        json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    (tmp_path / "timings.json").write_text("[]")  # a published file without digests
    said = rekey.rekey_published(tmp_path)
    assert said == [f"numbers-{profile}.json {figure}: claims code rekeyed, keys r0 rekeyed, "
                    "keys r1 stale, left"]
    text = (tmp_path / f"numbers-{profile}.json").read_text()
    assert "N ≤ 60" in text and text.index('"profile"') < text.index('"chapters"')  # as written
    digests = json.loads(text)["digests"][figure]
    assert digests["keys"] == {"0": published.keys_digest(figure, profile, 0), "1": "f" * 64}
    assert digests["claims_code"] == published.claims_code_digest(figure)
    assert rekey.rekey_published(tmp_path) == [
        f"numbers-{profile}.json {figure}: keys r1 stale, left"]


def test_the_rekey_command_refuses_a_negative_sample_before_touching_the_cache(capsys):
    assert rekey.main(["--verify", "-1"]) == 2
    assert "--verify must be ≥ 0; got -1" in capsys.readouterr().err


def test_the_verdict_code_digest_does_not_follow_the_pool_and_follows_the_rule(tmp_path):
    """A code edit of the pool (which decides where jobs run, never their numbers) leaves the
    digest of a chapter's claims code (as :func:`i2o.book.published.claims_code_digest` takes
    it) unchanged, though the claims module reaches the pool through ``compute.chapter``; one of
    the book's rule changes it."""
    before, after = _copy(tmp_path, "before"), _copy(tmp_path, "after")
    claims = "i2o.chapters.stability.claims"
    assert "i2o.compute.pool" in cache_key.dependencies(claims, before)
    digest = cache_key.module_source_hash(claims, before, also_stop=cache_key.SCHEDULING)
    pool = after / "compute" / "pool.py"
    pool.write_text(pool.read_text() + "\nEDITED = 1\n")
    assert cache_key.module_source_hash(claims, after, also_stop=cache_key.SCHEDULING) == digest
    assert cache_key.module_source_hash(claims, after) != cache_key.module_source_hash(
        claims, before)
    rule = after / "verdicts" / "rule.py"
    rule.write_text(rule.read_text() + "\nEDITED = 1\n")
    assert cache_key.module_source_hash(claims, after, also_stop=cache_key.SCHEDULING) != digest
