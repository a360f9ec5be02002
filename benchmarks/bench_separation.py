"""Separation chapter: training R small models together (stacked weights) vs one at a time.

Workload: R = 16 seeds of a width-10, depth-4 ReLU FNN (one of the FLOPs-matched FNNs of the
rebuttal's Table 1) fit to the sawtooth Δ^5 on 256 points by 300 full-batch Adam steps, one CPU
thread. "Ours" is ``i2o.chapters.separation.batched.fit_stack`` on all 16 at once; the peer trains
them one after another, by the same function with R = 1 (same arithmetic, so the ratio is the
batching alone) and by the chapter's ``nets.fit`` (``nn.Module`` and the shared training loop).
Wall-clock seconds for all R models, median over rounds that alternate the arms.

Second workload, the chapter's own use of stacking (Section 2, the steep functions): the 24 seeds of
one quick-profile input dimension (d = 10, δ = 2^-10, width 10, 512 points), 400 of its Adam steps,
by ``steep.train_stack`` against ``steep.train_model`` one seed after another, for the
lower-triangular DEQ and for the FNN.
"""

from __future__ import annotations

import statistics
import time

from i2o import runtime

runtime.set_threads()

from i2o.chapters.separation import (  # noqa: E402
    batched,
    nets,
    steep,  # noqa: E402
)
from i2o.chapters.separation.sawtooth import sawtooth_data  # noqa: E402

MODELS, WIDTH, DEPTH, PIECES, POINTS, STEPS, LR, ROUNDS = 16, 10, 4, 5, 256, 300, 1e-2, 3


def _stacked(x, y) -> None:
    batched.fit_stack(batched.init_stack(1, WIDTH, DEPTH, list(range(MODELS))), x, y, STEPS, LR)


def _one_at_a_time(x, y) -> None:
    for seed in range(MODELS):
        batched.fit_stack(batched.init_stack(1, WIDTH, DEPTH, [seed]), x, y, STEPS, LR)


def _chapter_loop(x, y) -> None:
    for seed in range(MODELS):
        nets.fit(nets.make_model("fnn", 1, WIDTH, DEPTH, seed), x, y, STEPS, LR, seed)


def _seconds(run, x, y) -> float:
    start = time.perf_counter()
    run(x, y)
    return time.perf_counter() - start


STEEP_SEEDS, STEEP_D, STEEP_STEPS = list(range(24)), 10, 400


def _steep() -> list[dict]:
    out = []
    args = (STEEP_D, 2.0 ** -STEEP_D, 10, 2, 512, STEEP_STEPS, 1e-2, 0.05)
    for kind in steep.KINDS:
        together, alone = [], []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            steep.train_stack(kind, *args, STEEP_SEEDS)
            together.append(time.perf_counter() - start)
            start = time.perf_counter()
            for seed in STEEP_SEEDS:
                steep.train_model(kind, *args, seed)
            alone.append(time.perf_counter() - start)
        ours, peer = statistics.median(together), statistics.median(alone)
        out.append({"name": f"separation: steep {kind}, 24 seeds stacked", "value": ours,
                    "unit": "s", "peer": "one seed at a time (steep.train_model)",
                    "peer_value": peer, "ratio": ours / peer,
                    "note": f"d = {STEEP_D}, {STEEP_STEPS} Adam steps, width 10, 512 points"})
    return out


def _stacked_fnns() -> list[dict]:
    x, y, _, _ = sawtooth_data(PIECES, POINTS, 16, seed=0)
    times: dict[str, list[float]] = {"stacked": [], "alone": [], "chapter": []}
    for _ in range(ROUNDS):
        times["stacked"].append(_seconds(_stacked, x, y))
        times["alone"].append(_seconds(_one_at_a_time, x, y))
        times["chapter"].append(_seconds(_chapter_loop, x, y))
    ours, alone, chapter = (statistics.median(times[k]) for k in ("stacked", "alone", "chapter"))
    note = f"{MODELS} FNNs {WIDTH}×{DEPTH}, Δ^{PIECES}, {POINTS} points, {STEPS} Adam steps"
    return [{"name": "separation: 16 models stacked", "value": ours, "unit": "s",
             "peer": "one at a time (same code, R = 1)", "peer_value": alone,
             "ratio": ours / alone, "note": note},
            {"name": "separation: 16 models stacked vs chapter loop", "value": ours, "unit": "s",
             "peer": "one at a time (nets.fit)", "peer_value": chapter,
             "ratio": ours / chapter, "note": note}]


def run() -> list[dict]:
    return [*_stacked_fnns(), *_steep()]
