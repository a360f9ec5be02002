"""Figure 5's training step: peak memory against N for both arms, and the TINY step time.

Every number comes from a fresh process
(:func:`~i2o.chapters.stability.stepcost.measure_step`; its docstring
gives the memory method: on CPU, the peak resident set size during the first step minus the
resident set size before it; on CUDA, ``torch.cuda.max_memory_allocated``).

- Memory: the TINY MDEQ at batch ``MEMORY_BATCH`` (smaller than 128 so that the unrolled arm at
  N = 36 fits in this machine's memory), forward N ∈ {9, 36} with no early stop, 20 backward
  Broyden steps. Reported: each arm's N = 36 / N = 9 ratio (goal for IFT: ≤ 1.1), which needs
  only its two ends (``I2O_BENCH_STABILITY_MEMORY_N``, comma-separated, default ``9,36``;
  ``9,18,36`` adds the middle point, four more processes: about 40 s). The forward
  Broyden solve of the IFT arm keeps 2 × B × N × D floats of low-rank factors, but outside autograd
  and only until it returns; the step's peak then comes from the backward pass (one application of
  f in the graph, the adjoint solve's factors), which does not depend on N. The same ratios are
  measured with Anderson acceleration (history m = 5) for comparison.
  The memory processes run two at a time (at most one per core): each reports its own peak
  resident set, which another process does not change, and they time nothing.
- Time: one TINY training step, batch 128, N = 18, B_THRES = 20, no early stop, per arm, with one
  thread and with torch's default (one per core; ``I2O_BENCH_STABILITY_THREADS``, comma-separated,
  default ``1,<cores>``), in this run's numerics mode: one untimed step
  (the process's first, which also measures its memory), then one timed step. With no early stop
  every step makes the same 18 + 20 Broyden steps, so one timed step after the first measures the
  steady state (the peer's record is the mean of its steps after the first). The authors' code
  is not run here: the ratio is against a record of it in :data:`REFERENCE`, the one measured on
  this machine's CPU model (vendor, family, model) when there is one, else the newest, and the
  entry then says that it compares across machines. ``benchmarks/peer_mdeq.py`` measures the
  authors' step on a machine and prints a record to add; ``benchmarks/README.md`` says how.
  The like-for-like ratio is the one at torch's default threads (the entry with the goal); the
  one-thread entries give the cost of a chapter's one-thread job, and
  ``I2O_BENCH_STABILITY_THREADS=<cores>`` leaves them out (two processes, about 85 s, fewer).
"""

from __future__ import annotations

import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import knobs

from i2o.base.runtime import numerics_mode
from i2o.chapters.stability.stepcost import measure_step

MEMORY_BATCH = 16
PEER_SCRIPT = Path(__file__).resolve().with_name("peer_mdeq.py")
#: The authors' MDEQ code, seconds per TINY training step: one record per measurement, oldest
#: first, with the fields of ``peer_mdeq.RECORD_FIELDS``; each arm's ``mean``, ``min`` (fastest
#: step) and ``max`` (slowest), ``None`` where not recorded. Not rerun by `make bench`:
#: ``benchmarks/peer_mdeq.py`` prints a new record (benchmarks/README.md).
REFERENCE: list[dict[str, Any]] = [
    {
        "seconds": {"ift": {"mean": 9.7, "min": None, "max": None, "steps": None},
                    "unrolled": {"mean": 14.0, "min": None, "max": None, "steps": None}},
        "date": "before 2026-11-22 (planning of the stability chapter, issue 3)",
        "machine": "this project's 2-core x86_64 CPU machine, steady state",
        "cpu": None,
        "threads": "torch's default",
        "numerics": "not recorded",
        "settings": "TINY MDEQ, batch 128, N = 18, B_THRES = 20",
        "command": "not recorded",
        "peer": "not recorded",
        "peer_commit": "not recorded",
        "details": {"recorded": "one number per arm, said to be the steady state; how many steps, "
                                "and which unrolled variant gave 14 s, were not recorded"},
    },
    {
        "seconds": {"ift": {"mean": None, "min": 12.2, "max": 14.1, "steps": 3},
                    "unrolled": {"mean": None, "min": 29.2, "max": 36.5, "steps": 3}},
        "date": ("2026-11-27 or 28, reported in issue 50 (filed after a8458ac, 2026-11-27 11:35 "
                 "UTC; open before 7e3452e, 2026-11-28 07:07 UTC)"),
        "machine": "Intel Xeon (GenuineIntel family 6 model 207), 2 cores",
        "cpu": {"vendor": "GenuineIntel", "family": 6, "model": 207},
        "threads": "torch's default: 2",
        "numerics": "native",
        "settings": "cls_mdeq_TINY.yaml, batch 128, f_thres 18, b_thres 20, F_EPS 1e-7",
        "command": "not recorded (the authors' code run as a new user would, with these settings)",
        "peer": "zaccharieramzi/deq, branch anonymized-for-paper",
        "peer_commit": "not recorded",
        "details": {"source": "issue 50, 'Peers measured, not remembered'",
                    "recorded": "the range of 3 steps per arm; their mean and how the unrolled "
                                "arm was made were not",
                    "ours_then": "portable, 2 threads: IFT 8.49 s, unrolled 15.09 s"},
    },
    {
        "seconds": {"ift": {"mean": 16.81, "min": 16.56, "max": 17.04, "steps": 3},
                    "unrolled": {"mean": 38.84, "min": 28.21, "max": 49.1, "steps": 3}},
        "date": "2026-11-28 23:44 UTC (idle machine: load average 0.08 at the start)",
        "machine": "AMD EPYC (AuthenticAMD family 25 model 17), 2 cores",
        "cpu": {"vendor": "AuthenticAMD", "family": 25, "model": 17},
        "threads": "torch's default: 2 (OMP_NUM_THREADS unset)",
        "numerics": "native",
        "settings": ("cls_mdeq_TINY.yaml, batch 128, f_thres 18, b_thres 20, F_EPS 1e-07, B_EPS "
                     "their default 1e-3, random CIFAR-shaped input; 18 forward and 20 backward "
                     "Broyden steps in every timed step"),
        "command": ("PYTHONPATH=<yacs, termcolor> python benchmarks/peer_mdeq.py --clone "
                    "<zaccharieramzi/deq checkout> --steps 3"),
        "peer": "zaccharieramzi/deq, branch anonymized-for-paper",
        "peer_commit": "3d5e1e23e4357434079a4bad21222a37820ac602",
        "details": {"torch": "2.14.1", "cpu_seconds": {"ift": 33.27, "unrolled": 68.54},
                    "unrolled": "their TRAIN.ALL_UNROLLED flag (backpropagation through the "
                                "forward Broyden iterations)"},
    },
]


def _peer_script():
    """``benchmarks/peer_mdeq.py`` as a module (the benchmarks are files, not a package)."""
    spec = importlib.util.spec_from_file_location("peer_mdeq", PEER_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def same_cpu(record_cpu: dict[str, Any] | None, cpu: dict[str, Any]) -> bool:
    """Whether a record was measured on the CPU model ``cpu``: same vendor, family and model."""
    keys = ("vendor", "family", "model")
    return record_cpu is not None and all(
        record_cpu.get(key) is not None and record_cpu.get(key) == cpu.get(key) for key in keys)


def reference_for(cpu: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The record to divide by on the CPU ``cpu``, and whether it was measured on that CPU model:
    the newest such record, else the newest record."""
    same = [record for record in REFERENCE if same_cpu(record["cpu"], cpu)]
    return (same[-1], True) if same else (REFERENCE[-1], False)


def peer_seconds(record: dict[str, Any], arm: str) -> tuple[float, str]:
    """The peer's seconds per step for ``arm`` and what that number is: the mean of the steps,
    else (mean not recorded) the fastest step."""
    arm_seconds = record["seconds"][arm]
    steps = arm_seconds["steps"]
    if arm_seconds["mean"] is not None:
        return arm_seconds["mean"], (f"the peer's mean of {steps} steps" if steps else
                                     "the one number recorded for the peer")
    return arm_seconds["min"], f"the peer's fastest of {steps} steps (its mean was not recorded)"


def peer_label(record: dict[str, Any], on_this_cpu: bool, machine: str) -> str:
    """The peer of a TINY step entry: whose times, measured when, where, how, and whether on this
    machine's CPU model (``machine`` names it) or across machines; how to rerun."""
    where = ("the same CPU model as this machine" if on_this_cpu else
             f"another CPU model than this machine's ({machine}): the ratio compares across "
             "machines")
    return (f"authors' MDEQ code ({record['peer']}; peer commit {record['peer_commit']}), not "
            f"rerun by make bench: measured {record['date']} on {record['machine']}, "
            f"{where}; {record['settings']}; threads {record['threads']}; numerics "
            f"{record['numerics']}; command {record['command']}; to rerun: "
            "benchmarks/peer_mdeq.py (benchmarks/README.md)")


def memory_counts() -> list[int]:
    """The forward counts N of the memory entries (``I2O_BENCH_STABILITY_MEMORY_N``), ascending."""
    counts = sorted(set(knobs.integers("I2O_BENCH_STABILITY_MEMORY_N", "9,36")))
    if len(counts) < 2:
        given = os.environ.get("I2O_BENCH_STABILITY_MEMORY_N")
        raise knobs.KnobError(f"I2O_BENCH_STABILITY_MEMORY_N={given!r}: expected at least two "
                              "distinct counts (the ratio divides the largest by the smallest)")
    return counts


def thread_counts() -> list[int]:
    """The thread counts of the time entries (``I2O_BENCH_STABILITY_THREADS``), ascending."""
    return sorted(set(knobs.integers("I2O_BENCH_STABILITY_THREADS",
                                     f"1,{os.cpu_count() or 1}")))


def _memory_step(solver: str, arm: str, n: int) -> dict[str, Any]:
    return measure_step("tiny", arm=arm, train_iter=n, backward_iter=20, batch=MEMORY_BATCH,
                        steps=0, warmup=0, tol=0.0, solver=solver)


def _memory_entries(solver: str) -> list[dict]:
    counts = memory_counts()
    runs = [(arm, n) for arm in ("ift", "unrolled") for n in counts]
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        measured = dict(zip(runs, pool.map(lambda run: _memory_step(solver, *run), runs),
                            strict=True))
    entries = []
    for arm in ("ift", "unrolled"):
        peaks = {}
        for n in counts:
            m = measured[(arm, n)]
            peaks[n] = m["peak_mb"]
            entries.append({"name": f"memory {solver} {arm} N={n} (TINY, batch {MEMORY_BATCH})",
                            "value": round(m["peak_mb"], 1), "unit": "MB",
                            "note": m["memory_method"]})
        ratio = peaks[counts[-1]] / peaks[counts[0]]
        entry = {"name": f"memory ratio {solver} {arm} N={counts[-1]} / N={counts[0]}",
                 "value": round(ratio, 3), "unit": "×"}
        if arm == "ift":
            entry["goal"] = "≤ 1.1"
            entry["note"] = ("IFT: the forward solve runs without autograd and frees its storage "
                             "before the backward pass, whose peak does not depend on N")
        else:
            entry["note"] = "unrolled: the autograd graph holds every iterate and factor"
        entries.append(entry)
    return entries


def _time_entries() -> list[dict]:
    """The TINY step at one thread and at torch's default for this machine (one per core): the
    authors' code, run unchanged, uses the default, so that is the like-for-like ratio."""
    entries = []
    default_threads = os.cpu_count() or 1
    script = _peer_script()
    cpu = script.cpu_identity()
    record, on_this_cpu = reference_for(cpu)
    label = peer_label(record, on_this_cpu, script.machine_label(cpu, os.cpu_count()))
    for threads in thread_counts():
        for arm in ("ift", "unrolled"):
            m = measure_step("tiny", arm=arm, train_iter=18, backward_iter=20, batch=128,
                             steps=1, warmup=0, tol=0.0, threads=threads)
            reference, statistic = peer_seconds(record, arm)
            entry = {
                "name": f"TINY training step {arm} (batch 128, N=18, B_THRES=20, "
                        f"{threads} thread{'s' if threads > 1 else ''})",
                "value": round(m["seconds"], 2), "unit": "s",
                "peer": label, "peer_value": reference,
                "peer_range": [record["seconds"][arm]["min"], record["seconds"][arm]["max"]],
                "peer_same_cpu": on_this_cpu, "ratio": round(m["seconds"] / reference, 3),
                "note": (f"{m['threads']} thread(s), {m['device']}, {numerics_mode()} numerics; "
                         f"ratio against {statistic}; CPU time per step "
                         f"{m['cpu_seconds']:.2f} s (wall {m['seconds']:.2f} s); peak memory "
                         f"+{m['peak_mb']:.0f} MB"),
            }
            if threads == default_threads:
                entry["goal"] = "ratio ≤ 0.7 (at torch's default thread count, as the reference)"
            entries.append(entry)
    return entries


def run() -> list[dict]:
    return _time_entries() + _memory_entries("broyden") + _memory_entries("anderson")


if __name__ == "__main__":
    for row in run():
        print(row)
