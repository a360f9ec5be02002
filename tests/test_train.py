"""i2o.train: schedule, optimiser, checkpoints, determinism, evaluation, kill-and-resume, step cost.
Budget: ~40 s at one thread on an idle machine (three short subprocesses: the killed training run,
its resumption, one step-cost measurement)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from i2o.deq import SolverSpec
from i2o.models import MICRO, MDEQClassifier
from i2o.train import (
    TrainSettings,
    build_and_train,
    cosine_lr,
    evaluate_iterations,
    load_checkpoint,
    make_optimizer,
    save_checkpoint,
)
from i2o.train.checkpoint import CHECKPOINT_NAME


def _data(n=32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 32, 32, generator=generator), torch.randint(0, 10, (n,),
                                                                         generator=generator)


def _settings(**changes):
    solver = SolverSpec(max_iter=5, tol=1e-3)
    base = dict(arm="ift", epochs=2, batch_size=16, pretrain_steps=1, forward=solver,
                backward=solver, checkpoint_every=1, seed=0)
    return TrainSettings(**{**base, **changes})


def test_cosine_schedule_starts_at_lr_and_ends_at_lr_min():
    assert cosine_lr(0, 100, 1e-3, 1e-6) == pytest.approx(1e-3)
    assert cosine_lr(50, 100, 1e-3, 1e-6) == pytest.approx((1e-3 + 1e-6) / 2)
    assert cosine_lr(100, 100, 1e-3, 1e-6) == pytest.approx(1e-6)
    values = [cosine_lr(t, 100, 1e-3, 1e-6) for t in range(101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_weight_decay_is_coupled_l2_not_decoupled():
    param = torch.nn.Parameter(torch.tensor([2.0]))
    optimizer = make_optimizer(torch.nn.Linear(1, 1), lr=0.1, weight_decay=0.5)
    optimizer.param_groups[0]["params"] = [param]
    param.grad = torch.zeros(1)
    optimizer.step()
    # coupled L2: the gradient becomes 0 + 0.5·2 = 1 and enters Adam's first moment (0.1 · 1);
    # decoupled (AdamW) decay would leave the moment at 0 (both move θ to 1.9 on this first step)
    assert param.item() == pytest.approx(1.9, abs=1e-6)
    assert optimizer.state[param]["exp_avg"].item() == pytest.approx(0.1 * 1.0, abs=1e-7)


def test_checkpoint_roundtrip_is_weights_only_and_leaves_no_temporary(tmp_path):
    state = {"model": {"w": torch.arange(3.0)}, "step": 7, "history": {"loss": [0.5, 0.25]},
             "rng_torch": torch.get_rng_state()}
    save_checkpoint(tmp_path, state)
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_NAME]
    back = load_checkpoint(tmp_path)
    assert back["step"] == 7 and back["history"] == {"loss": [0.5, 0.25]}
    torch.testing.assert_close(back["model"]["w"], torch.arange(3.0))
    assert load_checkpoint(tmp_path / "absent") is None
    torch.save({"code": object()}, tmp_path / CHECKPOINT_NAME)
    with pytest.raises(Exception, match="[Ww]eights only"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("arm", ["ift", "unrolled"])
def test_training_is_deterministic_and_seed_dependent(arm):
    x, y = _data()
    _, first = build_and_train(MICRO, x, y, _settings(arm=arm), progress=False, device="cpu")
    _, again = build_and_train(MICRO, x, y, _settings(arm=arm), progress=False, device="cpu")
    _, other = build_and_train(MICRO, x, y, _settings(arm=arm, seed=1), progress=False,
                               device="cpu")
    assert len(first["loss"]) == 4 and first["loss"] == again["loss"]
    assert first["loss"] != other["loss"]
    assert math.isnan(first["residual_rel"][0])  # the warm-up step solves nothing
    assert all(np.isfinite(first["residual_rel"][1:]))
    assert len(first["epoch_accuracy"]) == 2
    assert {"loss", "lr", "seconds", "correct", "accuracy", "residual_rel", "epoch_loss",
            "epoch_accuracy"} <= set(first)
    assert first["epoch_accuracy"][0] == sum(first["correct"][:2]) / 32


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    x, y = _data()
    build_and_train(MICRO, x, y, _settings(epochs=1), tmp_path, progress=False, device="cpu")
    with pytest.raises(ValueError, match="written by another run"):
        build_and_train(MICRO, x, y, _settings(epochs=1, arm="unrolled"), tmp_path,
                        progress=False, device="cpu")


def test_ift_and_unrolled_arms_take_different_steps():
    x, y = _data()
    _, ift = build_and_train(MICRO, x, y, _settings(arm="ift"), progress=False, device="cpu")
    _, unrolled = build_and_train(MICRO, x, y, _settings(arm="unrolled"), progress=False,
                                  device="cpu")
    assert ift["loss"][0] == unrolled["loss"][0]  # the warm-up step
    # the first DEQ step: the same forward pass (up to summation order in the solver) ...
    assert ift["loss"][1] == pytest.approx(unrolled["loss"][1], rel=1e-5)
    # ... but different gradients, hence different networks afterwards
    assert abs(ift["loss"][3] - unrolled["loss"][3]) > 1e-4


def test_shared_solve_evaluation_equals_one_solve_per_n():
    torch.manual_seed(0)
    model = MDEQClassifier(MICRO)
    x, y = _data(24, seed=1)
    iters = [0, 1, 3, 7, 12]
    shared = evaluate_iterations(model, x, y, iters, batch_size=10)
    separate = evaluate_iterations(model, x, y, iters, batch_size=10, shared_solve=False)
    np.testing.assert_array_equal(shared["accuracy"], separate["accuracy"])
    np.testing.assert_allclose(shared["residual_rel"], separate["residual_rel"], rtol=1e-5)
    assert shared["trace_rel"].shape == (13,)
    assert shared["residual_rel"][-1] < shared["residual_rel"][0]  # more steps, closer to z*
    with pytest.raises(ValueError, match="non-empty list of distinct integers"):
        evaluate_iterations(model, x, y, [])


def test_evaluation_goes_through_the_generic_sweep_and_matches_a_direct_solve():
    """evaluate_iterations (a reduction of i2o.deq.sweep_iterations) gives, for one N, the
    accuracy and batch residual of classifying the iterate a budget-N Broyden solve returns."""
    from i2o.deq import SolverSpec, solve

    torch.manual_seed(0)
    model = MDEQClassifier(MICRO).eval()
    x, y = _data(20, seed=2)
    out = evaluate_iterations(model, x, y, [5], batch_size=20)
    with torch.no_grad():
        f, injection, z0 = model.prepare(x)
        result = solve(lambda z: f(z, injection), z0,
                       SolverSpec(method="broyden", max_iter=5, tol=0.0, return_best=True))
        accuracy = float((model.classify(result.z).argmax(1) == y).double().mean())
    assert out["accuracy"][0] == pytest.approx(accuracy)
    assert out["residual_rel"][0] == pytest.approx(result.residual_rel, rel=1e-5)
    assert out["residual_abs"][0] == pytest.approx(result.residual_abs, rel=1e-5)


def test_bad_settings_are_rejected_before_training():
    with pytest.raises(ValueError, match="arm must be one of 'ift', 'unrolled'"):
        TrainSettings(arm="phantom")
    with pytest.raises(ValueError, match="forward.max_iter"):
        TrainSettings(forward=SolverSpec(max_iter=0))


_SCRIPT = """
import sys, time, torch
torch.set_num_threads(1)
from i2o.deq import SolverSpec
from i2o.models import MICRO
from i2o.train import TrainSettings, build_and_train
g = torch.Generator().manual_seed(0)
x, y = torch.randn(48, 3, 32, 32, generator=g), torch.randint(0, 10, (48,), generator=g)
solver = SolverSpec(max_iter=5, tol=1e-3)
settings = TrainSettings(arm=sys.argv[1], epochs=3, batch_size=16, pretrain_steps=2,
                         forward=solver, backward=solver, checkpoint_every=1, seed=3)
pause = float(sys.argv[4])
model, history = build_and_train(MICRO, x, y, settings, sys.argv[2], progress=False,
                                 device="cpu", on_step=lambda step: time.sleep(pause))
torch.save({"loss": history["loss"], "model": model.state_dict()}, sys.argv[3])
"""


def _run(script, arm, ckpt, out, pause):
    src = str(Path(__file__).parents[1] / "src")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": src}
    return subprocess.Popen([sys.executable, str(script), arm, str(ckpt), str(out), str(pause)],
                            env=env)


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["unrolled"])
def test_killed_run_resumes_to_the_same_numbers(tmp_path, arm):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    # the uninterrupted reference, in a subprocess with the same environment as the victim: this
    # process may have loaded its CPU kernels under other numerics pins than its children get
    reference = _run(script, arm, tmp_path / "ref-ckpt", tmp_path / "ref.pt", 0.0)
    assert reference.wait(timeout=600) == 0
    ref = torch.load(tmp_path / "ref.pt", weights_only=True)

    victim = _run(script, arm, tmp_path / "ckpt", tmp_path / "out.pt", 0.5)
    deadline = time.monotonic() + 600
    step = 0
    while step < 3 and time.monotonic() < deadline and victim.poll() is None:
        time.sleep(0.05)
        state = load_checkpoint(tmp_path / "ckpt")
        step = state["step"] if state else 0
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=30) == -signal.SIGKILL
    killed_at = load_checkpoint(tmp_path / "ckpt")["step"]
    assert 3 <= killed_at < 9 and not (tmp_path / "out.pt").exists()

    resumed = _run(script, arm, tmp_path / "ckpt", tmp_path / "out.pt", 0.0)
    assert resumed.wait(timeout=600) == 0
    out = torch.load(tmp_path / "out.pt", weights_only=True)
    assert len(out["loss"]) == 9 and out["loss"] == ref["loss"]
    for name, tensor in ref["model"].items():
        assert torch.equal(out["model"][name], tensor), name


def test_step_cost_is_measured_in_a_fresh_process():
    from i2o.chapters.stability.stepcost import measure_step

    cost = measure_step("micro", arm="unrolled", train_iter=3, backward_iter=3, batch=4, steps=1,
                        warmup=0, threads=1)
    assert cost["arm"] == "unrolled" and cost["seconds"] > 0 and cost["peak_mb"] >= 0
    assert "first step" in cost["memory_method"]
    with pytest.raises(ValueError, match="arm must be 'ift' or 'unrolled'"):
        measure_step("micro", arm="jfb")


@pytest.mark.parametrize("arm", ["ift", "unrolled"])
def test_the_nan_fill_of_deterministic_mode_changes_no_bit(arm, monkeypatch):
    """The book's runs turn off deterministic mode's NaN fill of new tensors
    (:func:`i2o.train.seeding.seed_everything`). A kernel reading memory it never wrote would
    give other numbers with the fill on (``I2O_FILL_UNINITIALIZED=1``) than off: a training run
    and its test sweep (shared Broyden solve, best iterate) agree bit for bit."""
    x, y = _data()
    found = {}
    for fill in (True, False):
        monkeypatch.setenv("I2O_FILL_UNINITIALIZED", "1" if fill else "0")
        model, history = build_and_train(MICRO, x, y, _settings(arm=arm), progress=False,
                                         device="cpu")
        assert torch.utils.deterministic.fill_uninitialized_memory is fill
        swept = evaluate_iterations(model, x, y, [1, 2, 4, 7, 12], batch_size=16)
        found[fill] = ({k: v.clone() for k, v in model.state_dict().items()}, history["loss"],
                       swept)
    (weights, loss, swept), (weights_off, loss_off, swept_off) = found[True], found[False]
    assert loss == loss_off
    assert all(torch.equal(weights[k], weights_off[k]) for k in weights)
    for key in swept:
        assert np.array_equal(swept[key], swept_off[key], equal_nan=True), key
