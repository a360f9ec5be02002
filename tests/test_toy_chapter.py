"""The toy chapter (``tests/toy_chapter``) end to end, in a copy of the package.

The copy is ``src/i2o`` with the toy chapter added as ``i2o.chapters.toy`` (its manifest entry,
``chapter.yaml``, with it), as a contributor adds a chapter: no file outside the chapter's
package and its notebook is touched. One subprocess whose
``PYTHONPATH`` is the copy runs ``tests/toy_end_to_end.py``: door → pool (2 workers) → cache →
claims → prose → notebook → bundle export and import → publish → fingerprint, every cache and
build folder under ``tmp_path``; this test compares what it observed with what is expected.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from i2o.base import runtime

TESTS = Path(__file__).resolve().parent
TOY = TESTS / "toy_chapter"
SEEDS = 3  # the smoke profile's seeds
HOLDS = ("Iterating longer at test time than at training helps: the iteration had not "
         "converged at the training number of iterations.")
FAILS = ("Iterating longer at test time than at training does not help: the iteration had "
         "already converged at the training number of iterations.")


def package_with_toy(root: Path) -> Path:
    """A copy of ``src/i2o`` under ``root/src`` with the toy chapter's package (manifest entry
    included) and the toy notebook at ``root/book``; returns ``root/src``."""
    source = root / "src"
    package = source / "i2o"
    shutil.copytree(TESTS.parent / "src" / "i2o", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TOY, package / "chapters" / "toy",
                    ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    compileall.compile_dir(package, quiet=1)  # once here, not in each of its processes
    (root / "book").mkdir()
    shutil.copy(TOY / "toy.ipynb", root / "book" / "toy.ipynb")
    return source


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("toy-project")
    source = package_with_toy(root)
    work = root / "work"
    work.mkdir()
    # started with the numerics pins, as every computing process of the book is (a notebook's
    # kernel, a pool worker): its one-worker run computes in this process
    env = {**os.environ, **runtime.numerics_env(), "PYTHONPATH": str(source),
           "I2O_ROOT": str(root), "I2O_BUILD_DIR": str(root / "_build"),
           "I2O_RESULTS_DIR": str(work / "unused")}
    done = subprocess.run([sys.executable, str(TESTS / "toy_end_to_end.py"), str(work)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_toy_chapter_keeps_the_contract_of_every_chapter(observed):
    assert set(observed["contract"].values()) == {"ok"}, observed["contract"]
    assert len(observed["contract"]) == 4


def test_the_door_refuses_a_wrong_parameter_naming_it(observed):
    schema, rule = observed["door"]
    assert schema["status"] == 2 and schema["message"].startswith(
        "error: parameter 'contraction' of figure 'toy' must be a number ≥ 0.01 and ≤ 0.99; "
        "got 1.5")
    assert rule["status"] == 2 and rule["message"] == (
        "error: parameter 'test_iters' of figure 'toy' must be > train_iters = 2 (the claim "
        "compares the two); got 2")


def test_the_pool_computes_every_job_once_and_the_cache_serves_them(observed):
    assert observed["pool"]["workers"] == 2 and not observed["pool"]["failed"]
    assert [name.split("/")[-1].rsplit("-", 1)[0] for name in observed["pool"]["computed"]] \
        == [f"residuals-seed{seed}" for seed in range(SEEDS)]
    assert observed["pool"]["computed_again"] == 0
    assert observed["entries"] == SEEDS
    for case in ("holds", "fails"):
        assert (observed[case]["jobs"], observed[case]["computed"]) == (SEEDS, 0)


def test_the_verdict_holds_or_fails_and_the_prose_follows_it(observed):
    assert observed["holds"]["holds"] == [True] and observed["holds"]["prose"] == HOLDS
    assert observed["fails"]["holds"] == [False] and observed["fails"]["prose"] == FAILS


def test_the_notebook_publishes_its_numbers_and_claims(observed):
    chapter = observed["notebook"]["numbers"]
    assert observed["notebook"]["executed"] and chapter["profile"] == "smoke"
    assert set(chapter["numbers"]) == {"toy-train-residual", "toy-test-residual",
                                       "toy-mean-gain"}
    assert [row["holds"] for row in chapter["claims"]] == [True]
    published = observed["published"]
    assert published["profile"] == "smoke" and list(published["chapters"]) == ["toy"]
    assert published["chapters"]["toy"]["claims"] == chapter["claims"]
    assert published["bundles"]["toy"]["files"] == 2 * SEEDS


def test_a_bundle_carries_the_entries_into_a_fresh_cache(observed):
    bundle = observed["bundle"]
    assert (bundle["files"], bundle["missing"]) == (2 * SEEDS, [])
    assert (bundle["written"], bundle["current"], bundle["written_again"]) == (SEEDS, SEEDS, 0)
    assert bundle["same_files"]
    # an export that would leave entries out is refused, naming them
    assert bundle["partial_status"] == 2
    assert "are not computed yet" in bundle["partial_said"]
    assert "residuals-seed0-" in bundle["partial_said"]


def test_the_fingerprint_is_the_same_from_one_worker_and_from_two(observed):
    pooled, alone = observed["fingerprint"]
    assert pooled["missing"] == [] and len(pooled["entries"]) == SEEDS
    assert pooled["digest"] == alone["digest"] and pooled["entries"] == alone["entries"]


def test_an_interrupted_job_resumes_from_its_checkpoint():
    from toy_chapter.jobs import CHECKPOINT_EVERY, ResidualJob

    job = ResidualJob(seed=0, replicate=0, dim=4, contraction=0.5, test_iters=12)
    fresh = job.compute()["residuals"]
    z, saved = job.load()
    assert len(saved) == 2 * CHECKPOINT_EVERY  # the last state saved before the end
    job.save(z, [-1.0] * len(saved))  # marked: a resumed run keeps what its checkpoint holds
    resumed = job.compute()["residuals"]
    assert (resumed[:len(saved)] == -1.0).all()
    assert np.array_equal(resumed[len(saved):], fresh[len(saved):])
