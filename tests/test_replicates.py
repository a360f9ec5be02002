"""The replicate mapping (i2o.base.replicates) and every chapter's use of it: replicate 0 keeps
every seed, replicate r > 0 redraws each of them, and no two (seed, replicate) pairs share a seed.
Budget: < 2 s (job lists only; nothing is trained)."""

from __future__ import annotations

import pytest

from i2o.base import replicates
from i2o.chapters.deq_gaps import runs as deq_gaps
from i2o.chapters.meta import runs as meta
from i2o.chapters.separation import runs as separation
from i2o.chapters.stability import runs as stability
from i2o.chapters.stability.jobs import job_name
from i2o.compute import cache_key, profiles


def test_replicate_zero_keeps_every_seed():
    for base in (0, 1, 7, 12345, 2**32 - 1):
        assert replicates.seed(base, 0) == base
    assert replicates.seeds([3, 1, 2], 0) == [3, 1, 2]
    assert replicates.suffix(0) == ""


def test_other_replicates_give_distinct_reproducible_seeds_in_every_generator_range():
    bases, reps = range(64), range(1, 11)
    replicates.check_distinct(bases, [0, *reps])
    drawn = {replicates.seed(b, r) for b in bases for r in reps}
    assert len(drawn) == 64 * 10
    assert all(replicates.OFFSET <= s < 2**31 for s in drawn)  # above configured seeds, int32-safe
    assert replicates.seed(5, 2) == replicates.seed(5, 2)
    assert replicates.seed(5, 2) != replicates.seed(5, 3) != replicates.seed(6, 2)
    assert replicates.suffix(2) == "-r2"


def test_collisions_are_detected(monkeypatch):
    monkeypatch.setattr(replicates, "seed", lambda base, r: 7)
    with pytest.raises(ValueError, match="collision"):
        replicates.check_distinct([0, 1], [1])


@pytest.mark.parametrize("base, replicate", [(-1, 0), (0, -2), (1.5, 1), (True, 1), (0, "1")])
def test_bad_seeds_and_replicates_are_refused(base, replicate):
    with pytest.raises(ValueError, match="integer ≥ 0"):
        replicates.seed(base, replicate)


def test_every_chapter_has_a_replicate_parameter_that_is_validated():
    for figure in profiles.figures():
        for profile in profiles.PROFILES:
            assert profiles.resolve(figure, profile)["replicate"] == 0
        assert profiles.resolve(figure, "smoke", replicate=3)["replicate"] == 3
        with pytest.raises(profiles.ParameterError, match="'replicate'"):
            profiles.resolve(figure, "smoke", replicate=-1)


def test_stability_jobs_redraw_training_seeds_and_data_subsets():
    at = {r: stability.jobs(profiles.resolve("stability", "smoke", replicate=r, seeds=[0, 1]))
          for r in (0, 1, 2)}
    for r, jobs in at.items():
        for job in jobs:
            assert job.replicate == r
            assert job.name == job_name(job.seed, job.arm, job.train_iter, r)
            assert job.name.endswith(f"seed{job.seed}{replicates.suffix(r)}")
    trained = {r: {job.settings().seed for job in jobs} for r, jobs in at.items()}
    assert trained[0] == {0, 1}
    assert trained[1] == set(replicates.seeds([0, 1], 1))
    assert not trained[1] & trained[0] and not trained[1] & trained[2]
    keys = [cache_key.key(job.figure, job.name, job.key(), module=job.module)
            for jobs in at.values() for job in jobs]
    assert len(set(keys)) == len(keys)


def test_deq_gaps_jobs_redraw_training_seed_and_carry_the_replicate():
    zero = deq_gaps.build_jobs(profiles.resolve("deq_gaps", "smoke"))
    one = deq_gaps.build_jobs(profiles.resolve("deq_gaps", "smoke", replicate=1))
    assert zero.classification[0].seed == 0 and zero.language[0].seed == 0 and zero.deq.seed == 0
    assert one.classification[0].seed == replicates.seed(0, 1) == one.language[0].seed \
        == one.elder.seed
    listed = deq_gaps.jobs(profiles.resolve("deq_gaps", "smoke", replicate=1))
    # the bigram baseline draws nothing (its text and windows are the first ones): one entry for
    # every replicate; every other job carries the replicate
    drawn = [job for job in listed if job.name != "baseline-bigram"]
    assert len(drawn) == len(listed) - 1 and all(job.replicate == 1 for job in drawn)
    bigram = [job for job in listed if job.name == "baseline-bigram"]
    assert bigram == [zero.bigram] and not hasattr(zero.bigram, "replicate")
    assert one.pixels[0].seed == one.classification[0].seed  # its subset is the classifier's


def test_meta_models_and_test_tasks_are_redrawn():
    zero, one = (profiles.resolve("meta", "smoke", replicate=r) for r in (0, 1))
    seeds = {r: {model.seed for model in meta.all_models(p)} for r, p in ((0, zero), (1, one))}
    assert seeds[0] <= set(zero["fig4_seeds"]) | {zero["seed"]}
    assert not seeds[0] & seeds[1]
    assert meta.tasks_seed(zero) == zero["test_seed"] != meta.tasks_seed(one)


def test_separation_models_are_redrawn():
    zero, one = (profiles.resolve("separation", "smoke", replicate=r) for r in (0, 1))
    assert separation.model_seeds(zero) == list(zero["seeds"])
    assert not set(separation.model_seeds(one)) & set(zero["seeds"])
