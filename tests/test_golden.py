"""Fingerprints of results (``python -m i2o.results fingerprint``), the numerics probes and the
golden fingerprints of ``tests/golden/``: the cross-machine test of portable numerics.

The smoke fingerprints themselves are compared in ``test_book.py``, on the smoke book it builds.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import pytest
from toy_jobs import ResidualJob, toy

from i2o.base import runtime
from i2o.compute import cache_entries
from i2o.compute.job import Job
from i2o.provenance import __main__ as commands
from i2o.provenance import compare, fingerprint, golden, probes


def _portable_x86() -> str | None:
    """Why the goldens do not apply here, or ``None`` when they do."""
    if runtime.numerics_mode() != "portable":
        return "the goldens are portable mode's; I2O_NUMERICS=native here"
    if not runtime.is_x86_64():
        return "the goldens are those of x86-64 CPUs pinned to AVX2"
    return None


# -- fingerprints of cache entries --------------------------------------------------------------

@pytest.mark.parametrize("path, measured", [
    ("seconds", True), ("history/seconds", True), ("train_seconds", True),
    ("seconds_per_step", True), ("cpu_seconds_per_step", True), ("peak_mb", True),
    ("memory_method", True), ("device", True), ("s0/flow/time", False), ("accuracy", False),
    ("history/loss", False), ("mbits", False), ("subseconds", False)])
def test_measurements_are_told_from_results(path, measured):
    assert fingerprint.is_measured(path) is measured


def test_an_entry_fingerprint_ignores_times_and_sees_every_result_bit(tmp_path):
    base = {"loss": np.linspace(0, 1, 5), "history": {"seconds": np.ones(3), "acc": [0.5]},
            "peak_mb": 12.0}
    paths = []
    for i, variant in enumerate([base, {**base, "peak_mb": 99.0,
                                        "history": {"seconds": np.zeros(3), "acc": [0.5]}},
                                 {**base, "loss": np.nextafter(base["loss"], 2)}]):
        path = tmp_path / f"entry{i}"
        cache_entries.store(path, variant, {})
        paths.append(path)
    same, timed, moved = (fingerprint.entry_fingerprint(p) for p in paths)
    assert same == timed  # only measurements changed
    assert same != moved  # one ulp of a result changed


def test_a_corrupted_entry_is_not_fingerprinted(tmp_path):
    path = tmp_path / "entry"
    cache_entries.store(path, {"x": np.arange(4.0)}, {})
    (path / "arrays.npz").write_bytes(b"truncated")
    with pytest.raises(cache_entries.CorruptEntry):
        fingerprint.entry_fingerprint(path)


@dataclasses.dataclass(frozen=True)
class _Uses(Job):
    """A job made of a toy job, with a measured field: shapes the toy chapter does not have."""

    inner: ResidualJob
    figure: ClassVar[str] = "stability"

    @property
    def name(self) -> str:
        return "uses"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        return {"y": self.inner.run()["residuals"] * 2,
                "seconds": np.random.default_rng().random()}


def test_a_chapters_entries_include_the_jobs_its_jobs_are_made_of(monkeypatch):
    # two jobs of one name, told apart by their parameters (as deq_gaps' classifiers are)
    jobs = [_Uses(toy(2)), toy(1), toy(3), toy(3, test_iters=13)]

    class Runs:
        check_params = staticmethod(lambda params: None)

        @staticmethod
        def jobs(params):
            return jobs

    monkeypatch.setattr(fingerprint.door, "runs_module", lambda figure: Runs)
    params = fingerprint.profiles.resolve("stability", "smoke")
    labels = sorted(fingerprint.chapter_entries("stability", params))
    assert labels[:2] == ["residuals-seed1", "residuals-seed2"] and labels[4] == "uses"
    assert labels[2].startswith("residuals-seed3[") and labels[3].startswith("residuals-seed3[")
    before = fingerprint.chapter_fingerprint("stability", params)
    assert before["digest"] is None and len(before["missing"]) == 5

    def compute_all():
        for job in jobs:
            job.run()

    compute_all()
    first = fingerprint.chapter_fingerprint("stability", params)
    assert first["digest"] and not first["missing"] and len(first["entries"]) == 5
    cache_entries.clean("stability")  # recomputed: other times, same results
    cache_entries.clean("toy")
    compute_all()
    assert fingerprint.chapter_fingerprint("stability", params) == first


def _file(entries: dict[str, dict[str, str]], cpu: str = "Some CPU") -> dict[str, Any]:
    return {"kind": fingerprint.KIND, "profile": "smoke", "replicate": 0, "git": "abc",
            "machine": {"cpu": cpu, "vendor": "GenuineIntel", "flags": ["avx2"],
                        "numerics": "portable", "torch": "2.14.1"},
            "chapters": {figure: {"digest": "d", "entries": named, "missing": []}
                         for figure, named in entries.items()}}


GOLDEN = _file({"stability": {"ift": "1", "unrolled": "2"}, "meta": {"train": "3"}})


def test_uncomputed_entries_and_other_settings_never_compare_equal():
    empty = _file({"stability": {}})
    empty["chapters"]["stability"]["missing"] = ["ift", "unrolled"]
    difference = fingerprint.difference(empty, copy.deepcopy(empty))
    assert not difference.same
    assert "computed on neither side" in " ".join(difference.lines())
    quick = copy.deepcopy(GOLDEN)
    quick["profile"] = "quick"
    assert fingerprint.difference(GOLDEN, quick).settings == ["profile 'smoke' against 'quick'"]
    corrupt = copy.deepcopy(GOLDEN)
    corrupt["chapters"]["meta"]["entries"]["train"] = fingerprint.CORRUPT
    assert fingerprint.difference(corrupt, copy.deepcopy(corrupt)).differ == {"meta": ["train"]}


def test_a_corrupt_entry_is_reported_and_fails_the_command(monkeypatch, capsys):
    class Runs:
        check_params = staticmethod(lambda params: None)

        @staticmethod
        def jobs(params):
            return [toy(3)]

    monkeypatch.setattr(fingerprint.door, "runs_module", lambda figure: Runs)
    toy(3).run()
    assert fingerprint.main(["stability", "--profile", "smoke"]) == 0
    path = fingerprint.chapter_entries("stability", fingerprint.profiles.resolve(
        "stability", "smoke"))["residuals-seed3"]
    (path / "arrays.npz").write_bytes(b"damaged")
    assert fingerprint.main(["stability", "--profile", "smoke"]) == 1
    assert "1 corrupt (residuals-seed3)" in capsys.readouterr().err


def test_fingerprint_files_are_compared_entry_by_entry(tmp_path, capsys):
    moved = copy.deepcopy(GOLDEN)
    moved["chapters"]["stability"]["entries"]["unrolled"] = "9"
    moved["machine"]["cpu"] = "AMD EPYC"
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(GOLDEN))
    b.write_text(json.dumps(GOLDEN))
    c.write_text(json.dumps(moved))
    assert compare.main([str(a), str(b)]) == 0
    assert "fingerprints: all agree" in capsys.readouterr().out
    assert compare.main([str(a), str(c)]) == 1
    out = capsys.readouterr().out
    assert "stability: 1 entry differ: unrolled" in out and "== meta: identical" in out
    assert "AMD EPYC" in out and "Some CPU" in out
    numbers = tmp_path / "numbers.json"
    numbers.write_text(json.dumps({"stability": {"numbers": {}, "claims": []}}))
    assert compare.main([str(a), str(numbers)]) == 2
    assert "compare two of a kind" in capsys.readouterr().err


def test_the_golden_mismatch_names_entries_first_probe_and_both_cpus():
    assert golden.mismatch(GOLDEN, copy.deepcopy(GOLDEN)) is None
    here = copy.deepcopy(GOLDEN)
    here["chapters"]["meta"]["entries"]["train"] = "4"
    here["machine"] = {**here["machine"], "cpu": "AMD EPYC 7B13", "vendor": "AuthenticAMD"}
    probes_golden = {"machine": GOLDEN["machine"], "probes": {name: "a" for name in probes.PROBES}}
    probes_here = copy.deepcopy(probes_golden)
    probes_here["probes"]["broyden_solve"] = "b"
    probes_here["probes"]["numpy_scipy"] = "b"
    message = golden.mismatch(GOLDEN, here, probes_golden, probes_here)
    assert "meta: 1 entry differ: train" in message
    assert "first numerics probe that differs: broyden_solve" in message
    assert "Some CPU" in message and "AMD EPYC 7B13" in message
    same_kernels = golden.mismatch(GOLDEN, here, probes_golden, probes_golden)
    assert "every numerics probe agrees" in same_kernels and "make golden" in same_kernels
    probes_here["probes"]["broyden_solve"] = "a"  # only numpy_scipy and the known one differ
    probes_here["probes"]["torch_sqrt"] = "b"
    assert "first numerics probe that differs: numpy_scipy" in golden.mismatch(
        GOLDEN, here, probes_golden, probes_here)
    other_torch = copy.deepcopy(here)
    other_torch["machine"]["torch"] = "2.15.0"
    message = golden.mismatch(GOLDEN, other_torch, probes_golden, probes_golden)
    assert "not the golden's setup" in message and "2.15.0" in message
    assert "make golden" not in message


def test_not_portable_entries_are_left_out_by_name(monkeypatch):
    here = copy.deepcopy(GOLDEN)
    here["chapters"]["stability"]["entries"]["ift"] = "other"
    assert golden.mismatch(GOLDEN, here) is not None
    monkeypatch.setitem(golden.NOT_PORTABLE, "stability", {"ift": "a stated reason"})
    assert golden.mismatch(GOLDEN, here) is None
    here["chapters"]["stability"]["entries"]["unrolled"] = "other"
    assert "unrolled" in golden.mismatch(GOLDEN, here)


def test_the_fingerprint_command_refuses_an_unknown_figure(capsys):
    assert commands.main(["fingerprint", "nonesuch"]) == 2
    assert "'nonesuch'" in capsys.readouterr().err
    assert commands.main(["frobnicate"]) == 2
    assert "must be one of fingerprint" in capsys.readouterr().err


# -- the probes and their goldens ---------------------------------------------------------------

def test_probe_digests_see_dtype_shape_and_bits():
    a = np.arange(6.0)
    assert probes.digest([a]) == probes.digest([a.copy()])
    assert probes.digest([a]) != probes.digest([a.reshape(2, 3)])
    assert probes.digest([a]) != probes.digest([a.astype(np.float32)])
    assert probes.digest([a]) != probes.digest([np.nextafter(a, 7)])


def test_an_emulated_cpu_is_named_with_its_own_vendor():
    assert probes.emulated_vendor("EPYC-Rome") == "AuthenticAMD"
    assert probes.emulated_vendor("Haswell-v4") == "GenuineIntel"


def test_deps_lists_each_job_class_with_the_modules_its_key_covers(capsys):
    assert commands.main(["deps", "stability", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "stability: i2o.chapters.stability.jobs.TrainJob (2 entries in smoke), keyed by" in out
    covered = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert "i2o.deq.broyden" in covered and "i2o.chapters.stability.jobs" in covered
    assert "i2o.chapters.stability.claims" not in covered and "i2o.compute.results" not in covered
    assert commands.main(["deps", "nonesuch"]) == 2
    assert "'nonesuch'" in capsys.readouterr().err
    assert commands.main(["--help"]) == 0
    assert "fingerprint" in capsys.readouterr().out


def test_an_unknown_probe_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown probe\(s\) 'fft'; allowed: mdeq_train_step"):
        probes.compute(["fft"])


def test_a_probe_known_not_to_be_portable_is_reported_not_asserted():
    golden_probes = {"machine": GOLDEN["machine"], "probes": {name: "a" for name in probes.PROBES}}
    here = copy.deepcopy(golden_probes)
    here["probes"]["torch_sqrt"] = "b"
    assert golden.probe_mismatch(golden_probes, here) is None
    here["probes"]["torch_mlp"] = "b"
    assert "torch_mlp" in golden.probe_mismatch(golden_probes, here)
    assert "torch_sqrt" not in golden.probe_mismatch(golden_probes, here)


def _convolutions_run_by(model_name: str, monkeypatch) -> set[probes.Convolution]:
    """Every convolution one forward pass of an MDEQ configuration runs (stem, ``f``, head)."""
    import torch
    import torch.nn.functional as F

    from i2o.models import MDEQClassifier, config

    seen: set[probes.Convolution] = set()
    conv2d = F.conv2d

    def recording(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
        stride = stride if isinstance(stride, int) else stride[0]
        padding = padding if isinstance(padding, int) else padding[0]
        assert groups == 1 and padding == w.shape[-1] // 2 and x.shape[-1] == x.shape[-2]
        seen.add(probes.Convolution(w.shape[1], w.shape[0], w.shape[-1], stride, x.shape[-1],
                                    b is not None))
        return conv2d(x, w, b, stride, padding, dilation, groups)

    monkeypatch.setattr(F, "conv2d", recording)
    model = MDEQClassifier(config(model_name))
    with torch.no_grad():
        f, x, z0 = model.prepare(torch.zeros(2, 3, 32, 32))
        model.classify(f(z0, x))
    return seen


@pytest.mark.parametrize("model_name", sorted(probes.WIDE_CONVOLUTIONS))
def test_the_wide_convolutions_are_the_widest_the_model_runs(model_name, monkeypatch):
    run = _convolutions_run_by(model_name, monkeypatch)
    probed = set(probes.WIDE_CONVOLUTIONS[model_name])
    assert probed <= run, probed - run
    for kernel, stride in {(conv.kernel, conv.stride) for conv in run}:
        family = [conv for conv in run if (conv.kernel, conv.stride) == (kernel, stride)]
        widest = max(family, key=lambda c: c.c_in * c.c_out * (c.size // c.stride) ** 2)
        assert widest in probed, (kernel, stride, widest)


def test_the_wide_convolutions_run_in_onednn():
    """At the probe's batch, with one thread, torch gives every probed convolution to oneDNN; at
    half of it, not the 1×1 ones (its own kernel), which the probe would then miss."""
    import torch

    select = getattr(torch._C, "_select_conv_backend", None)
    if select is None:
        pytest.skip("this torch does not expose how it picks a convolution's backend")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backends = {batch: {select(torch.zeros(batch, c.c_in, c.size, c.size).contiguous(
            memory_format=torch.channels_last), torch.zeros(c.c_out, c.c_in, c.kernel, c.kernel),
            None, [c.stride] * 2, [c.kernel // 2] * 2, [1, 1], False, [0, 0], 1, None).name
            for convs in probes.WIDE_CONVOLUTIONS.values() for c in convs}
            for batch in (probes.WIDE_CONVOLUTION_BATCH, probes.WIDE_CONVOLUTION_BATCH // 2)}
    finally:
        torch.set_num_threads(threads)
    assert backends[probes.WIDE_CONVOLUTION_BATCH] == {"Mkldnn"}
    assert backends[probes.WIDE_CONVOLUTION_BATCH // 2] != {"Mkldnn"}


def test_the_goldens_exist_and_name_their_machine():
    for path in (golden.smoke_path(), golden.probes_path()):
        found = golden.read(path)
        assert found["machine"]["cpu"] and found["machine"]["numerics"] == "portable", path
    assert set(golden.read(golden.probes_path())["probes"]) == set(probes.PROBES)
    assert golden.read(golden.smoke_path())["profile"] == "smoke"


@pytest.mark.slow
def test_probes_match_the_golden_probes():
    """Every kernel family the chapters use computes, in portable mode on this CPU, the bits it
    computed on the machine that wrote the goldens."""
    if reason := _portable_x86():
        pytest.skip(reason)
    found = probes.run(mode="portable")
    message = golden.probe_mismatch(golden.read(golden.probes_path()), found)
    assert message is None, message


#: The probes run on the emulated CPU, within about a minute: the torch kernels portable mode had
#: to fix (MKL's products and solves, its vector math, Adam's square root), the DEQ transformer's
#: products through NumPy's OpenBLAS and the others' families. ``wide_convolutions`` (42 s under
#: emulation) and ``transformer_step`` (54 s) agree there too (the Numerics page) but are left to
#: ``python -m i2o.probes NAME --emulate EPYC-Rome`` to keep ``make test`` within its budget.
EMULATED_PROBES = ("conv_group_norm", "broyden_solve", "numpy_products", "torch_mlp",
                   "torch_vector_math", "numpy_scipy")


@pytest.mark.slow
@pytest.mark.parametrize("cpu", probes.EMULATED_CPUS[:1])
def test_probes_agree_on_an_emulated_cpu_of_another_vendor(cpu):
    """The same probes on a CPU of another vendor and cache sizes, emulated by qemu-user: MKL
    chooses its code branch by vendor, so this is where a host-dependent kernel shows."""
    if reason := _portable_x86():
        pytest.skip(reason)
    if probes.qemu() is None:
        pytest.skip("qemu-x86_64 is absent (Debian package qemu-user; .ci/run installs it)")
    found = probes.run(mode="portable", emulate=cpu, names=EMULATED_PROBES)
    assert set(found["probes"]) == set(EMULATED_PROBES)
    message = golden.probe_mismatch(golden.read(golden.probes_path()), found)
    assert message is None, message
