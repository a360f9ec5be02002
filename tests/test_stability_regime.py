"""Training to the regime (:class:`i2o.train.loop.UntilFit`): a run stops ``extra_steps`` after
its first check that fits, within its cap; a run that never fits is the fixed-budget run; checks
leave the run's numbers alone; a resumed run ends where an uninterrupted one does. And the MDEQ
classifier's rule (``fit_every``, ``extra_epochs``) on top of it. Budget: ~3 s."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from i2o.deq import SolverSpec
from i2o.train import TrainSettings, build_and_train
from i2o.train.classifier import epochs_used
from i2o.train.loop import Plan, UntilFit, train_steps
from i2o.train.schedule import annealed_lr

X = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
Y = X @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(4, 1)


def _step_loss(model):
    def step_loss(step):
        index = torch.randint(0, 64, (8,))  # torch's global RNG: a check must not move it
        return (model(X[index]).squeeze(1) - Y[index]).pow(2).mean(), {}
    return step_loss


PLAN = Plan(steps=60, lr=0.05, lr_min=1e-4, clip=0.0, checkpoint_every=7, seed=0)


def _fits_after(calls: int, counter: list[int]):
    """A criterion met from its ``calls``-th call on; it draws from torch's RNG on purpose."""
    def criterion():
        counter.append(1)
        torch.rand(3)
        return len(counter) >= calls, float(len(counter))
    return criterion


def test_training_stops_extra_steps_after_the_first_fit_and_anneals_to_lr_min():
    model, calls = _model(), []
    torch.manual_seed(1)
    until = UntilFit(_fits_after(3, calls), check_every=5, extra_steps=10)
    history = train_steps(model, _step_loss(model), PLAN, until=until)
    assert history["fit_step"] == [15] and history["fit_check_step"] == [5, 10, 15]
    assert len(history["loss"]) == 25  # 15 + 10 extra, well below the cap of 60
    assert history["lr"][-1] == pytest.approx(annealed_lr(24, 15, 10, history["lr"][15], 1e-4))
    assert history["lr"][-1] < history["lr"][15] and len(calls) == 3


def test_the_cap_bounds_the_extra_steps_and_a_model_that_never_fits_trains_the_cap():
    model = _model()
    until = UntilFit(_fits_after(11, []), check_every=5, extra_steps=30)
    history = train_steps(model, _step_loss(model), PLAN, until=until)
    assert history["fit_step"] == [55] and len(history["loss"]) == 60

    torch.manual_seed(1)
    never, checked = _model(), []
    lost = train_steps(never, _step_loss(never), PLAN,
                       until=UntilFit(_fits_after(10 ** 6, checked), 5, 10))
    torch.manual_seed(1)
    fixed = _model()
    budget = train_steps(fixed, _step_loss(fixed), PLAN)
    assert "fit_step" not in lost and len(checked) == 12
    # checking draws from torch's RNG, yet the run is step for step the fixed-budget one
    assert lost["loss"] == budget["loss"] and lost["lr"] == budget["lr"]
    assert torch.equal(never.weight, fixed.weight)


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path):
    torch.manual_seed(1)
    whole = _model()
    reference = train_steps(whole, _step_loss(whole), PLAN,
                            until=UntilFit(_fits_after(2, []), 5, 12))

    class Stop(Exception):
        pass

    def kill(done):
        if done == 14:  # after the fit at step 10, between checkpoints 7 and 14
            raise Stop

    torch.manual_seed(1)
    first = _model()
    with pytest.raises(Stop):
        train_steps(first, _step_loss(first), PLAN, tmp_path, run={"id": 1},
                    until=UntilFit(_fits_after(2, []), 5, 12), on_step=kill)
    resumed = _model()
    history = train_steps(resumed, _step_loss(resumed), PLAN, tmp_path, run={"id": 1},
                          until=UntilFit(_fits_after(10 ** 6, []), 5, 12))
    assert history["fit_step"] == [10] and history["loss"] == reference["loss"]
    assert torch.equal(resumed.weight, whole.weight)


@pytest.mark.parametrize("field, value", [("check_every", 0), ("extra_steps", -1),
                                          ("check_every", 1.5)])
def test_bad_rules_are_refused(field, value):
    kwargs = {"criterion": lambda: (True, 1.0), "check_every": 2, "extra_steps": 0, field: value}
    with pytest.raises(ValueError, match=field):
        UntilFit(**kwargs)


def test_mdeq_classifier_trains_until_it_fits_then_extra_epochs():
    generator = torch.Generator().manual_seed(0)
    images, labels = torch.randn(16, 3, 32, 32, generator=generator), torch.arange(16) % 10
    from i2o.models import MICRO

    solver = SolverSpec(max_iter=3, tol=1e-3)
    common = dict(arm="ift", epochs=6, batch_size=8, pretrain_steps=0, forward=solver,
                  backward=solver, checkpoint_every=100, seed=0, fit_every=1, fit_batch=16)
    _, easy = build_and_train(MICRO, images, labels,
                              TrainSettings(**common, fit_accuracy=0.01, extra_epochs=2))
    assert easy["fit_step"] == [2] and epochs_used(easy, 2) == 3  # fits at epoch 1, +2 epochs
    _, hard = build_and_train(MICRO, images, labels,
                              TrainSettings(**common, fit_accuracy=1.0, extra_epochs=2))
    assert "fit_step" not in hard and epochs_used(hard, 2) == 6  # the cap
    assert len(hard["fit_check_score"]) == 6 and all(
        0 <= s <= 1 and math.isfinite(s) for s in hard["fit_check_score"])
    with pytest.raises(ValueError, match="fit_accuracy"):
        TrainSettings(**common, fit_accuracy=0.0)
