"""One door into every chapter (:mod:`i2o.compute.door`): parameters validated once, before any job
is listed; the jobs and the tasks a sweep submits come from the entered chapter."""

from __future__ import annotations

import pytest

from i2o.compute import door, profiles


def test_entering_validates_the_schema_then_the_chapters_rules():
    chapter = door.enter("stability", "smoke")
    assert chapter.params == profiles.resolve("stability", "smoke")
    assert chapter.figure == "stability" and chapter.jobs()
    with pytest.raises(profiles.ParameterError, match="'pretrain_steps' of figure 'stability'"):
        door.enter("stability", "smoke", pretrain_steps=100_000)  # the chapter's own rule
    with pytest.raises(profiles.ParameterError, match="unknown parameter"):
        door.enter("stability", "smoke", pretrain_step=1)  # the schema's
    with pytest.raises(profiles.ParameterError, match="no_such_figure"):
        door.enter("no_such_figure", "smoke")


def test_tasks_are_one_job_each_unless_the_chapter_batches_them():
    stability = door.enter("stability", "smoke")
    assert stability.tasks() == [(job,) for job in stability.jobs()]
    separation = door.enter("separation", "smoke")
    tasks = separation.tasks()
    assert [job for task in tasks for job in task] == separation.jobs()
    assert len(tasks) < len(separation.jobs())  # small models share a process


def test_the_notebooks_door_reads_its_namespace():
    chapter = door.enter_namespace("affine", {"profile": "smoke", "n_seeds": 3, "_": None})
    assert chapter.params["n_seeds"] == 3 and chapter.params.overridden == ("n_seeds",)
    with pytest.raises(profiles.ParameterError, match="'left_rank_out' of figure 'affine'"):
        door.enter_namespace("affine", {"profile": "smoke", "left_rank_out": 6})


@pytest.mark.parametrize("figure", profiles.figures())
def test_every_chapter_of_the_manifest_has_a_door_with_jobs(figure):
    assert door.enter(figure, "smoke").jobs()
