"""The 'Test your own DEQ' chapter's jobs, claims and prose: the claims and the prose follow the
verdicts (doctored curves, no training); the chapter itself runs at smoke in tests/test_book.py."""

from __future__ import annotations

import pytest
from bank import diagnose_results

from i2o.chapters.diagnose import MODELS, claims, runs
from i2o.chapters.diagnose.jobs import MDEQJob, TorchDEQJob
from i2o.compute import import_graph, profiles
from i2o.compute.job import Job
from i2o.verdicts.prose import conclusions

results = diagnose_results


@pytest.mark.parametrize(("shift", "says"), [
    (+0.3, "More iterations than in training help it beyond the margin"),
    (-0.3, "They hurt it beyond the margin"),
])
def test_the_prose_follows_the_verdicts(shift, says):
    found = results(shift)
    table = claims.claims(found)
    assert len(table.rows) == 2 * len(claims.ROWS)
    assert table.facts["recommended"] == {m: found.diagnoses[m].recommendation.n for m in MODELS}
    text = conclusions(table, display=False)
    assert says in text and "It fits its training images" in text
    assert set(claims.numbers(found)) >= {"diagnose-torchdeq-rec", "diagnose-mdeq-more"}


def test_the_rows_are_the_diagnoses_rows_by_id():
    found = results(+0.3)
    table = claims.claims(found)
    own = found.diagnoses["mdeq"].claims("diagnose", "smoke", "mdeq_", "mdeq").rows
    assert [table[f"mdeq_{key}"] for key in claims.ROWS] == own
    assert {row.section for row in own} == {"mdeq"}
    assert table.rows == found.diagnoses["torchdeq"].claims(
        "diagnose", "smoke", "torchdeq_", "torchdeq").rows + own


def test_a_model_that_does_not_fit_gets_no_verdict():
    table = claims.claims(results(+0.3, fits=False))
    assert table["torchdeq_fit"].holds is None and table["torchdeq_help"].holds is None
    assert "does not fit its training images" in conclusions(table, display=False)


def test_jobs_and_grids_follow_the_parameters():
    params = profiles.resolve("diagnose", "smoke", replicate=2)
    jobs = runs.jobs(params)
    assert [job.name for job in jobs] == ["torchdeq-r2", "mdeq-r2"]
    torchdeq, mdeq = jobs
    assert isinstance(torchdeq, TorchDEQJob) and isinstance(mdeq, MDEQJob)
    assert all(isinstance(job, Job) and job.figure == "diagnose" for job in jobs)
    assert torchdeq.grid == tuple(range(1, 2 * params["td_train_iters"] + 1))
    assert torchdeq.train_iters == params["td_train_iters"]
    assert all(job.replicate == 2 for job in jobs)
    # a model's parameters enter its own key only
    assert "mdeq_lr" not in torchdeq.key() and "td_lr" not in mdeq.key()
    changed = runs.jobs(params.with_(td_lr=params["td_lr"] / 2))
    assert changed[0] != torchdeq and changed[1] == mdeq
    assert [job.name for job in runs.jobs(profiles.resolve("diagnose", "smoke"))] == list(MODELS)
    with pytest.raises(profiles.ParameterError, match="td_channels"):
        runs.check_params(profiles.resolve("diagnose", "smoke", td_channels=6))


def test_the_jobs_depend_on_what_trains_and_diagnoses_them():
    closure = set(import_graph.closure(TorchDEQJob.__module__))
    assert {"i2o.diagnose.measure", "i2o.diagnose.adapters", "i2o.chapters.diagnose.torchdeq_net",
            "i2o.train.classifier", "i2o.models.mdeq", "i2o.data.cifar10"} <= closure
    assert not {"i2o.verdicts.rule", "i2o.diagnose.run", "i2o.verdicts.gates"} & closure
    assert not {f"i2o.chapters.diagnose.{face}" for face in ("runs", "claims", "figures",
                                                             "prose")} & closure
