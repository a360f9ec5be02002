"""What portable numerics costs: the TINY training step and one iMAML outer step, each timed in
fresh processes in portable mode (every library pinned to AVX2, :mod:`i2o.runtime`) and in native
mode, in alternating rounds of the same run so that both see the same machine load. The ratio
portable / native decides whether portable is the default (goal ≤ 1.3); on a CPU whose widest
instruction set is AVX2 the pins select the kernels the libraries would pick anyway, so the
ratio measures only the pins' other effects (XLA without XNNPACK and platform-dependent math).

- TINY step: :func:`i2o.chapters.stability.stepcost.measure_step` (batch 128, N = 18,
  B_THRES = 20, IFT, one thread), the median of its timed steps.
- iMAML outer step: ``bench_meta``'s chunked outer loop (the meta chapter's quick setting: its λ and
  inner solver, meta-batch 25, float64, one thread), compiled, then the median of three chunks.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from i2o import runtime
from i2o.chapters.stability.stepcost import measure_step

ROUNDS = 2
MODES = ("native", "portable")
HERE = Path(__file__).resolve().parent
IMAML_STEP = f"""
import functools, json, statistics, sys
sys.path.insert(0, {str(HERE)!r})
import bench_meta
from i2o.chapters.meta import imaml
book = bench_meta.book_setting()
config = imaml.IMAMLConfig(regularization=book.imaml_regularization,
                           acceleration=book.imaml_acceleration)
run = bench_meta._ours(functools.partial(imaml.meta_loss, config=config), 20)
print(json.dumps(statistics.median(run() for _ in range(3))))
"""


def mode_env(mode: str) -> dict[str, str]:
    """This process's environment as a process started in ``mode`` sees it."""
    env = dict(os.environ)
    runtime.apply_numerics(env, mode=mode)
    return env


def _tiny_step(mode: str) -> float:
    env = mode_env(mode)
    with runtime.environment(env, drop=set(os.environ) - set(env)):
        return measure_step("tiny", arm="ift", train_iter=18, backward_iter=20, batch=128,
                            steps=2, warmup=1, tol=0.0, threads=1)["seconds"]


def _imaml_step(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", IMAML_STEP], env=mode_env(mode),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"iMAML step ({mode}) failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def _entry(name: str, times: dict[str, list[float]], unit_scale: float, unit: str) -> dict:
    median = {mode: statistics.median(values) * unit_scale for mode, values in times.items()}
    return {"name": f"portable numerics: {name}", "value": round(median["portable"], 3),
            "unit": unit, "peer": "native numerics (same run)",
            "peer_value": round(median["native"], 3),
            "ratio": round(median["portable"] / median["native"], 3), "goal": "≤ 1.3",
            "note": (f"median of {ROUNDS} fresh processes per mode, alternating; CPU "
                     f"{runtime.provenance()['cpu']}; one thread")}


def run() -> list[dict]:
    tiny: dict[str, list[float]] = {mode: [] for mode in MODES}
    meta: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(ROUNDS):
        for mode in MODES:
            tiny[mode].append(_tiny_step(mode))
            meta[mode].append(_imaml_step(mode))
    return [_entry("TINY training step (batch 128, N=18, B_THRES=20, IFT)", tiny, 1.0, "s"),
            _entry("meta iMAML outer step (the chapter's λ and solver, meta-batch 25)", meta,
                   1e3, "ms")]


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
