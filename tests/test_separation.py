"""The separation chapter's computations: the exact construction, the small DEQs, the diagonal
DEQ's implicit bias, GOTU's predictions, and the chapter's jobs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from i2o.chapters.separation import diagonal, gotu, nets, runs, sawtooth, steep
from i2o.chapters.separation.gotu import GotuModel
from i2o.compute import door, profiles, sweep


@pytest.mark.parametrize("m", range(1, 13))
def test_construction_realizes_2_to_the_m_pieces(m):
    check = sawtooth.check_construction(m)
    assert check["pieces"] == 2 ** m
    assert check["max_error"] == 0.0  # dyadic values: exact in float64
    assert check["n_steps"] == m and check["residual_abs"] == 0.0


def test_count_pieces_is_exact_on_a_grid_holding_the_breakpoints():
    x = sawtooth.dyadic_grid(4)
    assert sawtooth.count_pieces(x, 3 * x + 1) == 1
    assert sawtooth.count_pieces(x, np.abs(x - 0.5)) == 2
    for k in range(1, 6):
        assert sawtooth.count_pieces(sawtooth.dyadic_grid(k + 2), sawtooth.sawtooth(
            sawtooth.dyadic_grid(k + 2), k)) == 2 ** k


def test_construction_rejects_m_below_one():
    with pytest.raises(ValueError, match="m must be ≥ 1"):
        sawtooth.construction(0)


def test_lower_triangular_deq_is_exact_after_width_steps():
    torch.manual_seed(0)
    model = nets.ReluDEQ(2, 6, "lower").double()
    x = torch.randn(5, 2, dtype=torch.float64)
    with torch.no_grad():
        z = model.features(x)
        W = model.weight()
        expected = torch.zeros(5, 6, dtype=torch.float64)
        for t in range(6):  # forward substitution
            expected[:, t] = torch.relu(expected @ W[t] + x @ model.U[t] + model.b[t])
    assert torch.equal(torch.triu(W), torch.zeros_like(W))
    torch.testing.assert_close(z, expected, rtol=0, atol=1e-12)


def test_lower_deq_ift_gradient_equals_the_explicit_networks():
    torch.manual_seed(1)
    model = nets.ReluDEQ(1, 5, "lower").double()
    x = torch.rand(7, 1, dtype=torch.float64)
    model(x).pow(2).sum().backward()
    ift = model.V.grad.clone()
    model.zero_grad()
    W = model.weight()
    z = torch.zeros(7, 5, dtype=torch.float64)
    for _ in range(5):  # the same map, unrolled under autograd
        z = torch.relu(z @ W.T + x @ model.U.T + model.b)
    model.head(torch.cat([z, x], dim=1)).squeeze(1).pow(2).sum().backward()
    torch.testing.assert_close(ift, model.V.grad, rtol=1e-9, atol=1e-12)


def test_contractive_deq_is_well_posed():
    torch.manual_seed(2)
    model = nets.ReluDEQ(3, 8, "contractive", gamma=0.9, tol=1e-8)
    with torch.no_grad():
        model.V.mul_(10.0)
        assert torch.linalg.matrix_norm(model.weight(), ord=2) <= 0.9 + 1e-6
        x = torch.randn(4, 3)
        z = model.features(x)
        assert torch.linalg.norm(model.cell(z, x) - z) <= 1e-5 * torch.linalg.norm(z)


def test_flops_and_parameter_counts():
    assert nets.flops_fnn(1, 10, 2) == 2 * (10 + 100 + 10)
    assert nets.flops_deq(1, 10, 10) == 2 * (10 + 1000 + 10 + 1)
    model = nets.make_model("deq_lower", 1, 4)
    # V has 4·4 entries of which 6 (strictly lower) are used; U 4, b 4, head 5 + 1
    assert nets.free_parameters(model) == 6 + 4 + 4 + 6
    with pytest.raises(ValueError, match="unknown model kind"):
        nets.make_model("rnn", 1)


def test_diagonal_flow_tends_to_the_plus_argmin_and_not_the_minus_one():
    out = diagonal.experiment(4, 10, seed=0, lr_scale=0.2, max_steps=3000, tol=1e-12,
                              alpha=0.01)
    assert out["flow"]["relative_residual"] <= 1e-12
    assert out["plus"]["found"] and out["plus"]["distance"] < 1e-8
    assert out["plus"]["stationarity"] < 1e-10
    assert out["kkt_residual"] < 1e-10
    assert out["minus"]["stationarity"] > 1e-3  # not even a KKT point of Q₋
    assert out["plus"]["q_flow"] >= out["plus"]["q_argmin"] - 1e-9


def test_argmin_is_a_kkt_point_and_density_is_bounded():
    prob = diagonal.make_problem(3, 8, seed=1)
    sol = diagonal.argmin_q(prob["X"], prob["y"], prob["beta0"], 1)
    assert sol["found"]
    assert diagonal.stationarity(prob["X"], sol["beta"], prob["beta0"], 1) < 1e-7
    assert np.allclose(prob["X"] @ sol["beta"], prob["y"])
    assert diagonal.density(np.ones(5)) == pytest.approx(1.0)
    assert diagonal.density(np.eye(5)[0]) == pytest.approx(0.2)


def test_gotu_affine_predictions():
    f1 = gotu.affine_prediction("f1", 6, bias=True)
    assert f1["interpolates"] and f1["unique"] and f1["unseen_mse"] == pytest.approx(19.25)
    f2 = gotu.affine_prediction("f2", 6, bias=True)
    assert f2["interpolates"] and f2["unique"] and f2["unseen_mse"] == pytest.approx(16.0)
    assert not gotu.affine_prediction("f2", 6, bias=False)["interpolates"]


def test_gotu_samples_lie_on_the_seen_part_and_cover_it():
    for name in gotu.TARGETS:
        x = gotu.sample_seen(name, 6, 600, seed=0)
        assert gotu.seen(name, x).all()
    x = gotu.sample_seen("f2", 4, 3000, seed=1)
    pairs = {tuple(row) for row in x[:, :2]}
    assert pairs == {(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0)}
    assert gotu.feature_density(np.ones((3, 4))) == pytest.approx(1.0)
    assert gotu.feature_density(np.zeros((2, 4))) == 0.0


def test_gotu_trains_on_the_whole_seen_part_when_it_fits_the_budget():
    whole = gotu.training_points("f1", 6, 64, seed=0)
    assert len(whole) == 32 and gotu.seen("f1", whole).all()
    assert len({tuple(row) for row in whole}) == 32  # every seen point, once
    assert len(gotu.training_points("f2", 6, 40, seed=0)) == 40  # 48 seen points: a sample


def test_linear_deq_readout_is_fixed_at_the_signs_of_the_least_squares_fit():
    x = gotu.training_points("f1", 6, 64, seed=0)
    signs = gotu.readout_signs(x, gotu.target("f1", x))
    # x2 - 1.25 x0 + 1.5 x1 on the seen part; the other three coefficients are 0 up to rounding
    assert signs.tolist() == [-1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    model = nets.make_model("linear_deq", 6, signs=torch.as_tensor(signs))
    assert {name for name, _ in model.named_parameters()} == {"w", "c"}  # a is not trained
    with pytest.raises(ValueError, match="signs must be ±1"):
        nets.LinearDEQ(3, torch.tensor([1.0, 0.5, -1.0]))


def test_readout_signs_read_rounding_noise_as_zero_and_a_real_negative_as_minus_one():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    y = -2.0 * x[:, 0] + 1e-3 * x[:, 1] - 1e-3 * x[:, 2]
    assert gotu.readout_signs(x, y).tolist() == [-1.0, 1.0, -1.0]  # small but real: kept
    negligible = -2.0 * x[:, 0] - 1e-12 * x[:, 1]  # negative, but 2e-9 of the largest is 0
    assert gotu.readout_signs(x, negligible).tolist() == [-1.0, 1.0, 1.0]


def test_the_gotu_relu_deq_reads_its_output_from_the_fixed_point_alone():
    model = nets.make_model("deq_contractive", 5, width=7, seed=0)
    assert model.head.in_features == 7
    assert nets.make_model("deq_lower", 5, width=7, seed=0).head.in_features == 12


def test_check_params_refuses_what_the_schema_cannot_say():
    p = profiles.resolve("separation", "smoke")
    with pytest.raises(profiles.ParameterError, match="diag_n"):
        runs.check_params(p.with_(diag_n=20, diag_d=12))
    with pytest.raises(profiles.ParameterError, match="'seeds'.*no value repeated.*got \\[0, 0\\]"):
        runs.check_params(p.with_(seeds=[0, 0]))
    with pytest.raises(profiles.ParameterError, match="heatmap_points"):
        runs.check_params(p.with_(heatmap_points=100, gotu_train_size=50))


def test_flops_matched_widths_are_closest_in_cost():
    p = profiles.resolve("separation", "quick")
    target = nets.flops_deq(1, p["flops_deq_width"], p["flops_deq_width"])
    for depth, width in runs.flops_matched_widths(p).items():
        cost = nets.flops_fnn(1, width, depth)
        assert abs(cost - target) <= abs(nets.flops_fnn(1, width + 1, depth) - target)
        assert abs(cost - target) <= abs(nets.flops_fnn(1, max(width - 1, 1), depth) - target)


def test_small_models_share_a_task_and_a_task_runs_its_jobs_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path))
    p = profiles.resolve("separation", "smoke", saw_steps=2, gotu_steps=2)
    tasks = runs.tasks(p)
    assert runs.jobs(p) == [job for task in tasks for job in task]
    names = [job.name for job in runs.jobs(p)]
    assert len(names) == len(set(names))  # one cache entry per job
    assert [task[0].name for task in tasks[:2]] == ["gotu-f2-deq_contractive",
                                                    "gotu-f1-deq_contractive"]
    assert all(len(task) == 1 for task in tasks[:2]) and tasks[-1][0].name == "frozen"
    saw = next(task for task in tasks if task[0].name.startswith("saw-k2"))
    width = runs.flops_matched_widths(p)[2]
    assert {"saw-k2-deq_lower-w4-L1-s0", f"saw-lbfgs-k2-fnn-w{width}-L2-s0"} <= {
        job.name for job in saw}
    assert not any(job.is_cached() for job in saw)
    assert sweep.run_one(saw, {}) == f"{saw[0].name} and {len(saw) - 1} more"
    assert all(job.is_cached() for job in saw)
    assert saw not in sweep.missing_tasks(tasks) and len(sweep.missing_tasks(tasks)) == 9


def test_a_jobs_key_holds_what_its_model_uses():
    p = profiles.resolve("separation", "smoke")
    dln = runs.gotu_job(p, "f1", "dln", 0)
    assert dln == GotuModel("f1", "dln", 0, p["gotu_dim"], p["gotu_train_size"], p["gotu_steps"],
                            p["gotu_lr"], p["heatmap_points"], alpha=p["dln_alpha"])
    assert runs.gotu_job(p.with_(gotu_width=16, gotu_depth=3), "f1", "dln", 0) == dln
    fnn = runs.gotu_job(p, "f1", "fnn", 0)
    assert (fnn.width, fnn.depth, fnn.gamma, fnn.alpha) == (p["gotu_width"], p["gotu_depth"],
                                                            None, None)
    assert runs.gotu_job(p.with_(gotu_width=16), "f1", "fnn", 0) != fnn
    assert runs.steep_job(p, "fnn", 3) == steep.SteepStack(
        "fnn", 3, tuple(runs.steep_seeds(p)), p["steep_width"], p["steep_depth"],
        p["steep_train_size"], p["steep_steps"], p["steep_lr"], p["steep_level"])


def test_the_sweep_finds_the_chapter_through_the_manifest():
    chapter = door.enter("separation", "smoke")
    listed = chapter.jobs()
    assert listed == runs.jobs(chapter.params)
    assert len(chapter.tasks()) == 10 and len(listed) > 10


def test_steep_target_weights_and_slope():
    x, y = steep.steep_data(5, 2.0 ** -6, 200, seed=0)
    assert x.shape == (200, 5) and float(x[:, 0].min()) >= 2.0 ** -8 - 1e-9
    torch.testing.assert_close(y, 2.0 ** -6 / (x[:, 0] + 2.0 ** -6))
    model = nets.make_model("deq_lower", 2, 3)
    with torch.no_grad():
        model.V.fill_(0.5)
        model.V[0, 2] = 100.0  # masked: not a weight of the network
        model.U.fill_(0.1), model.b.fill_(0.1), model.head.weight.fill_(0.1)
        model.head.bias.fill_(0.1)
    assert steep.max_abs_weight(model) == pytest.approx(0.5)
    assert steep.slope(np.array([1, 2, 3]), np.array([2.0, 4.0, 8.0])) == pytest.approx(1.0)


def test_spread_kinks_puts_every_first_layer_kink_inside_the_data_interval():
    for model in (nets.make_model("fnn", 1, 64, 2, seed=0),
                  nets.make_model("deq_lower", 1, 16, 1, seed=0)):
        sawtooth.spread_kinks(model, seed=3)
        weight, bias = ((model.body[0].weight, model.body[0].bias)
                        if isinstance(model, nets.FNN) else (model.U, model.b))
        kinks = -bias.detach() / weight.detach()[:, 0]
        assert torch.all((kinks >= 0) & (kinks <= 1))
        assert torch.any(weight > 0) and torch.any(weight < 0)  # both orientations
    with pytest.raises(ValueError, match="1-D"):
        sawtooth.spread_kinks(nets.make_model("fnn", 3, 8, 1, seed=0), seed=0)
