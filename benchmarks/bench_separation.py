"""Separation chapter: training R small models together (stacked weights) vs one at a time.

Workload: R = 16 seeds of a width-10, depth-4 ReLU FNN (one of the FLOPs-matched FNNs of the
rebuttal's Table 1) fit to the sawtooth Δ^5 on 256 points by 300 full-batch Adam steps, one CPU
thread. "Ours" is ``i2o.chapters.separation.batched.fit_stack`` on all 16 at once; the peer trains
them one after another, by the same function with R = 1 (same arithmetic, so the ratio is the
batching alone) and by the chapter's ``nets.fit`` (``nn.Module`` and the shared training loop).
Wall-clock seconds for all R models, median over rounds that alternate the arms:
``I2O_BENCH_SEPARATION_ROUNDS`` (default 1). Every arm trains all its models for all their steps
in each round (seconds to a minute), so one round already times the whole workload of every arm,
back to back in the same process; the ratios it measures are far from 1 (0.14-0.42 on a 2-core
AMD EPYC, 2026-11-28), and more rounds (their median) only guard against a burst of load.

Second workload, the chapter's own use of stacking (Section 2, the steep functions): the 24 seeds of
one quick-profile input dimension (d = 10, δ = 2^-10, width 10, 512 points), 400 of its Adam steps,
by ``steep.train_stack`` against ``steep.train_model`` one seed after another, for the
lower-triangular DEQ and for the FNN.

Third workload, Section 4's ReLU DEQs (the contractive DEQ on the GOTU task f2, d = 10, the whole
seen part, width 32, 100 Adam steps): 16 seeds by ``gotu.train_deq_stack`` against
``gotu.train_model`` one seed after another (fixed-point iteration, the chapter's solver), and one
model solved by fixed-point iteration against the same model solved by Anderson acceleration
(m = 5, the solver until 2026-11-25; forward and IFT backward).
"""

from __future__ import annotations

import statistics
import time

import knobs
import torch

from i2o.base import runtime

runtime.set_threads()

from i2o.chapters.separation import (  # noqa: E402
    batched,
    gotu,
    nets,
    steep,
)
from i2o.chapters.separation.sawtooth import sawtooth_data  # noqa: E402
from i2o.deq import DEQ, SolverSpec  # noqa: E402

MODELS, WIDTH, DEPTH, PIECES, POINTS, STEPS, LR = 16, 10, 4, 5, 256, 300, 1e-2
ROUNDS = knobs.integer("I2O_BENCH_SEPARATION_ROUNDS", 1)


def _rounds() -> str:
    return "one round" if ROUNDS == 1 else f"median of {ROUNDS} alternated rounds"


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
                    "note": f"d = {STEEP_D}, {STEEP_STEPS} Adam steps, width 10, 512 points; "
                            + _rounds()})
    return out


def _stacked_fnns() -> list[dict]:
    x, y, _, _ = sawtooth_data(PIECES, POINTS, 16, seed=0)
    times: dict[str, list[float]] = {"stacked": [], "alone": [], "chapter": []}
    for _ in range(ROUNDS):
        times["stacked"].append(_seconds(_stacked, x, y))
        times["alone"].append(_seconds(_one_at_a_time, x, y))
        times["chapter"].append(_seconds(_chapter_loop, x, y))
    ours, alone, chapter = (statistics.median(times[k]) for k in ("stacked", "alone", "chapter"))
    note = (f"{MODELS} FNNs {WIDTH}×{DEPTH}, Δ^{PIECES}, {POINTS} points, {STEPS} Adam steps; "
            + _rounds())
    return [{"name": "separation: 16 models stacked", "value": ours, "unit": "s",
             "peer": "one at a time (same code, R = 1)", "peer_value": alone,
             "ratio": ours / alone, "note": note},
            {"name": "separation: 16 models stacked vs chapter loop", "value": ours, "unit": "s",
             "peer": "one at a time (nets.fit)", "peer_value": chapter,
             "ratio": ours / chapter, "note": note}]


GOTU_SEEDS, GOTU_STEPS = list(range(16)), 100


def _gotu_alone(seed: int, anderson: bool = False) -> None:
    x_np = gotu.training_points("f2", 10, 1024, seed)
    x = torch.as_tensor(x_np, dtype=torch.float32)
    y = torch.as_tensor(gotu.target("f2", x_np), dtype=torch.float32)
    model = nets.make_model("deq_contractive", 10, 32, 1, seed, gamma=0.9)
    if anderson:
        spec = SolverSpec(method="anderson", max_iter=60, tol=1e-6, m=5)
        model.deq = DEQ(forward=spec, backward="ift", backward_spec=spec)
    nets.fit(model, x, y, GOTU_STEPS, 1e-2, seed)


def _gotu() -> list[dict]:
    times: dict[str, list[float]] = {"stacked": [], "alone": [], "picard": [], "anderson": []}
    for _ in range(ROUNDS):
        start = time.perf_counter()
        gotu.train_deq_stack("f2", 10, 1024, 32, GOTU_STEPS, 1e-2, GOTU_SEEDS, 0.9, 8)
        times["stacked"].append(time.perf_counter() - start)
        start = time.perf_counter()
        for seed in GOTU_SEEDS:
            gotu.train_model("deq_contractive", "f2", 10, 1024, 32, 1, GOTU_STEPS, 1e-2, seed,
                             0.01, 0.9, 8)
        times["alone"].append(time.perf_counter() - start)
        for arm, anderson in (("picard", False), ("anderson", True)):
            start = time.perf_counter()
            _gotu_alone(0, anderson)
            times[arm].append(time.perf_counter() - start)
    med = {arm: statistics.median(values) for arm, values in times.items()}
    note = (f"contractive ReLU DEQ, GOTU f2, d = 10, width 32, {GOTU_STEPS} Adam steps; "
            + _rounds())
    return [{"name": f"separation: GOTU DEQ, {len(GOTU_SEEDS)} seeds stacked",
             "value": med["stacked"], "unit": "s",
             "peer": "one seed at a time (gotu.train_model)", "peer_value": med["alone"],
             "ratio": med["stacked"] / med["alone"], "note": note},
            {"name": "separation: GOTU DEQ solved by fixed-point iteration", "value": med["picard"],
             "unit": "s", "peer": "Anderson acceleration, m = 5 (one model)",
             "peer_value": med["anderson"], "ratio": med["picard"] / med["anderson"],
             "note": note}]


def run() -> list[dict]:
    return [*_stacked_fnns(), *_steep(), *_gotu()]
