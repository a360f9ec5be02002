"""Jobs as values (:mod:`i2o.compute.job`): the cache key is the fields plus the source of the
import closure of the job's module (:mod:`i2o.compute.import_graph`), found from the code, never
listed."""

from __future__ import annotations

import dataclasses
import pickle
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from toy_jobs import toy

from i2o.compute import cache_key, import_graph
from i2o.compute.job import Job

PACKAGE = import_graph.PACKAGE_DIR


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path / "results"


def test_a_job_is_computed_once_and_keyed_by_its_fields(cache, toy_computations):
    job = toy(3)
    assert not job.is_cached()
    first, second = job.run(), job.run()
    assert first["residuals"].shape == (13,) and (first["residuals"] == second["residuals"]).all()
    assert toy_computations == {"toy/residuals-seed3": 1} and job.is_cached()
    assert not toy(3, test_iters=13).is_cached()  # another field value, another entry
    assert job.key() == {"seed": 3, "replicate": 0, "dim": 4, "contraction": 0.5,
                         "test_iters": 12}
    assert job.checkpoints().is_dir()


def test_a_job_is_a_frozen_picklable_value():
    job = toy(2)
    assert pickle.loads(pickle.dumps(job)) == job
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.seed = 4


def test_the_key_covers_the_module_that_defines_the_job():
    assert toy(1).module == "toy_chapter.jobs"
    assert cache_key.key("f", "n", {}, module="i2o.compute.job") != cache_key.key("f", "n", {})
    # a module outside i2o (the toy chapter under tests/, a researcher's own job): its file and
    # the closure of the i2o modules it imports
    outside = cache_key.module_source_hash("toy_chapter.jobs")
    assert outside != cache_key.module_source_hash("i2o.compute.job")


def test_the_closure_follows_imports_and_stops_at_unrelated_modules():
    closure = import_graph.closure("i2o.compute.job")
    assert {"i2o.compute.job", "i2o.compute.results", "i2o.base.runtime",
            "i2o.compute.import_graph"} <= set(closure)
    assert "i2o.chapters.meta.maml" not in closure and "i2o.compute.sweep" not in closure
    assert import_graph.closure("i2o.compute.job", stop=frozenset(
        {"i2o.compute.results", "i2o.compute.cache_entries"})) == ("i2o.compute.job",)


def test_a_job_depends_on_what_computes_it_not_on_the_cache_machinery():
    found = cache_key.dependencies("i2o.chapters.stability.jobs")
    assert {"i2o.chapters.stability.jobs", "i2o.deq.broyden", "i2o.train.loop"} <= set(found)
    assert not cache_key.CACHE_MACHINERY & set(found)
    with pytest.raises(ValueError, match="not a module of i2o"):
        import_graph.closure("i2o.no_such_module")


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n_EDITED = True\n")  # code: comments are in no key


def test_editing_an_imported_module_changes_the_key_and_an_unrelated_chapter_does_not(tmp_path):
    """In a temporary copy of the package: a stability job's key hashes the closure of the
    module that defines it. An edit to a module it imports (the Broyden solver) changes that
    hash; an edit to another chapter (meta's MAML) leaves it as it was."""
    root = tmp_path / "i2o"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    module = "i2o.chapters.stability.jobs"

    def key() -> str:
        return cache_key.module_source_hash(module, root)

    before = key()
    assert "i2o.deq.broyden" in import_graph.closure(module, root)
    _edit(root / "chapters" / "meta" / "maml.py")
    _edit(root / "compute" / "results.py")  # the cache's plumbing
    assert key() == before
    _edit(root / "deq" / "broyden.py")
    assert key() != before


def test_the_graph_sees_function_level_and_relative_imports():
    assert "i2o.chapters.affine.sweeps" in import_graph.graph()["i2o.chapters.affine.jobs"]
    assert "i2o.base.lineage" in import_graph.graph()["i2o.compute.profiles"]


def test_run_jobs_reads_every_job_and_counts_what_it_computed(cache, toy_computations):
    from i2o.compute.chapter import run_jobs

    jobs = [toy(4), toy(5)]
    found, cost = run_jobs("toy", jobs)
    assert [result["residuals"][0] for result in found] == [1.0, 1.0]  # z_0 − z* relative to itself
    assert (cost.jobs, cost.computed) == (2, 2) and sum(toy_computations.values()) == 2
    _, again = run_jobs("toy", [*jobs, toy(6)])
    assert (again.jobs, again.computed) == (3, 1)
    assert "1 computed, 2 read from the results cache" in again.text()


def test_a_job_class_without_compute_is_refused_when_it_is_built():
    # a deliberately incomplete job class: the toy chapter's is complete
    @dataclasses.dataclass(frozen=True)
    class Unfinished(Job):
        figure: ClassVar[str] = "test-job"

        @property
        def name(self) -> str:
            return "unfinished"

    with pytest.raises(TypeError, match="compute"):
        Unfinished()
    assert toy(1).name == "residuals-seed1"  # a complete one is built


@dataclasses.dataclass(frozen=True)
class _Evaluated(Job):
    """A job whose ``size`` changes only what it evaluates."""

    figure: ClassVar[str] = "toy"
    evaluation_fields: ClassVar[tuple[str, ...]] = ("size",)
    seed: int
    size: int

    @property
    def name(self) -> str:
        return "evaluated"

    def compute(self, progress=None):
        return {"size": self.size}


def test_jobs_that_differ_only_in_what_they_evaluate_share_their_training(cache):
    small, large = _Evaluated(seed=0, size=10), _Evaluated(seed=0, size=1000)
    assert small.key() != large.key()  # two results…
    assert small.checkpoints() == large.checkpoints()  # …of one training
    assert _Evaluated(seed=1, size=10).checkpoints() != small.checkpoints()
    assert small.training_key() == {"seed": 0}

    @dataclasses.dataclass(frozen=True)
    class Misnamed(_Evaluated):
        evaluation_fields: ClassVar[tuple[str, ...]] = ("sise",)

    with pytest.raises(TypeError, match="sise"):
        Misnamed(seed=0, size=1).checkpoints()


def test_a_larger_evaluation_set_reuses_a_finished_training(cache, data_dir, monkeypatch):
    from i2o.chapters.deq_gaps.inverse import InverseJob
    from i2o.deq import SolverSpec

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Evaluated(InverseJob):
        evaluation_fields: ClassVar[tuple[str, ...]] = ("grid", "eval_size")

    monkeypatch.setenv("I2O_DATA_DIR", str(data_dir))
    spec = SolverSpec(method="fixed_point", max_iter=2, tol=0.0)
    job = Evaluated(width=4, depth=2, forward_spec=spec, backward_spec=spec, steps=2,
                     batch_size=4, crop=8, grid=(1, 2, 3), train_size=20, eval_size=4)
    first = job.compute(progress=False)
    larger = dataclasses.replace(job, eval_size=6)
    second = larger.compute(progress=False)
    # the training was read back, not rerun: the very history, wall-clock seconds included
    assert list(second["history"]["seconds"]) == list(first["history"]["seconds"])
    assert second["test"]["metrics"]["neg_psnr"].shape[0] == 6
    assert (second["test"]["metrics"]["neg_psnr"][:4] == first["test"]["metrics"]["neg_psnr"]).all()


@dataclasses.dataclass(frozen=True)
class _Resuming(Job):
    """A job that resumes from a torch checkpoint, or a meta (``.npz``) one with ``npz``."""

    figure: ClassVar[str] = "toy"
    npz: bool = False
    fail_after_loading: bool = False

    @property
    def name(self) -> str:
        return "resuming"

    def compute(self, progress=None):
        directory = self.checkpoints()
        if self.npz:
            import numpy as np

            from i2o.chapters.meta import checkpoint

            state = checkpoint.load(directory, {"w": np.zeros(2)})
        else:
            from i2o.train.checkpoint import load_checkpoint

            state = load_checkpoint(directory)
        if self.fail_after_loading:
            raise RuntimeError("the job's own failure")
        return {"resumed": state is not None}


@pytest.mark.parametrize("npz, filename", [(False, "last.pt"), (True, "state.npz")])
def test_a_damaged_checkpoint_is_named_set_aside_and_the_job_computed_without_it(
        cache, capsys, npz, filename):
    job = _Resuming(npz=npz)
    damaged = job.checkpoints() / filename
    damaged.write_bytes(b"PK\x03\x04 not a whole archive")
    assert job.run() == {"resumed": False}
    said = capsys.readouterr().err
    assert str(damaged) in said and "cannot be read" in said and "computing without it" in said
    assert not damaged.exists()
    (moved,) = (cache / "_damaged" / "toy" / job.checkpoints().name).glob(f"{filename}.*")
    assert moved.read_bytes() == b"PK\x03\x04 not a whole archive"
    assert job.run() == {"resumed": False}  # stored: read back, nothing said
    assert capsys.readouterr().err == ""


def test_an_error_outside_the_checkpoint_readers_is_raised_and_moves_nothing(cache):
    job = _Resuming(fail_after_loading=True)
    (job.checkpoints() / "last.pt").write_bytes(b"garbage")
    with pytest.raises(Exception) as raised:  # the damaged file is set aside first…
        job.run()
    assert "the job's own failure" in str(raised.value)  # …then the job's own error surfaces
    healthy = _Resuming(fail_after_loading=True, npz=True)
    with pytest.raises(RuntimeError, match="own failure"):
        healthy.run()
    assert not (cache / "_damaged" / "toy" / healthy.checkpoints().name).exists()
