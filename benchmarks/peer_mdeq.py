"""Time the authors' MDEQ training step on this machine: the peer of `make bench`'s TINY step.

The authors' code (``zaccharieramzi/deq``, branch ``anonymized-for-paper``) is imported from a
clone given on the command line; nothing of it is copied here. The model is theirs, built by their
``get_cls_net`` from their ``cls_mdeq_TINY.yaml`` merged with the options below through their
``yacs`` config, and the step is the one of their ``lib/core/cls_function.train``: the model's
forward with ``train_step`` past ``PRETRAIN_STEPS``, cross-entropy, ``zero_grad``, ``backward``,
their Adam (``get_optimizer``) and the cosine schedule of ``tools/cls_train.py``, without the data
loader, the Jacobian penalty (its weight is 0 in the TINY config) or the logging. On a CPU their
code needs no change: it uses CUDA, ``DataParallel`` and CUDA tensors only when CUDA is available.

- **IFT arm**: their default path, a Broyden forward solve without autograd (``DEQ.F_THRES``,
  ``DEQ.F_EPS``) and the implicit backward, a Broyden solve of the adjoint equation in a gradient
  hook (``DEQ.B_THRES``, ``DEQ.B_EPS``).
- **Unrolled arm**: their ``TRAIN.ALL_UNROLLED True`` flag, which runs ``backprop_broyden`` (the
  same Broyden updates, kept in the autograd graph; its tolerance is fixed at 1e-6 in their code)
  and backpropagates through the forward iterations.

Each arm builds a fresh model (seeded), runs one untimed warm-up step, then times ``--steps``
steps (wall clock; CPU time beside it) at torch's default thread count and native numerics: the
script refuses to run when one of torch's kernel pins of the book's portable mode is set. It also
counts the Broyden steps each timed step ran (the forward from the evaluations of their MDEQ
layer, the backward from the evaluations of the adjoint map), so an early stop is visible.

It prints one JSON record with the fields of ``REFERENCE`` in ``bench_stability.py``
(:data:`RECORD_FIELDS`), ready to be added there. Their code needs ``yacs`` and ``termcolor``,
which the book's environment does not have; install them outside it, e.g.::

    python -m pip install --target ../peer-deps yacs termcolor
    PYTHONPATH=../peer-deps python benchmarks/peer_mdeq.py --clone ../peer/deq --steps 3
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ARMS = ("ift", "unrolled")
#: The fields of one peer record, in ``bench_stability.REFERENCE`` and in this script's output.
RECORD_FIELDS = ("seconds", "date", "machine", "cpu", "threads", "numerics", "settings", "command",
                 "peer", "peer_commit", "details")
#: The TINY configuration inside a clone of the authors' repository.
TINY_CONFIG = Path("deq/mdeq_vision/experiments/cifar/cls_mdeq_TINY.yaml")
#: torch's kernel pins of the book's portable mode: any of them set makes the numerics not native.
TORCH_PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
#: CIFAR-10's normalisation in the authors' ``tools/cls_train.py``.
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


def cpu_identity() -> dict[str, Any]:
    """This machine's CPU as :mod:`i2o.base.lineage` reads it from the first processor of
    ``/proc/cpuinfo``: its model name, vendor, family and model (``None`` where absent). Vendor,
    family and model identify a CPU model; the model name alone does not (a virtual machine may
    shorten it)."""
    # imported here, after torch: importing i2o before torch would pin torch's kernels
    # (i2o.pins), and this script measures the peer with native numerics
    from i2o.base import lineage

    def number(field: str) -> int | None:
        value = _cpuinfo_exact(field) or ""
        return int(value) if value.isdigit() else None

    return {"model_name": lineage._cpu_model(), "vendor": lineage._cpuinfo("vendor_id"),
            "family": number("cpu family"), "model": number("model")}


def _cpuinfo_exact(field: str) -> str | None:
    """``field``'s value in the first processor of ``/proc/cpuinfo``, the name matched whole
    (lineage's reader matches a prefix, so its ``"model"`` could read ``"model name"``)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, colon, value = line.partition(":")
        if colon and name.strip() == field:
            return value.strip()
    return None


def machine_label(cpu: dict[str, Any], cores: int | None) -> str:
    """``"<model name> (<vendor> family F model M), N cores"``."""
    return (f"{cpu['model_name'] or 'unknown CPU'} ({cpu['vendor'] or 'unknown vendor'} family "
            f"{cpu['family']} model {cpu['model']}), {cores} cores")


def peer_commit(clone: Path) -> str:
    """The commit of the authors' code: ``git rev-parse HEAD`` in a git clone, else the
    ``PEER_COMMIT`` file a snapshot without ``.git`` carries, else ``"unknown"``."""
    try:
        done = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=False)
    except OSError:
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    marker = clone / "PEER_COMMIT"
    if marker.is_file():
        return f"{marker.read_text().strip()} (snapshot without .git; from its PEER_COMMIT file)"
    return "unknown"


def pins_set(environ: dict[str, str] | None = None) -> dict[str, str]:
    """torch's portable-mode pins set in ``environ`` (default: this process's environment)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in TORCH_PINS if environ.get(name)}


def seconds_summary(seconds: list[float]) -> dict[str, Any]:
    """Mean, fastest and slowest of timed steps, rounded to 10 ms, and how many."""
    return {"mean": round(statistics.fmean(seconds), 2), "min": round(min(seconds), 2),
            "max": round(max(seconds), 2), "steps": len(seconds)}


def load_peer(clone: Path) -> dict[str, Any]:
    """The authors' config, model factory and optimiser factory, imported from ``clone``."""
    if not (clone / TINY_CONFIG).is_file():
        raise SystemExit(f"error: {clone} is not a clone of the authors' deq repository "
                         f"({TINY_CONFIG} is missing)")
    sys.path.insert(0, str(clone.resolve()))
    try:
        from deq.mdeq_vision.lib import models
        from deq.mdeq_vision.lib.config import config
        from deq.mdeq_vision.lib.utils.utils import get_optimizer
    except ModuleNotFoundError as error:
        raise SystemExit(f"error: the authors' code needs {error.name!r}, which this Python lacks "
                         "(install yacs and termcolor outside the book's environment: see this "
                         "script's docstring)") from error
    return {"config": config, "get_cls_net": models.mdeq.get_cls_net,
            "get_optimizer": get_optimizer}


def peer_options(args: argparse.Namespace, arm: str) -> list[str]:
    """The config options of one arm, in the ``KEY VALUE`` form of their ``cls_train.py``."""
    options = ["DEQ.F_THRES", str(args.f_thres), "DEQ.B_THRES", str(args.b_thres),
               "DEQ.F_EPS", str(args.f_eps), "TRAIN.BATCH_SIZE_PER_GPU", str(args.batch),
               "TRAIN.PRETRAIN_STEPS", "0"]
    if args.b_eps is not None:
        options += ["DEQ.B_EPS", str(args.b_eps)]
    if arm == "unrolled":
        options += ["TRAIN.ALL_UNROLLED", "True"]
    return options


def peer_config(peer: dict[str, Any], clone: Path, options: list[str]):
    """Their TINY config with ``options`` merged, as their ``update_config`` does."""
    cfg = peer["config"].clone()
    cfg.defrost()
    cfg.merge_from_file(str(clone / TINY_CONFIG))
    cfg.merge_from_list(options)
    cfg.freeze()
    return cfg


def make_batch(batch: int, cifar: Path | None, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch: ``batch`` CIFAR-10 training images drawn with ``seed`` from the image folder
    ``cifar`` (``<class>/*.jpg``), normalised as in their ``cls_train.py``; random CIFAR-shaped
    input and labels when ``cifar`` is ``None``."""
    generator = torch.Generator().manual_seed(seed)
    if cifar is None:
        return (torch.randn(batch, 3, 32, 32, generator=generator),
                torch.randint(0, 10, (batch,), generator=generator))
    from torchvision import datasets, transforms

    folder = datasets.ImageFolder(str(cifar), transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize(CIFAR_MEAN, CIFAR_STD)]))
    chosen = torch.randperm(len(folder), generator=generator)[:batch].tolist()
    images, labels = zip(*(folder[i] for i in chosen), strict=True)
    return torch.stack(images), torch.tensor(labels)


def count_backward_evaluations(solver, counts: dict[str, int]):
    """``solver`` with every evaluation of the map it solves counted in ``counts["backward"]``."""
    def counted_solver(f, x0, *args, **kwargs):
        def counted(z):
            counts["backward"] += 1
            return f(z)
        return solver(counted, x0, *args, **kwargs)
    return counted_solver


def time_arm(peer: dict[str, Any], cfg, x: torch.Tensor, y: torch.Tensor, steps: int,
             seed: int) -> dict[str, Any]:
    """One arm: a fresh model, one warm-up step, then ``steps`` timed training steps."""
    torch.manual_seed(seed)
    model = peer["get_cls_net"](cfg)
    model.train()
    counts = {"forward": 0, "backward": 0}

    def count_forward(module, inputs, output) -> None:
        counts["forward"] += 1

    model.fullstage.register_forward_hook(count_forward)
    model.b_solver = count_backward_evaluations(model.b_solver, counts)
    optimizer = peer["get_optimizer"](cfg, model)
    batches_per_epoch = -(-50_000 // cfg.TRAIN.BATCH_SIZE_PER_GPU)  # as their loader's len
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, batches_per_epoch * cfg.TRAIN.END_EPOCH, eta_min=1e-6)
    criterion = torch.nn.CrossEntropyLoss()

    def step() -> None:
        output, *_ = model(x, train_step=scheduler._step_count - 1, compute_jac_loss=False,
                           f_thres=cfg.DEQ.F_THRES, b_thres=cfg.DEQ.B_THRES, writer=None)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()

    step()
    wall, cpu, solver_steps = [], [], []
    for _ in range(steps):
        counts.update(forward=0, backward=0)
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        # forward: the initial evaluation, one per Broyden step, one to re-enter autograd
        # (IFT) or to apply f at the solution (unrolled); backward: the initial one, one per step
        solver_steps.append({"forward": counts["forward"] - 2,
                             "backward": max(counts["backward"] - 1, 0)})
    return {"seconds": seconds_summary(wall), "cpu_seconds": round(statistics.fmean(cpu), 2),
            "broyden_steps": solver_steps}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", type=Path, required=True,
                        help="a clone of the authors' deq repository (its top folder)")
    parser.add_argument("--peer", default="zaccharieramzi/deq, branch anonymized-for-paper",
                        help="which repository and branch the clone is (recorded)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per arm, after one")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--f-thres", type=int, default=18)
    parser.add_argument("--b-thres", type=int, default=20)
    parser.add_argument("--f-eps", type=float, default=1e-7)
    parser.add_argument("--b-eps", type=float, default=None,
                        help="DEQ.B_EPS (default: their config's, 1e-3)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--cifar", type=Path, default=None,
                        help="a CIFAR-10 image folder (<class>/*.jpg); default: random input")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure the arms, print the record as JSON and return it."""
    args = parse_args(argv)
    if pins := pins_set():
        raise SystemExit("error: the peer is measured with native numerics; unset "
                         + ", ".join(f"{name}={value}" for name, value in pins.items()))
    peer = load_peer(args.clone)
    x, y = make_batch(args.batch, args.cifar, args.seed)
    seconds, details = {}, {}
    for arm in args.arms:
        print(f"peer_mdeq: timing the {arm} arm ({args.steps} steps after one)", file=sys.stderr,
              flush=True)
        cfg = peer_config(peer, args.clone, peer_options(args, arm))
        measured = time_arm(peer, cfg, x, y, args.steps, args.seed)
        seconds[arm] = measured.pop("seconds")
        details[arm] = {"options": " ".join(peer_options(args, arm)), **measured}
    cpu = cpu_identity()
    record = {
        "seconds": seconds,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_label(cpu, os.cpu_count()),
        "cpu": {key: cpu[key] for key in ("vendor", "family", "model")},
        "threads": (f"torch's default: {torch.get_num_threads()} "
                    f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})"),
        "numerics": "native",
        "settings": (f"{TINY_CONFIG.name}, batch {args.batch}, f_thres {args.f_thres}, b_thres "
                     f"{args.b_thres}, F_EPS {args.f_eps:g}, B_EPS "
                     f"{'their default 1e-3' if args.b_eps is None else f'{args.b_eps:g}'}, "
                     f"{'CIFAR-10 images' if args.cifar else 'random CIFAR-shaped input'}"),
        "command": shlex.join(["python", *sys.argv]) if argv is None else shlex.join(
            ["python", "benchmarks/peer_mdeq.py", *argv]),
        "peer": args.peer,
        "peer_commit": peer_commit(args.clone),
        "details": {"torch": torch.__version__, "python": platform.python_version(), **details},
    }
    print(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
