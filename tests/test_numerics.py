"""Portable numerics (``I2O_NUMERICS``): the pins, where processes start with them, and that they
make real computations bit-identical from one fresh process to the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import toy_chapter
from toy_jobs import toy

from i2o.base import lineage, locations, runtime
from i2o.book import stamps
from i2o.compute import cache_entries, cache_key, profiles, results, sweep

TORCH_STEPS = """
import hashlib, torch
from i2o.deq import DEQ, SolverSpec
from i2o.models import MDEQClassifier, config
from i2o.train.classifier import mdeq_loss
from i2o.train.schedule import make_optimizer
torch.set_num_threads(1)
torch.manual_seed(0)
model = MDEQClassifier(config("tiny")).train()
images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
optimizer = make_optimizer(model, 1e-3, 2.5e-6)
spec = SolverSpec(method="broyden", max_iter=4, tol=0.0, stop_mode="rel")
deq = DEQ(forward=spec, backward="ift", backward_spec=spec)
for _ in range(2):
    optimizer.zero_grad()
    loss, _, _ = mdeq_loss(model, deq, images, labels, pretraining=False)
    loss.backward()
    optimizer.step()
digest = hashlib.sha256()
for parameter in model.parameters():
    digest.update(parameter.detach().numpy().tobytes())
print(digest.hexdigest())
"""

JAX_STEPS = """
from i2o.base import runtime
runtime.jax_single_thread()
import functools, hashlib, jax, numpy as np, optax
from i2o.chapters.meta import maml, mlp, outer
params = mlp.init_mlp(jax.random.PRNGKey(0))
source = outer.online_tasks(jax.random.PRNGKey(1), 3)
optimizer = optax.adam(1e-3)
loss = functools.partial(maml.meta_loss, config=maml.MAMLConfig(1))
params, _, losses = outer._chunk_fn(loss, source, optimizer, 3)(
    params, optimizer.init(params), jax.numpy.asarray(0))
leaves = jax.tree_util.tree_leaves((params, losses))
print(hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).hexdigest())
"""

NUMPY_STEPS = """
import hashlib, numpy as np
a = np.random.default_rng(0).standard_normal((300, 300))
x = np.linalg.solve(a @ a.T + np.eye(300), np.exp(np.sin(a)))
print(hashlib.sha256(x.tobytes()).hexdigest())
"""

# which computation shows each pin: the library it pins runs in it
SHOWN_BY = {"ATEN_CPU_CAPABILITY": TORCH_STEPS, "ONEDNN_MAX_CPU_ISA": TORCH_STEPS,
            "MKL_CBWR": TORCH_STEPS, "OPENBLAS_CORETYPE": NUMPY_STEPS,
            "NPY_ENABLE_CPU_FEATURES": NUMPY_STEPS}

# XLA's elementwise transcendental code is generated per instruction set (FMA from AVX2 on);
# XLA_FLAGS is taken as given (runtime.jax_single_thread would re-pin it)
XLA_TRANSCENDENTALS = """
import hashlib, jax.numpy as jnp, numpy as np
x = jnp.asarray(np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32))
y = jnp.tanh(x) * jnp.exp(-x * x) + jnp.log1p(jnp.abs(x))
print(hashlib.sha256(np.asarray(y).tobytes()).hexdigest())
"""


def _portable_env(drop: str | None = None) -> dict[str, str]:
    """This process's environment in portable mode, optionally without one pin."""
    env = dict(os.environ)
    runtime.apply_numerics(env, mode="portable")
    if drop == "XLA_FLAGS":
        env["XLA_FLAGS"] = runtime.xla_flags("native", env["XLA_FLAGS"])
    elif drop:
        env.pop(drop)
    return env


def _digest(script: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_bad_numerics_mode_is_refused(monkeypatch):
    monkeypatch.setenv("I2O_NUMERICS", "fast")
    with pytest.raises(ValueError, match=r"I2O_NUMERICS must be one of portable, native; "
                                         r"got 'fast'"):
        runtime.numerics_mode()
    with pytest.raises(ValueError, match="I2O_NUMERICS"):
        runtime.numerics_env()
    with pytest.raises(ValueError, match="numerics mode must be one of portable, native"):
        runtime.numerics_env("fast")


def test_portable_is_the_default_and_native_drops_the_pins(monkeypatch):
    monkeypatch.delenv("I2O_NUMERICS", raising=False)
    assert runtime.numerics_mode() == "portable"
    inherited = {**runtime.PORTABLE_PINS, "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    native = runtime.apply_numerics(inherited, mode="native")
    assert not set(runtime.PORTABLE_PINS) & set(native)
    assert not set(runtime.PORTABLE_PINS) & set(inherited)
    assert inherited["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"


def test_xla_pins_come_before_any_word_that_would_end_xla_parsing():
    flags = runtime.xla_flags("portable", "--xla_cpu_multi_thread_eigen=false "
                              "intra_op_parallelism_threads=1 --xla_cpu_max_isa=AVX512 --xla_x=1")
    words = flags.split()
    assert all(word.startswith("--") for word in words)
    assert "--xla_cpu_max_isa=AVX2" in words and "--xla_cpu_max_isa=AVX512" not in words
    assert words[-1] == "--xla_x=1" and words.count("--xla_cpu_multi_thread_eigen=false") == 1


def test_notebook_kernel_and_sweep_worker_environments_hold_the_pins(monkeypatch):
    monkeypatch.delenv("I2O_NUMERICS", raising=False)
    for env in (runtime.numerics_env(), sweep._environment()):
        for name, value in runtime.PORTABLE_PINS.items():
            assert env[name] == value, name
        assert set(runtime.XLA_PORTABLE_FLAGS) <= set(env["XLA_FLAGS"].split())
        assert env["I2O_NUMERICS"] == "portable" and env["I2O_THREADS"] == "1"


def test_a_notebook_kernel_starts_pinned(tmp_path, monkeypatch):
    """The kernel papermill starts (as ``book._execute`` does) sees the pins before torch loads."""
    import nbformat
    import papermill

    monkeypatch.delenv("I2O_NUMERICS", raising=False)
    code = ("import json, os, torch\nfrom i2o.base import lineage\n"
            "print(json.dumps({**lineage.provenance(), "
            "'capability': torch.backends.cpu.get_cpu_capability()}))")
    source, out = tmp_path / "probe.ipynb", tmp_path / "probe.out.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), source)
    with runtime.environment(runtime.numerics_env()):
        papermill.execute_notebook(str(source), str(out), kernel_name="python3",
                                   progress_bar=False)
    text = json.loads(out.read_text())["cells"][0]["outputs"][0]["text"]
    facts = json.loads("".join(text))
    assert facts["pinned"] and facts["numerics"] == "portable"
    assert facts["pins"] == runtime.PORTABLE_PINS
    assert facts["capability"] == "AVX2"


class _ReportEnvironment:
    """A stand-in sweep job: what the worker process was started with."""

    def __call__(self, task, env: dict) -> dict:
        import os as worker_os

        names = (*runtime.PORTABLE_PINS, "XLA_FLAGS", "I2O_NUMERICS", "I2O_THREADS")
        return {key: worker_os.environ.get(key) for key in names}


def test_a_local_sweep_worker_starts_pinned(monkeypatch):
    import cloudpickle

    monkeypatch.delenv("I2O_NUMERICS", raising=False)
    for name in runtime.PORTABLE_PINS:
        monkeypatch.delenv(name, raising=False)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(toy_chapter)  # the worker's path has no tests/
    monkeypatch.setattr(sweep, "ResumableJob", _ReportEnvironment)
    monkeypatch.setattr(sweep, "_wait", lambda job, *log: job.result())
    (seen,) = sweep.submit("toy", [(toy(0),)], "local", max_parallel=1)  # toy(0) never runs
    assert {k: seen[k] for k in runtime.PORTABLE_PINS} == runtime.PORTABLE_PINS
    assert set(runtime.XLA_PORTABLE_FLAGS) <= set(seen["XLA_FLAGS"].split())
    assert not set(runtime.PORTABLE_PINS) & set(os.environ)  # the parent is left as it was


def test_results_key_depends_on_the_numerics_mode(monkeypatch):
    monkeypatch.setenv("I2O_NUMERICS", "portable")
    portable = cache_key.key("f", "n", {"a": 1})
    monkeypatch.setenv("I2O_NUMERICS", "native")
    assert cache_key.key("f", "n", {"a": 1}) != portable


def test_results_key_depends_on_the_portable_pins(monkeypatch):
    """A change of pins (as MKL's, from AVX2 to its compatible branch) changes results, so it
    recomputes them: the pins' values are part of every portable key."""
    monkeypatch.setenv("I2O_NUMERICS", "portable")
    before = cache_key.key("f", "n", {"a": 1})
    monkeypatch.setitem(runtime.PORTABLE_PINS, "MKL_CBWR", "AVX2")
    assert cache_key.key("f", "n", {"a": 1}) != before
    monkeypatch.setenv("I2O_NUMERICS", "native")
    native = cache_key.key("f", "n", {"a": 1})
    monkeypatch.setitem(runtime.PORTABLE_PINS, "MKL_CBWR", "AVX512")
    assert cache_key.key("f", "n", {"a": 1}) == native  # native mode has no pins


def test_the_books_adam_is_fused():
    """The fused kernel takes its square roots from the CPU's exact instruction; the CPU's
    default Adam from MKL's vector math, which differs between vendors
    (i2o.provenance.golden.NOT_PORTABLE_PROBES); it stays fused when an older state is loaded."""
    import torch

    from i2o.train.schedule import adam, make_optimizer

    model = torch.nn.Linear(3, 2)
    for optimizer in (adam(model.parameters(), lr=1e-3), make_optimizer(model, 1e-3, 1e-4)):
        assert optimizer.defaults["fused"] is True
    older = torch.optim.Adam(model.parameters(), lr=1e-3)  # as a checkpoint of before
    model(torch.ones(4, 3)).sum().backward()
    older.step()
    resumed = adam(model.parameters(), lr=1e-3)
    resumed.load_state_dict(older.state_dict())
    assert resumed.param_groups[0]["fused"] is True
    resumed.step()


def test_an_executed_notebook_is_stale_in_another_numerics_mode(monkeypatch):
    params = profiles.resolve("affine", "smoke")
    monkeypatch.setenv("I2O_NUMERICS", "portable")
    portable = stamps.stamp("affine", params)
    monkeypatch.setenv("I2O_NUMERICS", "native")
    assert stamps.stamp("affine", params) != portable


def test_stored_entries_record_their_provenance(monkeypatch):
    monkeypatch.delenv("I2O_NUMERICS", raising=False)
    results.cached("f", "n", {"a": 1}, lambda: {"x": [1.0]})
    meta = json.loads((cache_entries.entry_dir("f", "n", {"a": 1}) / "meta.json").read_text())
    assert meta["provenance"]["numerics"] == "portable"
    assert meta["provenance"]["cpu"] and meta["provenance"]["torch"]


@pytest.mark.parametrize("script", [TORCH_STEPS, JAX_STEPS, NUMPY_STEPS],
                         ids=["torch-mdeq", "jax-maml", "numpy-blas"])
def test_portable_runs_are_bit_identical(script):
    env = _portable_env()
    assert _digest(script, env) == _digest(script, env)


def _wider_than_avx2() -> bool:
    return bool({"avx512f", "amx_tile"} & runtime._cpu_flags())


@pytest.mark.skipif(not _wider_than_avx2(),
                    reason="this CPU has no AVX-512: every library picks AVX2 kernels here with "
                           "or without the pins, so dropping one cannot change the arrays")
@pytest.mark.parametrize("pin", list(SHOWN_BY))
def test_dropping_one_pin_changes_the_arrays(pin):
    script = SHOWN_BY[pin]
    assert _digest(script, _portable_env(drop=pin)) != _digest(script, _portable_env())


def test_the_xla_instruction_set_pin_is_honoured():
    """XLA is shown by narrowing its pin, not by dropping it: on AVX-512 hosts measured so far
    (AMD EPYC, jaxlib 0.10.2) its code with and without the AVX2 pin is bit-identical, since
    LLVM prefers 256-bit vectors there, so dropping the pin shows nothing; pinning one level
    lower (AVX, no FMA) changes the arrays on every AVX2 host, so the flag is read and obeyed."""
    env = _portable_env()
    narrower = {**env, "XLA_FLAGS": env["XLA_FLAGS"].replace("--xla_cpu_max_isa=AVX2",
                                                             "--xla_cpu_max_isa=AVX")}
    assert "--xla_cpu_max_isa=AVX2" in env["XLA_FLAGS"]
    assert _digest(XLA_TRANSCENDENTALS, narrower) != _digest(XLA_TRANSCENDENTALS, env)


def test_provenance_line_says_when_the_pins_are_missing(monkeypatch):
    monkeypatch.setenv("I2O_NUMERICS", "portable")
    for name in runtime.PORTABLE_PINS:
        monkeypatch.delenv(name, raising=False)
    assert "NOT in effect" in lineage.provenance_line(lineage.provenance())
    with runtime.environment(runtime.numerics_env("portable")):
        facts = lineage.provenance()
    assert facts["pinned"] and "pinned to AVX2" in lineage.provenance_line(facts)


def test_benchmark_subprocesses_run_in_the_mode_they_are_given():
    sys.path.insert(0, str(Path(locations.repo_root()) / "benchmarks"))
    try:
        import bench_numerics
    finally:
        sys.path.pop(0)
    assert bench_numerics.mode_env("native")["I2O_NUMERICS"] == "native"
    assert "ATEN_CPU_CAPABILITY" not in bench_numerics.mode_env("native")
    assert bench_numerics.mode_env("portable")["ATEN_CPU_CAPABILITY"] == "avx2"
