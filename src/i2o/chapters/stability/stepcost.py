"""Time and peak memory of one DEQ training step, each measured in a fresh Python process.

Method (the same for every arm and N, so that ratios are meaningful):

- a new process builds the model, one random batch and the optimiser, then runs training steps
  (Broyden forward, IFT or unrolled backward, Adam step): the step of :mod:`i2o.train.classifier`
  (:func:`~i2o.train.classifier.mdeq_loss`, backward, optimiser step), without the data loading;
- **memory, CPU**: the peak resident set size during the first step minus the resident set size
  just before it, i.e. the peak of everything the step allocates — solver storage, autograd graph,
  gradients, optimiser state — as the OS sees it (``tracemalloc`` does not see torch's
  allocations). On Linux the kernel's peak mark is reset right before the step
  (``/proc/self/clear_refs``) and read back as ``VmHWM``; elsewhere the increase of
  ``ru_maxrss`` is used, which misses a step smaller than the start-up peak. It includes
  allocator overhead and is rounded to pages; a fresh process per measurement keeps earlier
  allocations out;
- **memory, CUDA**: ``torch.cuda.max_memory_allocated`` during the first step minus the memory
  allocated before it;
- **time**: the median wall-clock of ``steps`` steps after ``warmup`` untimed ones (steady state),
  and the median CPU time of the same steps (``time.process_time``: what the step costs when the
  machine is shared; equal to the wall-clock on an idle machine with one thread).

Command line (used by :func:`measure_step` and the benchmarks)::

    python -m i2o.chapters.stability.stepcost --model tiny --arm ift --train-iter 18 --batch 128

The chapter caches one measurement per arm as a :class:`StepCostJob`, whose key covers this
module (the one that measures).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import torch

from i2o.base import allocator, lineage, runtime
from i2o.chapters.stability import FIGURE
from i2o.compute import job
from i2o.deq import DEQ, SolverSpec
from i2o.models.mdeq import MDEQClassifier, config
from i2o.train.classifier import mdeq_loss
from i2o.train.schedule import make_optimizer

SOLVERS = ("broyden", "anderson", "fixed_point")


def _status_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ≥ 4.0: ``echo 5 > /proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20  # kB on Linux, B on macOS


def _measure_here(model_name: str, arm: str, train_iter: int, backward_iter: int, batch: int,
                  steps: int, warmup: int, tol: float, solver: str, memory: int | None,
                  threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    device = runtime.device()
    if device == "cpu":
        allocator.keep_freed_memory()
    torch.manual_seed(0)
    model = MDEQClassifier(config(model_name)).to(device).train()
    images = torch.randn(batch, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    optimizer = make_optimizer(model, 1e-3, 2.5e-6)
    forward = SolverSpec(method=solver, max_iter=train_iter, tol=tol, stop_mode="rel",
                         memory=memory if solver == "broyden" else None)
    backward = SolverSpec(method=solver, max_iter=backward_iter, tol=tol, stop_mode="rel",
                          memory=memory if solver == "broyden" else None)
    deq = DEQ(forward=forward, backward=arm, backward_spec=backward)

    cpu_times: list[float] = []

    def step() -> float:
        start, cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = mdeq_loss(model, deq, images, labels, pretraining=False)
        loss.backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        cpu_times.append(time.process_time() - cpu)
        return time.perf_counter() - start

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2**20
        first = step()
        peak = torch.cuda.max_memory_allocated() / 2**20 - before
        method = "torch.cuda.max_memory_allocated increase over the first step"
    elif _reset_peak_rss() and _status_mb("VmRSS") is not None:
        before = _status_mb("VmRSS")
        first = step()
        peak = _status_mb("VmHWM") - before
        method = "peak RSS (VmHWM, reset before the step) minus RSS before the first step"
    else:
        before = _peak_rss_mb()
        first = step()
        peak = _peak_rss_mb() - before
        method = "ru_maxrss increase over the first step (fresh process)"
    for _ in range(warmup):
        step()
    times = [step() for _ in range(steps)]
    cpu_steady = cpu_times[1 + warmup:]
    return {"model": model_name, "arm": arm, "train_iter": train_iter,
            "backward_iter": backward_iter, "batch": batch, "solver": solver, "tol": tol,
            "memory": memory, "threads": threads, "device": lineage.device_name(),
            "seconds": statistics.median(times) if times else first, "seconds_all": times,
            "cpu_seconds": statistics.median(cpu_steady) if cpu_steady else cpu_times[0],
            "first_step_seconds": first, "peak_mb": peak, "memory_method": method}


def measure_step(model: str = "tiny", arm: str = "ift", train_iter: int = 18,
                 backward_iter: int = 20, batch: int = 128, steps: int = 3, warmup: int = 1,
                 tol: float = 0.0, solver: str = "broyden", memory: int | None = None,
                 threads: int | None = None, timeout: float = 3600) -> dict[str, Any]:
    """Measure one configuration in a fresh subprocess; return its dict (module docstring)."""
    if arm not in ("ift", "unrolled"):
        raise ValueError(f"arm must be 'ift' or 'unrolled'; got {arm!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}; got {solver!r}")
    threads = threads or int(os.environ.get("I2O_THREADS", "1"))
    command = [sys.executable, "-m", "i2o.chapters.stability.stepcost", "--json", "--model", model,
               "--arm", arm, "--train-iter", str(train_iter), "--backward-iter",
               str(backward_iter), "--batch", str(batch), "--steps", str(steps), "--warmup",
               str(warmup), "--tol", str(tol), "--solver", solver, "--threads", str(threads)]
    if memory is not None:
        command += ["--memory", str(memory)]
    src = str(Path(__file__).resolve().parents[3])  # the folder holding the i2o package
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"step measurement failed ({' '.join(command)}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclasses.dataclass(frozen=True)
class StepCostJob(job.Job):
    """Time and peak memory of one training step of one arm (:func:`measure_step`, one warm-up
    step, Broyden), cached: the fields are the cache key, and the key's code is this module's
    import closure, so an edit of the measurement measures again."""

    figure: ClassVar[str] = FIGURE

    model: str
    batch: int
    arm: str
    train_iter: int
    backward_iter: int
    tol: float
    steps: int

    @property
    def name(self) -> str:
        return f"step-cost-{self.arm}-N{self.train_iter}"

    def compute(self, progress: bool | None = None) -> dict[str, Any]:
        measured = measure_step(self.model, arm=self.arm, train_iter=self.train_iter,
                                backward_iter=self.backward_iter, batch=self.batch,
                                steps=self.steps, warmup=1, tol=self.tol)
        return {k: v for k, v in measured.items() if v is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.chapters.stability.stepcost",
                                     description="time and peak memory of one training step")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--arm", default="ift", choices=("ift", "unrolled"))
    parser.add_argument("--train-iter", type=int, default=18)
    parser.add_argument("--backward-iter", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--tol", type=float, default=0.0)
    parser.add_argument("--solver", default="broyden", choices=SOLVERS)
    parser.add_argument("--memory", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    result = _measure_here(args.model, args.arm, args.train_iter, args.backward_iter, args.batch,
                           args.steps, args.warmup, args.tol, args.solver, args.memory,
                           args.threads)
    print(json.dumps(result) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
