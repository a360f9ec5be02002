"""Figure 5's training step: peak memory against N for both arms, and the TINY step time.

Every number comes from a fresh process
(:func:`~i2o.chapters.stability.stepcost.measure_step`; its docstring
gives the memory method: on CPU, the peak resident set size during the first step minus the
resident set size before it; on CUDA, ``torch.cuda.max_memory_allocated``).

- Memory: the TINY MDEQ at batch ``MEMORY_BATCH`` (smaller than 128 so that the unrolled arm at
  N = 36 fits in this machine's memory), forward N ∈ {9, 18, 36} with no early stop, 20 backward
  Broyden steps. Reported: each arm's N = 36 / N = 9 ratio (goal for IFT: ≤ 1.1). The forward
  Broyden solve of the IFT arm keeps 2 × B × N × D floats of low-rank factors, but outside autograd
  and only until it returns; the step's peak then comes from the backward pass (one application of
  f in the graph, the adjoint solve's factors), which does not depend on N. The same ratios are
  measured with Anderson acceleration (history m = 5) for comparison.
- Time: one TINY training step, batch 128, N = 18, B_THRES = 20, no early stop, per arm, with one
  thread and with torch's default (one per core); the authors' code is not run here (it would have
  to be vendored), so the ratio is against the times measured for it on this 2-core CPU during
  planning, with its default threading: 9.7 s (IFT) and 14 s (unrolled) per step.
  :data:`REFERENCE` records what is known of that measurement; ``benchmarks/README.md`` says how
  to rerun the peer and update it.
"""

from __future__ import annotations

import os

from i2o.chapters.stability.stepcost import measure_step

MEMORY_BATCH = 16
MEMORY_N = (9, 18, 36)
# The authors' MDEQ code, seconds per TINY training step: measured once, not rerun by `make bench`
# (benchmarks/README.md: how to rerun it). Kept with what was recorded of that measurement; the
# command and the peer's commit were not written down then, and are said to be unknown.
REFERENCE = {
    "seconds": {"ift": 9.7, "unrolled": 14.0},
    "date": "before 2026-11-22 (planning of the stability chapter, issue 3)",
    "machine": "this project's 2-core x86_64 CPU machine, torch's default threads, steady state",
    "command": "not recorded",
    "peer_commit": "not recorded",
}


def peer_label() -> str:
    """The peer of the TINY step entries: whose times, measured when and where, how to rerun."""
    r = REFERENCE
    return (f"authors' MDEQ code, not rerun: measured {r['date']} on {r['machine']}; command "
            f"{r['command']}, peer commit {r['peer_commit']}; to rerun: benchmarks/README.md")


def _threads() -> int:
    return int(os.environ.get("I2O_THREADS", "1"))


def _memory_entries(solver: str) -> list[dict]:
    entries = []
    for arm in ("ift", "unrolled"):
        peaks = {}
        for n in MEMORY_N:
            m = measure_step("tiny", arm=arm, train_iter=n, backward_iter=20, batch=MEMORY_BATCH,
                             steps=0, warmup=0, tol=0.0, solver=solver)
            peaks[n] = m["peak_mb"]
            entries.append({"name": f"memory {solver} {arm} N={n} (TINY, batch {MEMORY_BATCH})",
                            "value": round(m["peak_mb"], 1), "unit": "MB",
                            "note": m["memory_method"]})
        ratio = peaks[MEMORY_N[-1]] / peaks[MEMORY_N[0]]
        entry = {"name": f"memory ratio {solver} {arm} N={MEMORY_N[-1]} / N={MEMORY_N[0]}",
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
    for threads in sorted({1, default_threads}):
        for arm in ("ift", "unrolled"):
            m = measure_step("tiny", arm=arm, train_iter=18, backward_iter=20, batch=128,
                             steps=2, warmup=1, tol=0.0, threads=threads)
            reference = REFERENCE["seconds"][arm]
            entry = {
                "name": f"TINY training step {arm} (batch 128, N=18, B_THRES=20, "
                        f"{threads} thread{'s' if threads > 1 else ''})",
                "value": round(m["seconds"], 2), "unit": "s",
                "peer": peer_label(),
                "peer_value": reference, "ratio": round(m["seconds"] / reference, 3),
                "note": (f"{m['threads']} thread(s), {m['device']}; CPU time per step "
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
