"""i2o.diagnose: each adapter on a model trained here (torchdeq included), one solve per batch
equal to one solve per N', every verdict branch on doctored curves, and bad inputs refused before
any compute (the API and the command)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import torch
from torch import nn

from i2o.deq import DEQ, SolverSpec
from i2o.diagnose import (
    BookMDEQ,
    Curves,
    PlainDEQ,
    TorchDEQModel,
    check_inputs,
    cli,
    diagnose,
    from_book_deq,
)
from i2o.diagnose.metrics import NAMED, resolve
from i2o.verdicts import gates, intervals, margin_gates, questions, recommendation, rule

torchdeq = pytest.importorskip("torchdeq")


def blobs(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()


class TorchDEQNet(nn.Module):
    """z = tanh(W z + U x) solved by torchdeq, logits = H z."""

    def __init__(self, solver: str = "fixed_point_iter", n: int = 6):
        super().__init__()
        self.enc, self.head = nn.Linear(4, 16), nn.Linear(16, 3)
        self.w = nn.Linear(16, 16, bias=False)
        self.deq = torchdeq.get_deq(core="indexing", ift=True, f_solver=solver, f_max_iter=n,
                                    b_max_iter=n)

    def forward(self, x):
        u = self.enc(x)
        z, _ = self.deq(lambda z: torch.tanh(self.w(z) + u), torch.zeros_like(u))
        return self.head(z[-1])


def fit(model: nn.Module, loss_of, steps: int = 60) -> None:
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    model.train()
    for _ in range(steps):
        loss = loss_of()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.fixture(scope="module")
def data():
    return blobs(160, 0), blobs(120, 1)


@pytest.mark.parametrize(("solver", "metric"), [
    ("fixed_point_iter", "loss"), ("anderson", "loss"),
    ("broyden", "accuracy"),  # torchdeq's Broyden at tolerance 0 blows up some logits at 13 steps
])
def test_torchdeq_adapter_one_sweep_equals_one_solve_per_n(solver, metric, data):
    torch.manual_seed(0)
    (xt, yt), test = data
    model = TorchDEQNet(solver)
    fit(model, lambda: nn.functional.cross_entropy(model(xt), yt))
    shared = diagnose(model, test, train=(xt, yt), metric=metric, progress=False)
    single = diagnose(model, test, metric=metric, shared=False, progress=False)
    assert shared.train_iters == 6 and shared.grid == list(range(1, 19))
    np.testing.assert_allclose(shared.test.values, single.test.values, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(shared.test.residual, single.test.residual, rtol=1e-5, atol=1e-9)
    assert shared.solves == 2 and single.solves == 18  # test only / one batch × 18 counts
    deq = model.deq
    assert (deq.eval_f_max_iter, deq.f_tol, "forward" in vars(deq)) == (6, 1e-3, False)
    # the model learned: better at N than with one iteration, on its training data
    train = shared.test.sign * shared.train.mean()
    assert train[shared.train.at(6)] > train[0]
    # torchdeq's own eval forward at N' = 6 gives what the diagnosis read at 6
    model.eval()
    with torch.no_grad():
        direct = resolve(metric)(model(test[0]), test[1])
    np.testing.assert_allclose(shared.test.values[0, :, 5], direct.double().numpy(), atol=1e-6)


def test_plain_and_book_deq_adapters_on_models_trained_here(data):
    torch.manual_seed(0)
    (xt, yt), test = data
    enc, w, head = nn.Linear(4, 12), nn.Linear(12, 12, bias=False), nn.Linear(12, 3)
    params = [*enc.parameters(), *w.parameters(), *head.parameters()]
    f = lambda z, u: torch.tanh(w(z) + u)  # noqa: E731
    layer = DEQ(SolverSpec(method="fixed_point", max_iter=5), backward="unrolled", output="z")
    opt = torch.optim.Adam(params, 1e-2)
    for _ in range(60):
        u = enc(xt)
        z, _ = layer(f, u, torch.zeros(u.shape[0], 12))
        loss = nn.functional.cross_entropy(head(z), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        plain = PlainDEQ(f=f, z0=lambda u: torch.zeros(u.shape[0], 12), readout=head, inject=enc)
        book = from_book_deq(layer, f, lambda u: torch.zeros(u.shape[0], 12), head, inject=enc)
        a = diagnose(plain, test, train_iters=5, train=(xt, yt), metric="accuracy", fit=0.5,
                     progress=False)
        b = diagnose(book, test, train_iters=5, metric="accuracy", progress=False)
        c = diagnose(book, test, train_iters=5, metric="accuracy", shared=False, progress=False)
    assert a.train_at_n > 0.5 and a.verdicts.gate.holds is True
    np.testing.assert_array_equal(a.test.values, b.test.values)  # unrolled: last iterate
    np.testing.assert_array_equal(b.test.values, c.test.values)
    assert a.test.residual_mean()[-1] < a.test.residual_mean()[0]


def test_book_mdeq_adapter_on_a_model_trained_here():
    from i2o.deq import SolverSpec
    from i2o.models import MDEQClassifier, config
    from i2o.train.classifier import TrainSettings, train_classifier

    torch.manual_seed(0)
    images, labels = torch.randn(16, 3, 32, 32), torch.arange(16) % 10
    model = MDEQClassifier(config("micro"))
    solver = SolverSpec(max_iter=4, tol=1e-3)
    settings = TrainSettings(forward=solver, backward=solver, epochs=2, batch_size=8,
                             pretrain_steps=1, seed=0)
    history = train_classifier(model, images, labels, settings, progress=False)
    assert len(history["loss"]) == 4
    d = diagnose(BookMDEQ(model), (images, labels), train_iters=4, grid=[1, 2, 4, 8],
                 metric="loss", progress=False)
    per_n = diagnose(BookMDEQ(model), (images, labels), train_iters=4, grid=[1, 2, 4, 8],
                     metric="loss", shared=False, progress=False)
    np.testing.assert_allclose(d.test.values, per_n.test.values, rtol=1e-6)
    assert np.all(np.isfinite(d.test.values)) and d.test.values.shape == (1, 16, 4)
    assert diagnose(model, (images, labels), train_iters=4, grid=[1, 4], metric="loss",
                    progress=False).model.startswith("MDEQ")  # adapted automatically


# -- verdicts on doctored curves ----------------------------------------------------------------

N = 5
GRID = np.arange(1, 11)


def doctored(shift_above: float, shift_below: float = -0.2, noise: float = 0.002,
             n: int = 400, seed: int = 0) -> Curves:
    """Per-example accuracies-like values: at N' > N the model moves by ``shift_above``, at
    N' < N by ``shift_below``, plus small per-example noise."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.4, 0.6, size=(1, n, 1))
    offset = np.where(GRID > N, shift_above, np.where(GRID < N, shift_below, 0.0))
    values = base + offset[None, None, :] + noise * rng.standard_normal((1, n, GRID.size))
    values[:, :, GRID == N] = base[:, :, 0:1]
    residual = np.broadcast_to(0.5 ** GRID, values.shape).copy()  # a solver converging linearly
    return Curves(grid=GRID, values=values, residual=residual, sign=1.0)


@pytest.mark.parametrize(("shift", "label", "help_", "hurt", "same"), [
    (+0.05, "help", True, False, False),
    (-0.05, "hurt", False, True, False),
    (+0.001, "no difference", False, False, True),
    (+0.02, "undecided", None, None, None),
])
def test_every_branch_of_more_iterations(shift, label, help_, hurt, same):
    noise = 0.002 if label != "undecided" else 0.3
    v, _ = rule.decide(doctored(shift, noise=noise), N, margin=0.01)
    assert v.more == label
    assert (v.help.holds, v.hurt.holds, v.same.holds) == (help_, hurt, same)


def test_fewer_hurt_holds_and_fails():
    assert rule.decide(doctored(0.0, shift_below=-0.1), N, 0.01)[0].fewer.holds is True
    assert rule.decide(doctored(0.0, shift_below=+0.1), N, 0.01)[0].fewer.holds is False
    above_only = Curves(grid=np.array([5, 6]), values=np.zeros((1, 3, 2)),
                        residual=np.ones((1, 3, 2)), sign=1.0)
    assert rule.decide(above_only, 5, 0.01)[0].fewer.holds is None


def test_a_closed_fit_gate_makes_every_verdict_undecided():
    v, _ = rule.decide(doctored(+0.05), N, 0.01, gate=gates.Decision(None, "does not fit"))
    assert v.more == "undecided"
    assert all((d.holds, d.reason) == (None, "does not fit")
               for d in (v.help, v.hurt, v.same, v.fewer))


def test_predicates_hold_and_fail_at_the_margin():
    ci = lambda lo, hi: intervals.Interval((lo + hi) / 2, lo, hi, 10, "examples")  # noqa: E731

    def one(rule, lo, hi):
        return rule([ci(lo, hi)], [ci(lo, hi)], [6], 0.01).holds

    assert one(questions.help_beyond, 0.02, 0.03) is True
    assert one(questions.help_beyond, -0.02, 0.005) is False
    assert one(questions.help_beyond, 0.0, 0.02) is None
    assert one(questions.hurt_beyond, -0.03, -0.02) is True
    assert one(questions.hurt_beyond, -0.005, 0.03) is False
    assert one(questions.hurt_beyond, -0.02, 0.0) is None
    assert one(questions.no_difference, -0.005, 0.005) is True
    assert one(questions.no_difference, 0.02, 0.03) is False
    assert one(questions.no_difference, 0.0, 0.02) is None
    fewer = lambda cost, lo, hi: questions.fewer_hurt(  # noqa: E731
        cost, [ci(lo, hi)], [ci(lo, hi)], [1], 0.01).holds
    assert fewer(ci(0.1, 0.2), -0.2, -0.1) is True
    assert fewer(ci(-0.1, 0.0), 0.0, 0.1) is False  # the fewest cost nothing
    assert fewer(ci(0.1, 0.2), 0.02, 0.03) is False  # a count below N helps by more than δ
    assert fewer(ci(-0.1, 0.1), -0.1, 0.1) is None
    assert fewer(ci(0.1, 0.2), -0.1, 0.02) is None  # no count shown below +δ


def test_a_count_that_helps_and_no_count_that_helps_both_read_the_widened_intervals():
    """"Some count helps" and its negation "no benefit" (READING.md, principle 2) both read the
    intervals widened by Bonferroni over the counts: a pointwise interval above δ whose widened
    one is not decides nothing, and pointwise intervals below δ decide nothing either while a
    widened one reaches above δ; every widened one below δ decides "no gain"."""
    ci = lambda lo, hi: intervals.Interval((lo + hi) / 2, lo, hi, 10, "seeds")  # noqa: E731
    plain, wide = [ci(0.011, 0.02), ci(-0.01, 0.0)], [ci(0.005, 0.026), ci(-0.02, 0.01)]
    found = questions.help_beyond(plain, wide, [6, 7], 0.01)
    assert found.holds is None and found.facts.needs is not None
    assert questions.no_gain(found).holds is None
    below = [ci(-0.01, 0.009), ci(-0.01, 0.0)]
    assert questions.help_beyond(below, wide, [6, 7], 0.01).holds is None
    narrow = [ci(-0.012, 0.0095), ci(-0.015, 0.002)]
    assert questions.no_gain(questions.help_beyond(below, narrow, [6, 7], 0.01)).holds is True
    assert questions.no_gain(questions.help_beyond(wide, plain, [6, 7], 0.01)).holds is False


def test_rows_with_a_margin_need_resolution_power_and_an_established_reference():
    clear = doctored(+0.001, shift_below=-0.2)
    fewest = margin_gates.Margin.fewest(clear, N, 0.25)
    assert fewest.of_fewest and abs(fewest.delta - 0.05) < 1e-3
    v, _ = rule.decide(clear, N, fewest)
    assert v.no_gain.holds is True and v.scale.holds is True
    flat = doctored(+0.001, shift_below=+0.001)  # the fewest cost nothing: δ has no scale
    v, _ = rule.decide(flat, N, margin_gates.Margin.fewest(flat, N, 0.25) if False else
                           margin_gates.Margin(0.05, "0.05", of_fewest=True))
    assert v.no_gain.holds is None and v.no_gain.facts.closed_by == "reference"
    noisy = doctored(+0.001, noise=0.3)  # δ below one model's resolution
    v, _ = rule.decide(noisy, N, 0.01)
    assert v.help.holds is None and v.help.facts.closed_by == "resolution"
    seeds = Curves(grid=GRID, values=np.concatenate([clear.values, clear.values + 0.02,
                                                     clear.values - 0.02 * (GRID > N)]),
                   residual=np.concatenate([clear.residual] * 3), sign=1.0)
    v, _ = rule.decide(seeds, N, 0.01)  # seeds disagree by about δ: too little power
    assert v.same.holds is None and v.same.facts.closed_by == "power"
    assert v.same.facts.needs is not None and v.same.facts.needs.of == "seeds"


def test_the_residual_check_holds_fails_and_needs_two_values():
    falling_ = doctored(0.0)
    assert rule.decide(falling_, N, 0.01)[0].residual.holds is True
    rising = Curves(GRID, falling_.values, falling_.residual[:, :, ::-1].copy(), 1.0)
    assert rule.decide(rising, N, 0.01)[0].residual.holds is False
    one = Curves(GRID, falling_.values[:, :1], falling_.residual[:, :1], 1.0)
    assert questions.falling(one, N)[0].facts.closed_by == "count"
    sick = rule.decide(falling_, N, 0.01, health=gates.undecided("diverged", "health"))[0]
    assert sick.residual.holds is None and sick.residual.facts.closed_by == "health"


def test_the_recommendation_follows_the_curve():
    helps = recommendation.recommend(doctored(+0.05), N, 0.01)
    assert helps.n == 6 and helps.decided and helps.best > N  # the cheapest count above N
    hurts = recommendation.recommend(doctored(-0.05), N, 0.01)
    assert hurts.n == N and hurts.decided  # fewer hurt, more hurt: N
    noisy = recommendation.recommend(doctored(+0.02, noise=0.3), N, 0.01)
    assert noisy.n == N and not noisy.decided  # cannot rank N against the best: keep N
    flat = recommendation.recommend(doctored(0.0, shift_below=0.0), N, 0.01)
    assert flat.n == 1  # one iteration is as good as any: the cheapest


def test_intervals_over_seeds_when_several_models():
    curves = doctored(+0.05)
    two = Curves(grid=GRID, values=np.concatenate([curves.values, curves.values + 0.01]),
                 residual=np.concatenate([curves.residual] * 2), sign=1.0)
    ci = two.improvement(8, N)
    assert ci.over == "seeds" and ci.n == 2


def test_diagnosis_json_and_claims(tmp_path):
    x, y = blobs(64)
    plain = PlainDEQ(f=lambda z, u: torch.tanh(0.5 * z + u[:, :3]),
                     z0=lambda u: torch.zeros(u.shape[0], 3), readout=lambda z: z)
    d = diagnose(plain, (x, y), train_iters=3, metric="loss", progress=False)
    saved = json.loads(d.save_json(tmp_path / "d.json").read_text())
    assert saved["grid"] == list(range(1, 10)) and saved["train_iters"] == 3
    assert saved["test"]["gap"][2] == 0.0 and saved["verdicts"]["more"] == d.verdicts.more
    rows = d.claims().rows
    assert any("recommended" in r.claim for r in rows) and len(rows) == 6
    assert "←N" in d.table()


# -- bad inputs, refused before any compute ----------------------------------------------------

class Counting(PlainDEQ):
    calls = 0

    def sweep(self, *args, **kwargs):
        Counting.calls += 1
        return super().sweep(*args, **kwargs)


def counting() -> Counting:
    Counting.calls = 0
    return Counting(f=lambda z, x: torch.tanh(z + x), z0=torch.zeros_like, readout=lambda z: z)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"grid": [1, 2, 3]}, "does not include the training N = 5"),
    ({"grid": [5]}, "at least one count besides N"),
    ({"grid": [0, 5]}, "integers ≥ 1"),
    ({"metric": "f1"}, "unknown metric"),
    ({"metric": lambda a, b: a.sum(1)}, "needs higher_is_better"),
    ({"metric": lambda a, b: a.sum(1), "higher_is_better": True}, "state the margin"),
    ({"margin": 0.0}, "margin δ must be"),
    ({"fit": 0.9}, "give train="),
    ({"limit": 0}, "limit must be an integer ≥ 1"),
    ({"fit": float("nan")}, "fit must be a number > 0.0 and ≤ 1.0"),
    ({"fit": 90.0}, "(a fraction: 0.9 for 90 %)"),
    ({"train_iters": 1001}, "train_iters must be an integer ≥ 1 and ≤ 1000"),
    ({"grid": [1, 5, 20_000]}, "counts ≤ 10,000"),
    ({"grid": list(range(1, 1003))}, "at most 1,000"),
    ({"margin": float("nan")}, "margin δ must be"),
    ({"margin": 5.0}, "margin δ must be a number > 0.0 and ≤ 1.0"),
    ({"level": 90}, "level must be a number ≥ 0.5 and < 1.0"),
])
def test_bad_inputs_are_refused_before_any_sweep(kwargs, message):
    model = counting()
    x, y = torch.randn(8, 3), torch.randint(0, 3, (8,))
    with pytest.raises(ValueError, match=message):
        check_inputs(model, (x, y), **{"train_iters": 5, **kwargs})
    assert Counting.calls == 0


def test_inputs_that_are_not_finite_are_refused_before_any_sweep():
    """All-NaN inputs once gave "recommended N' = 1" (an accuracy read from NaN outputs is a
    number): refused, for a pair of tensors (every row) and a loader (its first batch)."""
    x, y = torch.randn(8, 3), torch.randint(0, 3, (8,))
    nan = torch.full_like(x, float("nan"))
    some = x.clone()
    some[5, 1] = float("inf")
    for data, message in [((nan, y), "test data's inputs hold 24 non-finite value(s)"),
                          ((some, y), "inputs hold 1 non-finite value(s) (NaN or ±inf) of 24"),
                          (torch.utils.data.DataLoader(torch.utils.data.TensorDataset(nan, y),
                                                       batch_size=4),
                           "inputs of its first batch hold 12")]:
        model = counting()
        with pytest.raises(ValueError, match=re.escape(message)):
            check_inputs(model, data, train_iters=5)
        assert Counting.calls == 0
    with pytest.raises(ValueError, match="training data's targets"):
        check_inputs(counting(), (x, y), train_iters=5, metric="mse",
                     train=(x, torch.full((8, 3), float("nan"))))
    assert check_inputs(counting(), (some, y), train_iters=5, limit=4)["train_iters"] == 5


def test_out_is_checked_before_any_compute(tmp_path, monkeypatch):
    assert cli.check_out(str(tmp_path / "new" / "folder")) == tmp_path / "new" / "folder"
    assert not (tmp_path / "new").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        cli.check_out(str(tmp_path / "file"))
    with pytest.raises(ValueError, match="a file"):
        cli.check_out(str(tmp_path / "file" / "sub"))

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli.tempfile, "TemporaryFile", read_only)
    with pytest.raises(ValueError, match=r"cannot be written \(Permission denied\)"):
        cli.check_out(str(tmp_path / "out"))


def test_nan_metric_empty_loader_and_no_iteration_control():
    x, y = torch.randn(8, 3), torch.randint(0, 3, (8,))
    nan = lambda a, b: torch.full((b.shape[0],), float("nan"))  # noqa: E731
    model = counting()
    with pytest.raises(ValueError, match="non-finite value"):
        diagnose(model, (x, y), train_iters=5, metric=nan, higher_is_better=True, margin=0.1)
    assert Counting.calls == 1  # the preflight on two examples, never the sweep
    with pytest.raises(ValueError, match="test data is empty"):
        check_inputs(counting(), (x[:0], y[:0]), train_iters=5)
    with pytest.raises(ValueError, match="test data is empty"):
        check_inputs(counting(), torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(x[:0], y[:0])), train_iters=5)
    with pytest.raises(ValueError, match="no iteration control found"):
        check_inputs(nn.Linear(3, 3), (x, y), train_iters=5)
    with pytest.raises(ValueError, match="no iteration control found"):
        check_inputs(object(), (x, y), train_iters=5)
    with pytest.raises(ValueError, match="give train_iters"):
        check_inputs(counting(), (x, y))
    with pytest.raises(TypeError, match="one-shot"):
        check_inputs(counting(), ((x, y) for _ in range(2)), train_iters=5)


def test_named_metrics_directions():
    assert {k: m.higher_is_better for k, m in NAMED.items()} == {
        "accuracy": True, "error": False, "loss": False, "mse": False, "psnr": True}
    logits, y = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    assert resolve("accuracy")(logits, y).tolist() == [1.0, 0.0]


MODEL_FILE = '''
import torch
from torch import nn
from torchdeq import get_deq

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.w, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.deq = get_deq(core="indexing", f_solver="fixed_point_iter", f_max_iter=4)
    def forward(self, x):
        u = self.enc(x)
        z, _ = self.deq(lambda z: torch.tanh(self.w(z) + u), torch.zeros_like(u))
        return self.head(z[-1])

def build():
    torch.manual_seed(0)
    return Net()

def linear():
    return nn.Linear(4, 3)
'''


def test_the_command(tmp_path, capsys):
    (tmp_path / "net.py").write_text(MODEL_FILE)
    x, y = blobs(40)
    torch.save((x, y), tmp_path / "test.pt")
    torch.save({"x": x[:0], "y": y[:0]}, tmp_path / "empty.pt")
    model = f"{tmp_path / 'net.py'}:build"
    out = tmp_path / "out"
    assert cli.main(["--model", model, "--data", str(tmp_path / "test.pt"), "--grid", "1:8",
                     "--train-data", str(tmp_path / "test.pt"), "--fit", "0.1",
                     "--out", str(out), "--no-progress"]) == 0
    assert {p.name for p in out.iterdir()} == {"diagnosis.json", "diagnosis.png",
                                               "diagnosis.pdf"}
    assert "Recommendation: N' =" in capsys.readouterr().out
    bad = [(["--grid", "1:3"], "does not include the training N = 4"),
           (["--data", str(tmp_path / "empty.pt")], "test data is empty"),
           (["--model", f"{tmp_path / 'net.py'}:linear", "--train-iters", "4"],
            "no iteration control found"),
           (["--grid", "a:b"], "--grid must be"),
           (["--fit", "0.5"], "give train=")]
    for extra, message in bad:
        argv = ["--model", model, "--data", str(tmp_path / "test.pt"), *extra]
        assert cli.main(argv) == 2
        assert message in capsys.readouterr().err


class _RunsCodeWhenUnpickled:
    """Unpickling it opens (so creates) the file ``marker``: code a data file must not run."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_data_file_loads_tensors_only(tmp_path):
    x, y = blobs(6)
    for name, content in [("pair", (x, y)), ("list", [x, y]), ("dict", {"x": x, "y": y})]:
        torch.save(content, tmp_path / f"{name}.pt")
        loaded = cli.load_data(str(tmp_path / f"{name}.pt"), "--data")
        assert isinstance(loaded, tuple) and torch.equal(loaded[0], x) and \
            torch.equal(loaded[1], y)
    torch.save(torch.utils.data.TensorDataset(x, y), tmp_path / "dataset.pt")
    dataset = cli.load_data(str(tmp_path / "dataset.pt"), "--data")
    assert torch.equal(dataset.tensors[0], x)

    marker = tmp_path / "code-ran"
    torch.save((x, _RunsCodeWhenUnpickled(marker)), tmp_path / "code.pt")
    (tmp_path / "text.pt").write_text("not a tensor file")
    refused = [("code.pt", "holds objects other than tensors"),
               ("text.pt", "is not a file torch.load can read"),
               ("three.pt", "holds a tuple of 3 item(s): Tensor, Tensor, Tensor"),
               ("listed.pt", "holds a dict whose 'x' and 'y' are list, Tensor"),
               ("keys.pt", "holds a dict without keys 'x' and 'y' (keys: ['a', 'y'])"),
               ("tensor.pt", "holds a Tensor")]
    torch.save((x, y, y), tmp_path / "three.pt")
    torch.save({"x": x.tolist(), "y": y}, tmp_path / "listed.pt")
    torch.save({"a": x, "y": y}, tmp_path / "keys.pt")
    torch.save(x, tmp_path / "tensor.pt")
    for name, message in refused:
        with pytest.raises(ValueError) as error:
            cli.load_data(str(tmp_path / name), "--data")
        assert str(error.value).startswith(f"--data: {tmp_path / name} {message}")
        assert str(error.value).endswith(f"expected {cli.DATA_FILE_CONTENTS}, saved with "
                                         "torch.save")
    assert not marker.exists()


def test_the_command_refuses_a_data_file_that_is_not_tensors(tmp_path, capsys):
    (tmp_path / "net.py").write_text(MODEL_FILE)
    torch.save({"x": [1.0], "y": [0]}, tmp_path / "lists.pt")
    assert cli.main(["--model", f"{tmp_path / 'net.py'}:build",
                     "--data", str(tmp_path / "lists.pt")]) == 2
    err = capsys.readouterr().err
    assert "--data:" in err and "lists.pt holds a dict whose 'x' and 'y' are list, list" in err


def test_help_documents_every_option():
    text = cli.parser().format_help()
    for action in cli.parser()._actions:
        assert action.help, action.dest
        for flag in action.option_strings:
            assert flag in text


def test_torchdeq_adapter_names_its_deq():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = TorchDEQNet(), TorchDEQNet()

    with pytest.raises(ValueError, match="name one with deq="):
        TorchDEQModel(Two())
    assert TorchDEQModel(Two(), deq="b.deq").module is not None
    with pytest.raises(ValueError, match="no torchdeq DEQ named"):
        TorchDEQModel(Two(), deq="c")


def test_fewer_hurt_reads_every_count_below_n():
    """"Almost always detrimental" over every N' < N: the fewest decidedly costing is not enough
    when a count nearer N is decidedly better than N by more than δ."""
    values = doctored(0.0, shift_below=-0.2).values.copy()
    values[:, :, GRID == N - 1] += 0.3  # N' = N − 1 beats N by 0.1, the fewest still cost
    dip = Curves(GRID, values, doctored(0.0).residual, 1.0)
    v, intervals = rule.decide(dip, N, 0.01)
    assert intervals["below"][0].lo > 0  # the fewest cost
    assert v.fewer.holds is False and "fewer iterations help" in v.fewer.reason
    assert len(intervals["fewer"]) == len(intervals["fewer_simultaneous"]) == N - 1


def test_a_floor_keeps_the_margin_when_the_reference_is_small_or_not_established():
    small = doctored(+0.001, shift_below=-0.002)  # the fewest cost 0.002: ¼ of it is 5e-4
    assert margin_gates.Margin.fewest(small, N, 0.25).delta < 1e-3
    floored = margin_gates.Margin.fewest(small, N, 0.25, floor=0.01)
    assert floored.delta == 0.01 and "floor 0.01" in floored.text
    flat = doctored(+0.001, shift_below=+0.0)  # the fewest cost nothing: not established
    v, _ = rule.decide(flat, N, margin_gates.Margin.fewest(flat, N, 0.25, floor=0.01))
    assert v.margin.delta == 0.01 and not v.margin.of_fewest
    assert v.no_gain.holds is True and v.same.holds is True  # decided on the floor alone
    v, _ = rule.decide(flat, N, margin_gates.Margin.fewest(flat, N, 0.25))  # no floor
    assert v.no_gain.holds is None and v.no_gain.facts.closed_by == "reference"
    with pytest.raises(ValueError, match="floor"):
        margin_gates.Margin.relative(0.25, 1.0, "x", floor=-1.0)


def test_a_significant_gain_below_the_margin_is_reported():
    v, _ = rule.decide(doctored(+0.005, noise=0.0005), N, 0.01)
    assert v.no_gain.holds is True and "significant gain smaller than δ" in v.no_gain.reason
    v, _ = rule.decide(doctored(0.0, noise=0.0005), N, 0.01)
    assert v.no_gain.holds is True and "significant gain" not in v.no_gain.reason


def test_the_solver_guard_is_a_direction_and_the_tenfold_fall_gates_nothing():
    """The paper's guard (L191) holds on any fall of the residual beyond N from above the
    solver's floor; the book's own tenfold fall is reported apart and closes no row."""
    fast = doctored(+0.05)  # 0.5 ** N': 32-fold from N = 5 to 10
    v, _ = rule.decide(fast, N, 0.01)
    assert v.residual.holds is True and v.tenfold.holds is True and v.help.holds is True
    slow = Curves(GRID, fast.values, np.broadcast_to(1.0 / GRID, fast.values.shape).copy(), 1.0)
    v, _ = rule.decide(slow, N, 0.01)  # 2-fold: falls, but less than tenfold
    assert v.residual.holds is True and v.tenfold.holds is False
    assert v.help.holds is True and v.help.facts.closed_by is None
    flat = Curves(GRID, fast.values, np.full(fast.values.shape, 0.2), 1.0)
    v, _ = rule.decide(flat, N, 0.01)  # stuck: the residual does not fall beyond N
    assert v.residual.holds is False and "does not fall" in v.residual.reason
    for row in (v.help, v.hurt, v.same, v.no_gain):
        assert row.holds is None and row.facts.closed_by == "convergence"
        assert "solver guard not met" in row.reason
    assert v.more == "undecided" and v.fewer.holds is True  # the counts below N are not closed
    attained = Curves(GRID, fast.values, np.broadcast_to(1e-7 / GRID, fast.values.shape).copy(),
                      1.0)
    v, _ = rule.decide(attained, N, 0.01)  # falls, but from the solver's floor
    assert v.residual.holds is False and "already attained" in v.residual.reason
    assert v.help.facts.closed_by == "convergence"


def test_near_equilibrium_is_the_books_own_and_reads_the_residual_at_n_and_at_the_top():
    fast = doctored(+0.05)
    near = Curves(GRID, fast.values, np.full(fast.values.shape, 0.01), 1.0)
    assert rule.decide(near, N, 0.01)[0].near.holds is True
    far = Curves(GRID, fast.values, np.full(fast.values.shape, 0.3), 1.0)
    v, _ = rule.decide(far, N, 0.01)
    assert v.near.holds is False and "0.3" in v.near.reason


def test_the_residual_row_quotes_the_health_gate_only_when_it_says_something():
    v, _ = rule.decide(doctored(0.0), N, 0.01)
    assert v.residual.reason.startswith("log10")
    v, _ = rule.decide(doctored(0.0), N, 0.01, health=gates.Decision(True, "no model diverged"))
    assert v.residual.reason.startswith("no model diverged; log10")


def test_fewer_help_holds_when_a_count_below_n_beats_n_by_more_than_the_margin():
    """Appendix G.4's DEQ row ("better to use fewer iterations than at training time")."""
    values = doctored(0.0, shift_below=-0.2).values.copy()
    values[:, :, GRID == N - 1] += 0.3  # N' = N − 1 beats N by 0.1
    dip = Curves(GRID, values, doctored(0.0).residual, 1.0)
    assert rule.decide(dip, N, 0.01)[0].fewer_help.holds is True
    assert rule.decide(doctored(0.0, shift_below=-0.2), N, 0.01)[0].fewer_help.holds is False
    above_only = Curves(grid=np.array([5, 6]), values=np.zeros((1, 3, 2)),
                        residual=np.ones((1, 3, 2)), sign=1.0)
    assert rule.decide(above_only, 5, 0.01)[0].fewer_help.holds is None


def test_an_interval_beyond_the_margin_decides_whatever_the_resolution_and_power():
    """The precision gates guard "every interval within a bound", not one simultaneous interval
    beyond δ: with noise above δ's resolution, a large gain decides "help" (and a count below N
    far better than N decides "fewer hurt" fails) while no gain stays closed by resolution."""
    big = doctored(+0.3, noise=0.3)
    v, _ = rule.decide(big, N, 0.01)
    assert v.scale.holds is None and v.scale.facts.closed_by == "resolution"
    assert v.help.holds is True and v.same.holds is False and v.more == "help"
    assert rule.BEYOND in v.help.reason
    assert v.hurt.holds is None and v.hurt.facts.closed_by == "resolution"
    flat = rule.decide(doctored(0.0, noise=0.3), N, 0.01)[0]
    assert flat.help.holds is None and flat.help.facts.closed_by == "resolution"
    values = doctored(0.0, shift_below=-0.5, noise=0.3).values.copy()
    values[:, :, GRID == N - 1] += 0.8  # N' = N − 1 beats N by 0.3
    dip = rule.decide(Curves(GRID, values, doctored(0.0).residual, 1.0), N, 0.01)[0]
    assert dip.fewer.holds is False and dip.fewer_help.holds is True
    plain_fewer = rule.decide(doctored(0.0, shift_below=-0.5, noise=0.3), N, 0.01)[0]
    assert plain_fewer.fewer.holds is None and plain_fewer.fewer.facts.closed_by == "resolution"
    # G.4's "better to use fewer" is a sign (principle 1): every count below N decidedly worse
    assert plain_fewer.fewer_help.holds is False


def test_seeds_that_disagree_still_decide_a_gain_far_beyond_the_margin():
    """Three seeds whose gains differ by twice δ: "help" holds on its simultaneous interval
    (power is not needed), "no difference" fails, and "hurt" fails: every interval clears −δ,
    so the power gate, which reads only intervals straddling their bound, does not close it."""
    base = doctored(0.0)
    gains = (0.10, 0.14, 0.12)
    values = np.concatenate([base.values + g * (GRID > N) for g in gains])
    seeds = Curves(GRID, values, np.concatenate([base.residual] * 3), 1.0)
    v, intervals = rule.decide(seeds, N, 0.01)
    # principle 3: no interval straddles ±δ, so power reads none and closes nothing
    assert v.scale.holds is True
    assert min(ci.lo for ci in intervals["above_simultaneous"]) > 0.01
    assert v.help.holds is True and v.no_gain.holds is False
    assert v.hurt.holds is False


def test_threads_win_over_the_exported_count_and_must_be_positive(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("I2O_THREADS", "1")  # as the Makefile exports it
    assert cli.main(["--model", "x.py:build", "--data", "x.pt", "--threads", "0"]) != 0
    assert "--threads" in capsys.readouterr().err
    try:
        cli.main(["--model", f"{tmp_path / 'missing.py'}:build", "--data", "x.pt",
                  "--threads", "2"])
        assert os.environ["I2O_THREADS"] == "2" and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
