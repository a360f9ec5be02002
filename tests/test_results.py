import os
import subprocess
import sys

import numpy as np
import pytest

from i2o.compute import cache_entries, cache_key, jax_cache, results


def test_computes_once_then_reads(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"curve": np.arange(4.0), "nested": {"best": 0.5, "label": "ift"}, "n": 3}

    first = results.cached("fig", "curve", {"a": 1}, compute)
    second = results.cached("fig", "curve", {"a": 1}, compute)
    assert len(calls) == 1
    np.testing.assert_array_equal(first["curve"], second["curve"])
    assert second["nested"] == {"best": 0.5, "label": "ift"} and second["n"] == 3
    results.cached("fig", "curve", {"a": 2}, compute)
    assert len(calls) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete_meta"])
def test_corrupted_entry_is_detected_and_recomputed(damage):
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.linspace(0, 1, 1000)}

    results.cached("fig", "x", {}, compute)
    entry = cache_entries.entry_dir("fig", "x", {})
    arrays = entry / "arrays.npz"
    if damage == "truncate":
        arrays.write_bytes(arrays.read_bytes()[:100])
    elif damage == "flip":
        blob = bytearray(arrays.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        arrays.write_bytes(bytes(blob))
    else:
        (entry / "meta.json").unlink()
    with pytest.raises(cache_entries.CorruptEntry):
        cache_entries.load(entry)
    with pytest.warns(UserWarning, match="corrupted entry"):
        again = results.cached("fig", "x", {}, compute)
    assert len(calls) == 2
    np.testing.assert_allclose(again["x"], np.linspace(0, 1, 1000))


def test_failed_compute_leaves_no_entry():
    def boom():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        results.cached("fig", "boom", {}, boom)
    assert results.lookup("fig", "boom", {}) is None
    assert not list((cache_entries.results_dir()).rglob("arrays.npz"))


def test_key_depends_on_source_and_params():
    assert cache_key.key("f", "n", {"a": 1}) != cache_key.key("f", "n", {"a": 2})
    of_package = cache_key.key("f", "n", {"a": 1})
    assert cache_key.key("f", "n", {"a": 1}, module="i2o.compute.results") != of_package
    assert (cache_key.source_hash(["i2o.compute.results"])
            == cache_key.source_hash(["i2o.compute.results"]))
    with pytest.raises(ValueError, match="not a module of i2o"):
        cache_key.source_hash(["i2o.no_such_module"])


def test_checkpoint_dir_is_tied_to_key():
    a = cache_entries.checkpoint_dir("fig", "run", {"seed": 0})
    b = cache_entries.checkpoint_dir("fig", "run", {"seed": 1})
    assert a.is_dir() and a != b


def test_objects_are_refused():
    with pytest.raises(TypeError, match="not an array"):
        results.cached("fig", "obj", {}, lambda: {"bad": object()})


_COMPILE_ONCE = """
import jax, jax.numpy as jnp
from i2o.compute import results
print(results.jax_compilation_cache())
print(float(jax.jit(lambda x: jnp.sin(x).sum() * 3.0)(jnp.arange(5.0))))
"""


def test_jax_programs_are_kept_in_the_results_cache_and_give_the_same_numbers(tmp_path):
    env = {**os.environ, "I2O_RESULTS_DIR": str(tmp_path)}

    def run(**extra):
        out = subprocess.run([sys.executable, "-c", _COMPILE_ONCE], env={**env, **extra},
                             capture_output=True, text=True, check=True)
        return out.stdout.split()

    first = run()
    assert first[0] == str(tmp_path / jax_cache.JAX_CACHE)
    kept = sorted(p.name for p in (tmp_path / jax_cache.JAX_CACHE).iterdir())
    assert kept, "no compiled program was written"
    second = run()
    assert second == first
    assert sorted(p.name for p in (tmp_path / jax_cache.JAX_CACHE).iterdir()) == kept  # reused
    off = run(I2O_JAX_CACHE="0")
    assert off == ["None", first[1]]


def test_a_checkpoint_folder_keeps_the_whole_key_when_the_name_holds_a_dot():
    a = cache_entries.checkpoint_dir("meta", "train-lam0.5", {"seed": 0})
    b = cache_entries.checkpoint_dir("meta", "train-lam0.5", {"seed": 1})
    assert a != b and a.name.startswith("train-lam0.5-") and a.name.endswith(".ckpt")


def test_the_face_hands_computing_code_the_cache_modules_own_names():
    """What computing code reads from :mod:`i2o.compute.results` is the cache modules' own object,
    so a key computed through the face is the key; the face's own functions are in no key."""
    assert results.key is cache_key.key and results.INERT is cache_key.INERT
    assert results.checkpoint_dir is cache_entries.checkpoint_dir
    assert results.jax_compilation_cache is jax_cache.jax_compilation_cache
    face = {"i2o.compute.results", "i2o.compute.cache_key", "i2o.compute.cache_entries",
            "i2o.compute.cache_locks", "i2o.compute.cache_costs", "i2o.compute.jax_cache"}
    assert face <= cache_key.CACHE_MACHINERY
    assert not face & set(cache_key.dependencies("i2o.chapters.meta.evaluate"))
