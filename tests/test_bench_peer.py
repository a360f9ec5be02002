"""The peer of `make bench`'s TINY step: the records of the authors' MDEQ code in
``bench_stability.REFERENCE`` carry what ``benchmarks/peer_mdeq.py`` prints, the bench divides by
the record of this machine's CPU model when there is one and says when it compares across
machines, and the script's own parts (CPU identity, commit, refusals) behave. The authors' code is
not run here (it is not part of this repository)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from i2o.base import runtime

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
XEON = {"vendor": "GenuineIntel", "family": 6, "model": 207}
EPYC = {"vendor": "AuthenticAMD", "family": 25, "model": 17}
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu avx2

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel Xeon
"""


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _load("bench_stability")


@pytest.fixture(scope="module")
def peer():
    return _load("peer_mdeq")


def test_every_record_has_the_fields_the_peer_script_prints(bench, peer):
    assert len(bench.REFERENCE) >= 2
    for record in bench.REFERENCE:
        assert tuple(record) == peer.RECORD_FIELDS
        for arm in peer.ARMS:
            assert set(record["seconds"][arm]) == {"mean", "min", "max", "steps"}
            seconds, _ = bench.peer_seconds(record, arm)
            assert seconds > 0


def test_the_records_are_issue_50s_measurement_and_the_unrecorded_one(bench):
    old, xeon = bench.REFERENCE[0], bench.REFERENCE[1]
    assert old["command"] == "not recorded" and old["cpu"] is None
    assert old["seconds"]["ift"]["mean"] == 9.7 and old["seconds"]["unrolled"]["mean"] == 14.0
    assert xeon["cpu"] == XEON and "anonymized-for-paper" in xeon["peer"]
    assert xeon["numerics"] == "native" and "cls_mdeq_TINY.yaml" in xeon["settings"]
    assert [xeon["seconds"]["ift"][k] for k in ("min", "max", "steps")] == [12.2, 14.1, 3]
    assert [xeon["seconds"]["unrolled"][k] for k in ("min", "max", "steps")] == [29.2, 36.5, 3]


def test_the_bench_divides_by_the_record_of_this_cpu_model(bench):
    record, same = bench.reference_for(XEON)
    assert same and record["cpu"] == XEON
    record, same = bench.reference_for(EPYC)
    assert same and record["cpu"] == EPYC
    record, same = bench.reference_for({**EPYC, "model": 49})
    assert not same and record is bench.REFERENCE[-1]
    assert not bench.reference_for({**XEON, "model": 143})[1]


def test_a_record_of_this_cpu_model_wins_over_a_newer_one_elsewhere(bench, monkeypatch):
    epyc = {**bench.REFERENCE[1], "cpu": EPYC, "machine": "AMD EPYC (AuthenticAMD family 25 "
            "model 17), 2 cores"}
    monkeypatch.setattr(bench, "REFERENCE", [bench.REFERENCE[0], epyc, bench.REFERENCE[1]])
    assert bench.reference_for(EPYC) == (epyc, True)
    assert bench.reference_for(XEON) == (bench.REFERENCE[2], True)


def test_the_label_says_whether_it_compares_across_machines(bench):
    record = bench.REFERENCE[1]
    here = bench.peer_label(record, True, "Intel Xeon")
    elsewhere = bench.peer_label(record, False, "AMD EPYC (AuthenticAMD family 25 model 17)")
    assert "same CPU model" in here and "across machines" not in here
    assert "across machines" in elsewhere and "AMD EPYC" in elsewhere
    for label in (here, elsewhere):
        assert record["date"] in label and record["machine"] in label
        assert "command not recorded" in label and "peer commit not recorded" in label


def test_the_ratio_uses_the_mean_else_the_fastest_step(bench):
    measured = {"seconds": {"ift": {"mean": 13.0, "min": 12.0, "max": 14.0, "steps": 3}}}
    assert bench.peer_seconds(measured, "ift") == (13.0, "the peer's mean of 3 steps")
    seconds, statistic = bench.peer_seconds(bench.REFERENCE[1], "ift")
    assert seconds == 12.2 and "fastest of 3 steps" in statistic
    assert bench.peer_seconds(bench.REFERENCE[0], "unrolled")[0] == 14.0


def test_cpu_identity_reads_the_first_processor(peer, tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO)
    monkeypatch.setattr(runtime, "Path", lambda _path: cpuinfo)  # lineage reads it through runtime
    monkeypatch.setattr(peer, "Path", lambda _path: cpuinfo)
    cpu = peer.cpu_identity()
    assert cpu == {"model_name": "AMD EPYC 9R14", **EPYC}
    assert peer.machine_label(cpu, 2) == "AMD EPYC 9R14 (AuthenticAMD family 25 model 17), 2 cores"
    cpuinfo.write_text("processor : 0\nmodel name : X\n")
    assert peer.cpu_identity() == {"model_name": "X", "vendor": None, "family": None,
                                   "model": None}
    cpuinfo.write_text("processor : 0\nmodel name : 7\nmodel : 17\n")  # name before number
    assert peer.cpu_identity()["model"] == 17


def test_the_cpu_identity_leaves_the_script_unpinned(peer):
    """The script measures the peer natively: reading the CPU through i2o (whose import pins the
    libraries not loaded yet) must not put the pins into its environment."""
    pins = (*runtime.PORTABLE_PINS, "XLA_FLAGS")
    env = {name: value for name, value in os.environ.items() if name not in pins}
    script = str(BENCHMARKS / "peer_mdeq.py")
    code = (f"import json, runpy; script = runpy.run_path({script!r}); script['cpu_identity'](); "
            "print(json.dumps(script['pins_set']()))")
    done = subprocess.run([sys.executable, "-c", code], env={**env, "I2O_NUMERICS": "portable"},
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == {}


def test_the_peer_commit_comes_from_git_else_the_snapshot_marker(peer, tmp_path):
    assert peer.peer_commit(tmp_path) == "unknown"
    (tmp_path / "PEER_COMMIT").write_text("3d5e1e2\n")
    assert peer.peer_commit(tmp_path).startswith("3d5e1e2 (snapshot without .git")


def test_the_script_refuses_pins_and_a_folder_that_is_no_clone(peer, tmp_path, monkeypatch):
    for name in peer.TORCH_PINS:  # the test session runs portable: its pins are set
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert peer.pins_set() == {"MKL_CBWR": "COMPATIBLE"}
    with pytest.raises(SystemExit, match="MKL_CBWR=COMPATIBLE"):
        peer.main(["--clone", str(tmp_path), "--steps", "1"])
    monkeypatch.delenv("MKL_CBWR")
    with pytest.raises(SystemExit, match="not a clone"):
        peer.main(["--clone", str(tmp_path), "--steps", "1"])


def test_the_options_are_their_command_line_settings(peer):
    args = peer.parse_args(["--clone", "x", "--batch", "8"])
    ift = peer.peer_options(args, "ift")
    assert ift == ["DEQ.F_THRES", "18", "DEQ.B_THRES", "20", "DEQ.F_EPS", "1e-07",
                   "TRAIN.BATCH_SIZE_PER_GPU", "8", "TRAIN.PRETRAIN_STEPS", "0"]
    assert peer.peer_options(args, "unrolled") == ift + ["TRAIN.ALL_UNROLLED", "True"]
    assert peer.seconds_summary([1.0, 2.0, 4.5]) == {"mean": 2.5, "min": 1.0, "max": 4.5,
                                                     "steps": 3}


def test_the_time_entries_divide_by_the_chosen_record(bench, peer, monkeypatch):
    def fake_step(model, arm, **kwargs):
        seconds = {"ift": 8.49, "unrolled": 15.09}[arm]
        return {"seconds": seconds, "cpu_seconds": seconds, "threads": kwargs["threads"],
                "device": "cpu", "peak_mb": 1.0}

    monkeypatch.setattr(bench, "measure_step", fake_step)
    monkeypatch.setattr(peer, "cpu_identity", lambda: {"model_name": "Intel Xeon", **XEON})
    monkeypatch.setattr(bench, "_peer_script", lambda: peer)
    at_default_threads = [entry for entry in bench._time_entries() if "goal" in entry]
    ift, unrolled = at_default_threads  # the arms in order: IFT, unrolled
    assert (ift["ratio"], unrolled["ratio"]) == (0.696, 0.517)  # issue 50's 0.70 and 0.52
    assert ift["peer_same_cpu"] and ift["peer_range"] == [12.2, 14.1]
    assert "fastest of 3 steps" in ift["note"] and "same CPU model" in ift["peer"]
