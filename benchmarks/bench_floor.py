"""How far a test sweep is from its floor: its time over the time of the evaluations of f it makes.

The book's test sweep (:func:`i2o.train.evaluate_iterations`, the stability and deq_gaps chapters'
and the diagnose chapter's) runs one Broyden solve of ``max N'`` steps per batch, reads every
iterate and scores the head where the grid asks: with ``N' = 1 … 36`` it evaluates ``f`` 37 times
per batch. Those evaluations are the floor; the rest (Broyden's low-rank updates, residual norms,
the head's scores, the bookkeeping) is overhead, the part a change to the sweep can move. The floor
is measured in the same process on the same batches: ``f`` evaluated 37 times from the model's own
initial state, and nothing else (the injection is computed outside the timed loop).

Networks are freshly initialised: the cost of ``f`` and of a Broyden step does not depend on the
weights. Deterministic mode is on, as in the chapters' jobs
(:func:`i2o.train.seeding.seed_everything`). Sizes (the names of the entries say what ran):
``I2O_BENCH_FLOOR_IMAGES`` (100), ``I2O_BENCH_FLOOR_BATCH`` (100), ``I2O_BENCH_FLOOR_MAX`` (36),
``I2O_BENCH_FLOOR_MODELS`` (``cpu_small,tiny``).
"""

from __future__ import annotations

import os
import time

import torch


def _setting() -> dict[str, object]:
    env = os.environ.get
    return {"images": int(env("I2O_BENCH_FLOOR_IMAGES", "100")),
            "batch": int(env("I2O_BENCH_FLOOR_BATCH", "100")),
            "top": int(env("I2O_BENCH_FLOOR_MAX", "36")),
            "models": env("I2O_BENCH_FLOOR_MODELS", "cpu_small,tiny").split(",")}


def _images(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    from i2o.data import balanced_subset, load_cifar10, to_tensor

    data = load_cifar10("test")
    chosen = data.subset(balanced_subset(data.labels, size, 0))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def sweep_seconds(model, images, labels, top: int, batch: int) -> float:
    """Wall time of the book's sweep of ``N' = 1 … top``."""
    from i2o.train import evaluate_iterations

    start = time.perf_counter()
    evaluate_iterations(model, images, labels, list(range(1, top + 1)), batch_size=batch)
    return time.perf_counter() - start


@torch.no_grad()
def f_seconds(model, images, top: int, batch: int) -> float:
    """Wall time of the ``top + 1`` evaluations of ``f`` per batch that the sweep makes."""
    model.eval()
    total = 0.0
    for start in range(0, images.shape[0], batch):
        f, x, z = model.prepare(images[start:start + batch])
        began = time.perf_counter()
        for _ in range(top + 1):
            z = f(z, x)
        total += time.perf_counter() - began
    return total


def run() -> list[dict]:
    from i2o.models import MDEQClassifier, config
    from i2o.train.seeding import seed_everything

    seed_everything(0)  # deterministic mode, as in every chapter's job
    s = _setting()
    images, labels = _images(s["images"])
    entries = []
    for name in s["models"]:
        torch.manual_seed(0)
        model = MDEQClassifier(config(name))
        sweep_seconds(model, images[:s["batch"]], labels[:s["batch"]], 2, s["batch"])  # warm-up
        sweep = sweep_seconds(model, images, labels, s["top"], s["batch"])
        floor = f_seconds(model, images, s["top"], s["batch"])
        label = "TINY" if name == "tiny" else name
        entries.append({
            "name": f"test sweep over its f floor, {label} MDEQ (untrained), {s['images']} "
                    f"CIFAR-10 test images, N' = 1…{s['top']}, batch {s['batch']}, "
                    f"{torch.get_num_threads()} thread(s)",
            "value": round(sweep, 3), "unit": "s", "peer": f"{s['top'] + 1} evaluations of f "
            "per batch", "peer_value": round(floor, 3), "ratio": sweep / floor,
            "goal": "≤ 2× (issue 41; 2.9× measured before it)"})
    return entries
