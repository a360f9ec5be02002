r"""How far the book's DEQ computations are from their floor: their time over the time of the
evaluations of ``f`` (and of its vector-Jacobian products) they make, timed in the same process on
the same inputs. Networks are freshly initialised (the cost of ``f``, of its VJPs and of a Broyden
step does not depend on the weights); deterministic mode is on, as in the chapters' jobs
(:func:`i2o.train.seeding.seed_everything`). The entries' names say what ran:

- **An MDEQ's test sweep**, the book's (:func:`i2o.train.evaluate_iterations`, as the stability,
  deq_gaps and diagnose chapters run it): one Broyden solve of ``max N'`` steps per batch, every
  iterate read, the head scored where the grid asks. Its floor is the ``max N' + 1`` evaluations
  of ``f`` per batch from the model's initial state (37 with the stability chapter's quick grid,
  12 counts from 1 to 36), the injection computed outside the timed loop; the rest (Broyden's
  low-rank updates, residual norms, the head's scores, the bookkeeping) is the overhead a change
  to the sweep can move.
- **The language model's test sweep**: the deq_gaps chapter's DEQ transformer
  (:mod:`i2o.models.deq_transformer`) swept as the chapter sweeps it
  (:func:`i2o.deq.sweep_iterations` over :func:`i2o.chapters.deq_gaps.language.language_probes`,
  the chapter's grid and solver, Tiny Shakespeare test windows); its evaluations of ``f`` per
  batch are counted (``evaluation_counts.py``), not assumed.
- **A training step** of the chapters' own loop (:func:`i2o.train.loop.train_steps`, whose
  per-step ``seconds`` cover zero_grad, the step loss, backward, clipping and the Adam step): the
  MDEQs through :func:`i2o.train.classifier.train_classifier`, the language model through
  :func:`i2o.chapters.deq_gaps.language.train_language_model` (with its Jacobian penalty), with
  the deq_gaps jobs' settings (:func:`i2o.chapters.deq_gaps.runs.build_jobs`; each MDEQ with the
  profile that trains it, ``N`` Broyden and ``B`` adjoint steps at ``tol = 0``, so every step
  makes the same evaluations) without the warm-up (``pretrain_steps = 0``). Its floor is the
  step's evaluations of ``f`` and VJPs, counted during the step and timed alone on its batch
  (``evaluation_counts.py`` defines both); reported: the median over the timed steps (after one
  untimed) over the median of their floors. The overhead is the head, the stem or embedding, the
  loss, Broyden's updates in both solves, the optimizer step, the bookkeeping and the counting
  wrapper, which runs inside the timed steps.

Each MDEQ's training entries run before its sweep, so the sweep finds the process's heap grown
(kept by :func:`i2o.base.allocator.keep_freed_memory`) past what it allocates.

Knobs. Every ratio divides a time by its floor on the same inputs, so the sizes only choose how
much of the same work is timed:

- ``I2O_BENCH_FLOOR_MODELS`` (``cpu_small,tiny``): the MDEQs;
- ``I2O_BENCH_FLOOR_IMAGES`` (100), ``I2O_BENCH_FLOOR_BATCH`` (100), ``I2O_BENCH_FLOOR_GRID``
  (comma-separated counts; default the stability chapter's quick ``test_iters``): the MDEQs' test
  sweep, on CIFAR-10 test images;
- ``I2O_BENCH_FLOOR_ARMS`` (``ift,unrolled``): the MDEQs' training arms (empty: no training
  entry);
- ``I2O_BENCH_FLOOR_TRAIN_BATCH`` (unset: the profile's ``cls_batch_size``, 20 for cpu_small, and
  for TINY ``I2O_BENCH_FLOOR_TINY_TRAIN_BATCH``, 32, not its profile's 128): the MDEQs' training
  batch, class-balanced CIFAR-10 training images. All of TINY's step and floor is per example
  except the Adam step and the per-call bookkeeping (a few milliseconds against about 3.5 s per
  step), so batch 32 gives batch 128's ratio in a quarter of the time;
- ``I2O_BENCH_FLOOR_STEPS`` (3): timed training steps per entry, except TINY's,
  ``I2O_BENCH_FLOOR_TINY_STEPS`` (1): its steps make the same evaluations, so one timed step gives
  the same ratio with one step's noise. With one, TINY's floor is timed without a warm-up floor:
  the two steps before it paid a first call's costs at the same shapes;
- ``I2O_BENCH_FLOOR_LM_PROFILE`` (``quick``): the deq_gaps profile whose language model is
  measured (its sizes, ``N``, solver, arm, penalty, grid; ``none``: no language-model entry);
  ``I2O_BENCH_FLOOR_LM_WINDOWS`` (128, two of the chapter's batches of 64; 512 is the quick
  profile's ``lm_eval_windows``): test windows swept, every batch making the same evaluations of
  ``f``; ``I2O_BENCH_FLOOR_LM_BATCH`` (the profile's ``lm_batch_size``, 32 in quick): windows per
  training batch.

``I2O_BENCH_FLOOR_TINY_TRAIN_BATCH=128 I2O_BENCH_FLOOR_LM_WINDOWS=512`` gives the profiles' sizes
(about 200 s on two idle cores instead of about 65 s).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable

import knobs
import torch
from evaluation_counts import Counter, Counts, counting, counts_note, floor_seconds, timed_counts

#: The data sets this benchmark reads (checked by ``benchmarks/run.py`` before any runs).
DATA_SETS = ("cifar10", "shakespeare")


def _setting() -> dict[str, object]:
    return {"images": knobs.integer("I2O_BENCH_FLOOR_IMAGES", 100),
            "batch": knobs.integer("I2O_BENCH_FLOOR_BATCH", 100),
            "grid": knobs.integers("I2O_BENCH_FLOOR_GRID") or _quick_grid(),
            "models": knobs.items("I2O_BENCH_FLOOR_MODELS", "cpu_small,tiny"),
            "arms": knobs.items("I2O_BENCH_FLOOR_ARMS", "ift,unrolled"),
            "train_batch": knobs.optional_integer("I2O_BENCH_FLOOR_TRAIN_BATCH"),
            "tiny_train_batch": knobs.integer("I2O_BENCH_FLOOR_TINY_TRAIN_BATCH", 32),
            "steps": knobs.integer("I2O_BENCH_FLOOR_STEPS", 3),
            "tiny_steps": knobs.integer("I2O_BENCH_FLOOR_TINY_STEPS", 1),
            "lm_profile": knobs.text("I2O_BENCH_FLOOR_LM_PROFILE", "quick"),
            "lm_windows": knobs.integer("I2O_BENCH_FLOOR_LM_WINDOWS", 128),
            "lm_batch": knobs.optional_integer("I2O_BENCH_FLOOR_LM_BATCH")}


def _quick_grid() -> list[int]:
    """The stability chapter's quick ``test_iters``: the sweep's counts ``N'`` by default."""
    from i2o.compute.profiles import resolve

    return [int(n) for n in resolve("stability", "quick")["test_iters"]]


def _images(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    from i2o.data import balanced_subset, load_cifar10, to_tensor

    data = load_cifar10("test")
    chosen = data.subset(balanced_subset(data.labels, size, 0))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def sweep_seconds(model, images, labels, grid: list[int], batch: int) -> float:
    """Wall time of the book's sweep of the counts ``grid``."""
    from i2o.train import evaluate_iterations

    start = time.perf_counter()
    evaluate_iterations(model, images, labels, grid, batch_size=batch)
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


def step_entry(what: str, history: dict, timed: list[Counts],
               floor: Callable[[Counts], float], warm_up: bool = True) -> dict:
    """The entry of a training step of ``what``: the median of the timed steps' ``seconds`` over
    the median of their floors, each floor timed with its step's counts, after one untimed floor
    when ``warm_up``."""
    if warm_up:
        floor(timed[0])
    floors = [floor(c) for c in timed]
    step = statistics.median(history["seconds"][1:])
    peer = statistics.median(floors)
    return {
        "name": f"training step over its f forward+backward floor, {what}, "
                f"{torch.get_num_threads()} thread(s)",
        "value": round(step, 4), "unit": "s", "peer": "its f forward+backward evaluations",
        "peer_value": round(peer, 4), "ratio": step / peer,
        "note": f"median of {len(timed)} timed step(s) after 1 untimed"
                + ("" if warm_up else ", floor timed without a warm-up floor") + "; "
                + counts_note(timed, "timed steps")}


# -- the MDEQs' training step -------------------------------------------------------------------

def classification_job(architecture: str):
    """The deq_gaps classification job of the first profile that trains ``architecture``."""
    from i2o.chapters.deq_gaps.runs import build_jobs
    from i2o.compute.profiles import PROFILES, resolve

    for profile in PROFILES:
        params = resolve("deq_gaps", profile)
        if params["cls_architecture"] == architecture:
            return profile, build_jobs(params).classification[0]
    raise ValueError(f"no deq_gaps profile trains the MDEQ {architecture!r}")


@functools.cache
def _training_set():
    """CIFAR-10's training split, loaded once for every training entry."""
    from i2o.data import load_cifar10

    return load_cifar10("train")


def mdeq_step_entry(name: str, arm: str, s: dict[str, object]) -> dict:
    """One MDEQ training step (``train_classifier``) over its forward+backward floor of f."""
    from i2o.data import balanced_subset, to_tensor
    from i2o.models import MDEQClassifier, config
    from i2o.train import train_classifier

    profile, job = classification_job(name)
    settings = job.settings()
    batch = s["train_batch"] or (s["tiny_train_batch"] if name == "tiny" else
                                 settings.batch_size)
    total = 1 + (s["tiny_steps"] if name == "tiny" else s["steps"])
    # one batch per epoch: every step trains on the same images
    settings = dataclasses.replace(settings, arm=arm, epochs=total, batch_size=batch,
                                   pretrain_steps=0, fit_every=0, extra_epochs=0,
                                   checkpoint_every=total)
    data = _training_set()
    chosen = data.subset(balanced_subset(data.labels, batch, 0))
    images, labels = to_tensor(chosen.images), torch.from_numpy(chosen.labels)
    counter = Counter()
    torch.manual_seed(settings.seed)
    model = counting(MDEQClassifier, counter)(config(name))
    history = train_classifier(model, images, labels, settings, None, progress=False)
    timed = timed_counts(history, counter, total)
    f = MDEQClassifier.f.__get__(model)  # the model's own f, without the counter

    def floor(counts: Counts) -> float:
        model.train()  # the step's mode: its dropout masks, drawn by prepare
        _, x, z0 = model.prepare(counts.given)  # the step's own batch
        seconds = floor_seconds(f, x, z0, counts)
        model.zero_grad(set_to_none=True)
        return seconds

    label = "TINY" if name == "tiny" else name
    solver = f"N = {settings.train_iter}" + (
        f", B = {settings.backward.max_iter}" if arm == "ift" else "")
    return step_entry(f"{label} MDEQ (untrained), {arm} arm, {solver}, tol "
                      f"{settings.forward.tol:g} (deq_gaps {profile}), batch {batch}",
                      history, timed, floor, warm_up=name != "tiny" or len(timed) > 1)


# -- the deq_gaps chapter's language model ----------------------------------------------------

def language_job(profile: str, s: dict[str, object]):
    from i2o.chapters.deq_gaps.runs import build_jobs
    from i2o.compute.profiles import resolve

    job = build_jobs(resolve("deq_gaps", profile)).language[0]
    return dataclasses.replace(job, steps=1 + s["steps"], pretrain_steps=0,
                               batch_size=s["lm_batch"] or job.batch_size,
                               eval_windows=s["lm_windows"])


def _lm_label(job, profile: str) -> str:
    return (f"DEQ transformer LM (untrained, deq_gaps {profile}: T = {job.context}, d = "
            f"{job.width}, {job.heads} heads, FFN {job.ffn_width})")


def lm_sweep_entry(job, profile: str, corpus) -> dict:
    """The chapter's test sweep of the language model over its evaluations of f."""
    from i2o.chapters.deq_gaps.language import language_probes
    from i2o.deq import sweep_iterations
    from i2o.models.deq_transformer import DEQTransformerLM

    counter = Counter()
    torch.manual_seed(job.seed)
    model = counting(DEQTransformerLM, counter)(job.config(corpus.vocab_size))
    spec = job.deq().forward_spec
    sweep_iterations(language_probes(model, corpus.test, 2), [1, 2], spec)  # warm-up
    counter.counts.clear()
    began = time.perf_counter()
    sweep_iterations(language_probes(model, corpus.test, job.eval_windows), job.grid, spec)
    sweep = time.perf_counter() - began
    f = DEQTransformerLM.f.__get__(model)
    floor = 0.0
    with torch.no_grad():
        for counts in counter.counts:
            x = DEQTransformerLM.inject(model, counts.given)
            z = model.initial_state(x)
            began = time.perf_counter()
            for _ in range(counts.plain):
                z = f(z, x)
            floor += time.perf_counter() - began
    per_batch = sorted({c.plain for c in counter.counts})
    evaluations = "/".join(map(str, per_batch))
    return {
        "name": f"test sweep over its f floor, {_lm_label(job, profile)}, {job.eval_windows} "
                f"Tiny Shakespeare test windows, N' ∈ {{{', '.join(map(str, job.grid))}}} "
                f"({spec.method}), batch {counter.counts[0].given.shape[0]}, "
                f"{torch.get_num_threads()} thread(s)",
        "value": round(sweep, 3), "unit": "s",
        "peer": f"{evaluations} evaluations of f per batch", "peer_value": round(floor, 3),
        "ratio": sweep / floor,
        "note": counts_note(counter.counts, "batches")}


def lm_step_entry(job, profile: str, corpus) -> dict:
    """One training step of the chapter's language model over its forward+backward floor."""
    from i2o.chapters.deq_gaps import language

    original = language.DEQTransformerLM
    counter = Counter()
    language.DEQTransformerLM = counting(original, counter)  # the chapter's function builds it
    try:
        model, history = language.train_language_model(job, corpus, None, progress=False)
    finally:
        language.DEQTransformerLM = original
    total = job.steps
    timed = timed_counts(history, counter, total)
    f = original.f.__get__(model)  # the model's own f, without the counter

    def floor(counts: Counts) -> float:
        x = original.inject(model, counts.given)  # the step's own windows
        seconds = floor_seconds(f, x, model.initial_state(x), counts)
        model.zero_grad(set_to_none=True)
        return seconds

    penalty = f", Jacobian penalty {job.jac_weight:g}" if job.backward == "ift" else ""
    solver = f"N = {job.train_iters}" + (
        f", B = {job.backward_spec.max_iter}" if job.backward == "ift" else "")
    return step_entry(f"{_lm_label(job, profile)}, {job.backward} arm, {solver} "
                      f"({job.forward_spec.method}, tol {job.forward_spec.tol:g}){penalty}, "
                      f"batch {job.batch_size}", history, timed, floor)


def mdeq_sweep_entry(name: str, images, labels, s: dict[str, object]) -> dict:
    """The book's test sweep of an MDEQ over its evaluations of f, after an untimed sweep of the
    first batch at the grid's two smallest counts (the timed shapes: a chapter's later batches)."""
    from i2o.models import MDEQClassifier, config

    torch.manual_seed(0)
    model = MDEQClassifier(config(name))
    first = images[:s["batch"]], labels[:s["batch"]]
    sweep_seconds(model, *first, sorted(s["grid"])[:2], s["batch"])
    sweep = sweep_seconds(model, images, labels, s["grid"], s["batch"])
    top = max(s["grid"])
    floor = f_seconds(model, images, top, s["batch"])
    label = "TINY" if name == "tiny" else name
    return {
        "name": f"test sweep over its f floor, {label} MDEQ (untrained), {s['images']} "
                f"CIFAR-10 test images, N' ∈ {{{', '.join(map(str, s['grid']))}}}, batch "
                f"{s['batch']}, {torch.get_num_threads()} thread(s)",
        "value": round(sweep, 3), "unit": "s", "peer": f"{top + 1} evaluations of f per batch",
        "peer_value": round(floor, 3), "ratio": sweep / floor,
        "goal": "≤ 2× (issue 41; 2.9× measured before it)"}


def run() -> list[dict]:
    from i2o.train.seeding import seed_everything

    seed_everything(0)  # deterministic mode, as in every chapter's job
    s = _setting()
    images, labels = _images(s["images"])
    entries = []
    for name in s["models"]:
        # the training steps first: the sweep after them finds the process's heap grown
        steps = [mdeq_step_entry(name, arm, s) for arm in s["arms"]]
        entries += [mdeq_sweep_entry(name, images, labels, s), *steps]
    if s["lm_profile"] != "none":
        from i2o.data.shakespeare import load_shakespeare

        corpus = load_shakespeare()
        job = language_job(s["lm_profile"], s)
        entries.append(lm_sweep_entry(job, s["lm_profile"], corpus))
        entries.append(lm_step_entry(job, s["lm_profile"], corpus))
    return entries
