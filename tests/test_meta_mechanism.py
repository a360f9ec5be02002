"""Issue 49, the mechanism of the Figure 4 models whose outer loss rose: the counted inner
iteration, the Krylov estimate of λ_min, one probe, the probe job (resume, the checkpoint it hands
to the Figure 4 model), the rule that names the mechanism, and the chapter's listing of the jobs
(budget: < 60 s)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from i2o.chapters.meta import checkpoint, descent, imaml, mechanism, mlp, outer, runs, tasks
from i2o.chapters.meta import mechanism_probe as probing
from i2o.chapters.meta.evaluate import Evaluation
from i2o.chapters.meta.imaml import IMAMLModel
from i2o.compute import profiles
from i2o.compute.profiles import ParameterError, Params
from i2o.verdicts import gates

SMOKE_MODEL = dict(inner_steps=2, outer_steps=4, regularization=8.0, hidden=(8,),
                   meta_batch_size=3, n_meta_batches=2, checkpoint_every=2)


def _same_params(a, b):
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


# -- the inner iteration with its line-search halvings counted ---------------------------------

@pytest.mark.parametrize("acceleration", [False, True])
def test_counted_run_gives_the_iterates_of_descent(acceleration):
    """descent.run is the iteration of jaxopt's GradientDescent (test_meta_descent)."""
    params = mlp.init_mlp(jax.random.PRNGKey(0), (40, 40))
    batch = tasks.sample_tasks(jax.random.PRNGKey(1), 1)
    theta, unravel = ravel_pytree(params)
    config = imaml.IMAMLConfig(regularization=2.0, inner_steps=16, acceleration=acceleration)
    objective = imaml.inner_objective(config, unravel)
    args = (theta, batch.x_support[0], batch.y_support[0], batch.x_query[0])

    @jax.jit
    def both(*a):
        counted = probing.counted_run(objective, theta, 16, config.max_line_search,
                                      acceleration, *a)
        return counted, descent.run(objective, theta, 16, config.max_line_search,
                                    acceleration, *a)

    (counted, halvings, _), plain = both(*args)
    np.testing.assert_array_equal(counted, plain)
    assert halvings.shape == (16,) and np.all((halvings >= 0) & (halvings <= 15))
    assert np.any(halvings > 0)  # the searches did backtrack


def _quadratic(x):
    return 0.5 * 100.0 * jnp.sum(x ** 2)  # accepted once the step is ≤ 1/100: 7 halvings from 1


def test_counted_run_counts_each_iteration_s_halvings_and_flags_the_last_trial():
    _, halvings, satisfied = probing.counted_run(_quadratic, jnp.ones(3), 2, 3, False)
    assert list(np.asarray(halvings)) == [3, 3] and not np.any(np.asarray(satisfied))
    _, halvings, satisfied = probing.counted_run(_quadratic, jnp.ones(3), 1, 15, False)
    assert list(np.asarray(halvings)) == [7] and np.all(np.asarray(satisfied))


# -- λ_min by Rayleigh–Ritz on a Krylov basis ----------------------------------------------------

def test_smallest_eigenvalue_matches_a_dense_eigvalsh():
    rng = np.random.default_rng(0)
    vectors = np.linalg.qr(rng.normal(size=(40, 40)))[0]
    spectrum = np.concatenate([[-9.0], rng.uniform(-1.0, 5.0, 39)])
    matrix = jnp.asarray(vectors @ np.diag(spectrum) @ vectors.T)
    low = jnp.asarray(vectors[:, :3] @ np.diag([-2.0, 1.0, 3.0]) @ vectors[:, :3].T)

    @jax.jit
    def estimates(operator):
        return probing.smallest_eigenvalue(lambda v: operator @ v, 40, jax.random.PRNGKey(0),
                                           krylov_dimension=20)

    assert float(np.linalg.eigvalsh(np.asarray(matrix))[0]) == pytest.approx(-9.0)
    dense = estimates(matrix)
    assert float(dense.value) >= -9.0 - 1e-9  # a Ritz value never passes λ_min
    np.testing.assert_allclose(dense.value, -9.0, atol=1e-4)
    # rank 3: the Krylov space is invariant after 3 vectors, and the basis restarts
    restarted = estimates(low)
    np.testing.assert_allclose(restarted.value, -2.0, atol=1e-9)
    assert float(restarted.residual) < 1e-8


def test_support_hessian_minimum_matches_the_dense_hessian_of_an_adapted_mlp():
    params = mlp.init_mlp(jax.random.PRNGKey(2), (8, 8), weight_std=0.5)
    batch = tasks.sample_tasks(jax.random.PRNGKey(3), 1)
    theta, unravel = ravel_pytree(params)
    x, y, context = batch.x_support[0], batch.y_support[0], batch.x_query[0]

    def support_loss(point):
        return mlp.mse(unravel(point), x, y)

    dense = np.linalg.eigvalsh(np.asarray(jax.jit(jax.hessian(support_loss))(theta)))
    estimate = jax.jit(lambda point: probing.support_hessian_minimum(
        point, x, y, context, unravel, "none", jax.random.PRNGKey(0)))(theta)
    assert theta.shape[0] == 97 > probing.KRYLOV_DIMENSION
    np.testing.assert_allclose(estimate.value, dense[0], rtol=1e-6, atol=1e-8)


# -- one probe ------------------------------------------------------------------------------------

def test_descends_holds_fails_and_is_undecided():
    assert probing.descends([-0.3, -0.2]) == 1.0
    assert probing.descends([0.0, 0.1]) == 0.0
    assert math.isnan(probing.descends([-0.3, 0.2]))
    assert math.isnan(probing.descends([-0.3, math.nan]))


def test_epsilons_are_fractions_of_an_adam_step():
    assert probing.epsilons(1e-3, 1761) == pytest.approx((0.1e-3 * 1761 ** 0.5,
                                                          0.05e-3 * 1761 ** 0.5))


@pytest.fixture(scope="module")
def smoke_model():
    return IMAMLModel(**SMOKE_MODEL)


def test_probe_measures_the_training_loss_its_gradient_and_the_inner_problems(tmp_path,
                                                                               smoke_model):
    smoke_model.train(tmp_path, stop_at=2)
    state = probing.training_state(smoke_model, tmp_path)
    record = probing.probe(smoke_model, state["params"], state["opt_state"])
    assert list(record) == list(probing.FIELDS)
    loss = outer.fixed_set_loss(smoke_model.meta_loss(), smoke_model.training_set())
    probed = record["probed_loss"]
    np.testing.assert_allclose(probed, float(loss(state["params"])), rtol=1e-12)
    np.testing.assert_allclose(probed, state["checkpoint_losses"][0], rtol=1e-12)
    assert record["slope_implicit"] == pytest.approx(-record["grad_norm"])
    assert record["adam_slope_implicit"] < 0  # Adam preconditions ĝ: still a descent direction
    assert record["descent_fd"] in (0.0, 1.0) or math.isnan(record["descent_fd"])
    assert 0.0 <= record["indefinite_share"] <= 1.0 and 0.0 <= record["last_trial_share"] <= 1.0
    assert record["unaccepted_share"] <= record["last_trial_share"]
    assert math.isfinite(record["lambda_min"]) and record["lambda_min_residual"] < 1e-3
    with pytest.raises(ValueError, match="fixed training set"):
        probing.MechanismRun(IMAMLModel(**{**SMOKE_MODEL, "n_meta_batches": None}))


# -- the job: resumes without recomputing a probe, hands its checkpoint to the model -------------

def test_the_job_resumes_its_probes_and_hands_its_checkpoint_to_the_model(smoke_model,
                                                                          monkeypatch):
    job = probing.MechanismRun(smoke_model)
    assert job.name == "mechanism-imaml-N2-lam8-set2-seed0"
    assert job.key()["model"] == smoke_model.key()
    directory = job.checkpoints()
    interrupted = job.probe_until(directory, stop_at=2)
    assert sorted(interrupted) == [2]
    made = []
    original = probing.probe

    def counting(*args):
        made.append(1)
        return original(*args)

    monkeypatch.setattr(probing, "probe", counting)
    result = job.run()
    assert len(made) == 1  # step 2 was read back, only step 4 was probed
    assert list(result["steps"]) == [2, 4] and result["copied_checkpoint"]
    straight = smoke_model.train()
    np.testing.assert_array_equal(result["loss"], straight.checkpoint_losses)
    np.testing.assert_array_equal(result["train_losses"], straight.losses)
    assert result["probe_seconds"].shape == (2,)
    assert result["loss"][0] == interrupted[2]["checkpoint_loss"]
    # the Figure 4 model resumes at its last step and ends where an uninterrupted run does
    assert (smoke_model.checkpoints() / checkpoint.FILENAME).exists()
    trained = smoke_model.compute()
    assert trained["resumed_from"] == 4
    assert _same_params(trained["params"], straight.params)
    assert _same_params(trained["final_params"], straight.final_params)
    assert trained["best_step"] == straight.best_step


def test_a_checkpoint_is_copied_only_into_an_empty_directory(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    checkpoint.save(source, {"a": np.ones(2)})
    assert probing.copy_checkpoint(source, target)
    checkpoint.save(source, {"a": np.zeros(2)})
    assert not probing.copy_checkpoint(source, target)  # the target's own is kept
    np.testing.assert_array_equal(checkpoint.load(target, {"a": np.zeros(2)})["a"], np.ones(2))
    assert not probing.copy_checkpoint(tmp_path / "none", tmp_path / "other")


def test_saved_probes_read_back(tmp_path):
    probes = {4: {**dict.fromkeys(probing.FIELDS, 0.5), "checkpoint_loss": 1.0},
              2: {**dict.fromkeys(probing.FIELDS, math.nan), "checkpoint_loss": 2.0}}
    probing.save_probes(tmp_path, probes)
    back = probing.load_probes(tmp_path)
    assert sorted(back) == [2, 4] and back[4] == probes[4]
    assert math.isnan(back[2]["descent_fd"]) and back[2]["checkpoint_loss"] == 2.0
    assert probing.load_probes(tmp_path / "none") == {}


# -- the rule -------------------------------------------------------------------------------------

def _run(losses, label="m", outer_steps=None, **fields):
    """A synthetic probe record: checkpoints every 10 steps, L = ``losses``, each field a list
    (or one value everywhere); by default −ĝ descends, no task is indefinite, no line search
    exhausted."""
    n = len(losses)
    defaults = {"descent_fd": 1.0, "adam_descent_fd": 1.0, "indefinite_share": 0.0,
                "last_trial_share": 0.0}
    values = {name: np.full(n, np.nan) for name in probing.FIELDS}
    for name, value in {**defaults, **fields}.items():
        values[name] = np.broadcast_to(np.asarray(value, float), (n,)).copy()
    return {"label": label, "outer_steps": outer_steps or 10 * n,
            "steps": 10 * np.arange(1, n + 1), "loss": np.asarray(losses, float), **values}


#: L over 10 checkpoints: rises (more than doubles) into checkpoints 5 and 8; the other seven
#: intervals after the first tenth are calm.
LOSSES = [1.0, 0.9, 0.8, 0.7, 0.5, 1.2, 0.6, 0.4, 1.0, 0.5]
RISE_STARTS = (4, 7)


def _at(values_at_rises, values_elsewhere):
    return [values_at_rises if i in RISE_STARTS else values_elsewhere for i in range(10)]


def test_intervals_are_rises_and_calms_after_the_first_tenth():
    found = mechanism.intervals(_run([1.0, 3.0, 1.0, 1.0, math.inf, 1.0], outer_steps=60))
    assert [(i.start, i.rise) for i in found] == [(10, True), (20, False), (30, False),
                                                  (40, True)]
    # [10, 20] rose (3 > 2 · 1), [40, 50] became non-finite; [50, 60] starts at a non-finite L
    # and is neither; with T/10 = 6 every interval is past the first tenth
    early = mechanism.intervals(_run([1.0, 1.5, 1.4], outer_steps=200))
    assert [(i.start, i.rise) for i in early] == [(20, False)]  # [10, 20] is within T/10 = 20


#: L over 12 checkpoints of one model: a cascade (doubles into checkpoints 3, 4, 5: an onset at
#: index 2 and two continuations), then a fall and a fresh onset from its low into checkpoint 10.
CASCADE = [1.0, 0.5, 0.4, 1.0, 3.0, 7.0, 0.6, 0.45, 0.4, 1.0, 0.42, 0.41]
ONSET_STARTS = (2, 8)


def _onsets_of(present, absent, n=12):
    return [present if i in ONSET_STARTS else absent for i in range(n)]


def _models(k, **fields):
    """``k`` copies of the cascade model (2 onsets each), labelled m0, m1, …"""
    return [_run(CASCADE, label=f"m{i}", **fields) for i in range(k)]


def test_onsets_are_the_rises_that_start_near_the_lowest_loss_so_far():
    run = _run(CASCADE)
    rises = [i.start for i in mechanism.intervals(run) if i.rise]
    assert rises == [30, 40, 50, 90]  # checkpoints every 10 steps from step 10
    assert [i.start for i in mechanism.onset_intervals(run)] == [30, 90]


def test_fisher_p_is_the_hypergeometric_tail():
    assert mechanism.one_sided_fisher(5, 5, 0, 5) == pytest.approx(1 / math.comb(10, 5))
    assert mechanism.one_sided_fisher(0, 5, 5, 5) == 1.0
    assert mechanism.one_sided_fisher(3, 3, 0, 0) == 1.0  # no calm interval: nothing to single out


def test_no_rise_leaves_the_mechanism_undecided():
    verdict = mechanism.name([_run([1.0, 0.9, 0.8, 0.8, 1.5])])
    assert verdict.holds is None and "no probed model's loss rose" in verdict.reason
    assert verdict.decision() == gates.Decision(None, verdict.reason)
    assert "No probed model" in mechanism.describe(verdict)


def test_too_few_onsets_leave_it_undecided_whatever_the_signs():
    verdict = mechanism.name(_models(2, indefinite_share=_onsets_of(0.5, 0.0)))  # 4 onsets
    assert verdict.holds is None and verdict.onsets == 4 < mechanism.MIN_ONSETS
    assert "fewer than the 5" in verdict.reason and "Undecided" in mechanism.describe(verdict)


@pytest.mark.parametrize("sign, field, present, absent", [
    ("a", "descent_fd", 0.0, 1.0), ("a_prime", "indefinite_share", 0.2, 0.0),
    ("c", "last_trial_share", 0.01, 0.0)])
def test_a_sign_at_the_onsets_and_rarely_when_calm_is_named(sign, field, present, absent):
    verdict = mechanism.name(_models(3, **{field: _onsets_of(present, absent)}))
    assert verdict.holds is True and verdict.named == (sign,) and verdict.onsets == 6
    assert f"({mechanism.LETTERS[sign]}) {mechanism.SIGNS[sign]}: 6 of 6 onsets, 0 of 18 calm" \
        in verdict.reason
    assert mechanism.SIGNS[sign] in mechanism.describe(verdict)


def test_a_sign_only_after_the_onsets_is_not_named():
    after = [0.5 if i in (3, 4) else 0.0 for i in range(12)]  # the cascade's continuations
    verdict = mechanism.name(_models(3, indefinite_share=after))
    assert verdict.named == (mechanism.ADAM_STEP,)  # −ĝ descends at every onset
    assert "0 of 6 onsets" in verdict.reason and "6 of 12 rise intervals" in verdict.reason


def test_a_sign_present_everywhere_is_not_named():
    verdict = mechanism.name(_models(3, last_trial_share=0.1))
    assert verdict.named == (mechanism.ADAM_STEP,)
    assert "6 of 6 onsets, 18 of 18 calm (one-sided p = 1" in verdict.reason


def test_adam_step_is_named_when_no_sign_is_and_every_onset_descends():
    verdict = mechanism.name(_models(3))
    assert verdict.holds is True and verdict.named == (mechanism.ADAM_STEP,)
    assert verdict.descending_at_onsets == 6 == verdict.onsets
    assert mechanism.ADAM_STEP_TEXT in mechanism.describe(verdict)


def test_it_fails_when_no_sign_is_named_and_an_onset_does_not_descend():
    undecided_direction = _onsets_of(math.nan, 1.0)  # the two step lengths disagreed there
    verdict = mechanism.name(_models(3, descent_fd=undecided_direction))
    assert verdict.holds is False and verdict.named == ()
    assert "−ĝ descended at 0 of 6 onsets" in verdict.reason
    assert "no mechanism is named" in mechanism.describe(verdict)


def test_a_model_that_rose_unprobed_leaves_it_undecided():
    calm = np.full(40, 0.1)
    figure4 = {"m0": {"best_loss": 0.1, "peak_after_best": 0.3},  # probed
               "m9": {"best_loss": 0.1, "peak_after_best": 0.25},  # rose 2.5-fold, not probed
               "m8": {"best_loss": 0.1, "peak_after_best": math.inf},  # diverged, not probed
               "m6": {"best_loss": 0.1, "peak_after_best": 0.15,  # rose before its best point
                      "train_losses": np.r_[calm, np.full(20, 0.5), calm]},
               "m7": {"best_loss": 0.1, "peak_after_best": 0.15,  # 1.5-fold: did not rise
                      "train_losses": np.r_[calm, np.full(20, 0.15), calm]}}
    probes = {run["label"]: run for run in _models(3, descent_fd=_onsets_of(0.0, 1.0))}
    assert mechanism.unprobed(figure4, probes) == ["m9", "m8", "m6"]
    verdict = mechanism.judge(figure4, probes)
    assert verdict.holds is None and verdict.unprobed == ("m9", "m8", "m6")
    assert verdict.reason.startswith("m9, m8, m6 rose more than 2-fold and were not probed")
    assert "without being probed" in mechanism.describe(verdict)
    del figure4["m9"], figure4["m8"], figure4["m6"]
    assert mechanism.judge(figure4, probes).named == ("a",)


def test_table_lists_each_rise_and_the_calm_medians():
    frame = mechanism.table([_run(LOSSES, label="one", indefinite_share=_at(0.5, 0.1))])
    rises = frame[frame["kind"] == "rise"]
    assert list(rises["start"]) == [50, 80] and list(rises["indefinite_share"]) == [0.5, 0.5]
    (calm,) = frame[frame["kind"] == "calm median"].itertuples()
    assert calm.intervals == 7 and calm.indefinite_share == pytest.approx(0.1)


# -- the chapter's jobs ----------------------------------------------------------------------------

def _with_mechanism(params, batches, seeds):
    return Params(params.figure, params.profile,
                  {**params, "mechanism_meta_batches": batches, "mechanism_seeds": seeds})


def test_the_jobs_are_unchanged_without_models_to_probe():
    quick = profiles.resolve("meta", "quick")  # lists none
    assert quick["mechanism_meta_batches"] == [] and quick["mechanism_seeds"] == []
    assert all(isinstance(job, Evaluation) for job in runs.jobs(quick))
    assert runs.jobs(quick) == runs.evaluations(quick)
    params = profiles.resolve("meta", "smoke")  # lists one
    assert runs.jobs(params) != runs.evaluations(params)
    assert runs.jobs(_with_mechanism(params, [], [])) == runs.evaluations(params)


def test_listed_models_are_probed_first():
    params = profiles.resolve("meta", "smoke")
    listed = _with_mechanism(params, [2, 1], [1, 0])
    runs.check_params(listed)
    jobs = runs.jobs(listed)
    assert [job.name for job in jobs[:2]] == ["mechanism-imaml-N4-lam8-set2-seed1",
                                              "mechanism-imaml-N4-lam8-set1-seed0"]
    assert jobs[2:] == runs.evaluations(params)
    figure4 = {model.label: model for model in runs.figure4_models(params)}
    assert all(job.model == figure4[job.model.label] for job in jobs[:2])
    for batches, seeds, word in [([1], [0, 1], "as long as"), ([3], [0], "fig4_meta_batches"),
                                 ([1], [7], "fig4_seeds"), ([1, 1], [0, 0], "repeated")]:
        with pytest.raises(ParameterError, match=word):
            runs.check_params(_with_mechanism(params, batches, seeds))
