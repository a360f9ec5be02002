"""What portable numerics costs, in all and pin by pin: the TINY training step, a DEQ-transformer
training step and one iMAML outer step, each timed in fresh processes in portable mode (every
library pinned, :mod:`i2o.base.runtime`), in native mode and, for the torch steps, in portable mode
without one of torch's pins (ATen, oneDNN, MKL), in alternating rounds of the same run so that every
configuration sees the same machine load: ``I2O_BENCH_NUMERICS_ROUNDS`` (default 1) rounds, each
one fresh process per configuration. With one round every ratio still compares configurations
measured within a minute of each other in the same run; more rounds (their median) narrow the
spread between fresh processes, for a record meant to be published. Portable / native decides
whether portable is the default (goal ≤ 1.3); portable / (portable without a pin) is that pin's
cost. On a CPU whose widest instruction set is AVX2, the instruction-set pins select the kernels
the libraries would pick anyway, so the ratios measure only the pins' other effects (MKL's
compatible branch, XLA without XNNPACK and platform-dependent math).

- TINY step: :func:`i2o.chapters.stability.stepcost.measure_step` (batch 32, N = 18,
  B_THRES = 20, IFT, one thread): one timed step after the process's first. With no early stop
  every step makes the same Broyden steps, so the second step is the steady state.
- DEQ-transformer step: the deq_gaps chapter's quick language model (T = 64, d = 64, 4 heads,
  FFN 128, batch 32, Broyden N = 8, IFT with B_THRES = 8), the median of three steps after one.
  Its products go through :mod:`i2o.models.portable_products` (in portable mode NumPy's OpenBLAS,
  AVX2); it is also timed in portable mode with torch's products (MKL's compatible branch, the
  path portable mode took before, :func:`~i2o.models.portable_products.use_numpy_products`), in the
  same alternating rounds: new / old and old / native.
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

import knobs

from i2o.base import lineage, runtime
from i2o.chapters.stability.stepcost import measure_step

ROUNDS = knobs.integer("I2O_BENCH_NUMERICS_ROUNDS", 1)
MODES = ("native", "portable")
#: torch's pins, each measured by leaving it out of portable mode
TORCH_PINS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
HERE = Path(__file__).resolve().parent
TRANSFORMER_STEP = """
import json, statistics, time, torch
from i2o.base import runtime
from i2o.deq import DEQ, SolverSpec
from i2o.models.deq_transformer import DEQTransformerLM, TransformerConfig
from i2o.train.schedule import adam
runtime.set_threads()
torch.manual_seed(0)
model = DEQTransformerLM(TransformerConfig(context=64, width=64, heads=4, ffn_width=128))
spec = SolverSpec(method="broyden", max_iter=8, tol=0.0, stop_mode="rel")
deq = DEQ(forward=spec, backward="ift", backward_spec=spec, output="z")
optimizer = adam(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 65, (32, 65))
def step():
    start = time.perf_counter()
    optimizer.zero_grad()
    x = model.inject(tokens[:, :-1])
    z, _ = deq(model.f, x, model.initial_state(x))
    model.token_nll(z, tokens[:, 1:]).mean().backward()
    optimizer.step()
    return time.perf_counter() - start
step()
print(json.dumps(statistics.median(step() for _ in range(3))))
"""
#: Run before TRANSFORMER_STEP: the model's products in torch (MKL) even in portable mode.
TORCH_PRODUCTS = """
from i2o.models import portable_products
portable_products.use_numpy_products(False)
"""
IMAML_STEP = f"""
import functools, json, statistics, sys
sys.path.insert(0, {str(HERE)!r})
import bench_meta
from i2o.chapters.meta import imaml
book = bench_meta.book_setting()
config = imaml.IMAMLConfig(regularization=book["imaml_regularization"],
                           acceleration=book["imaml_acceleration"])
run = bench_meta._ours(functools.partial(imaml.meta_loss, config=config), 20)
print(json.dumps(statistics.median(run() for _ in range(3))))
"""


def _processes() -> str:
    """How many fresh processes each configuration's value summarises."""
    if ROUNDS == 1:
        return "one fresh process per configuration, configurations back to back"
    return f"median of {ROUNDS} fresh processes per configuration, alternating"


def mode_env(mode: str, without: str | None = None) -> dict[str, str]:
    """This process's environment as a process started in ``mode`` sees it, optionally without
    the portable pin ``without``."""
    env = dict(os.environ)
    runtime.apply_numerics(env, mode=mode)
    if without:
        env.pop(without, None)
    return env


def _configurations() -> list[tuple[str, str | None]]:
    pins = TORCH_PINS if runtime.is_x86_64() else ()  # elsewhere nothing is pinned
    return [(mode, None) for mode in MODES] + [("portable", pin) for pin in pins]


def _tiny_step(mode: str, without: str | None = None) -> float:
    env = mode_env(mode, without)
    with runtime.environment(env, drop=set(os.environ) - set(env)):
        return measure_step("tiny", arm="ift", train_iter=18, backward_iter=20, batch=32,
                            steps=1, warmup=0, tol=0.0, threads=1)["seconds"]


def _script(script: str, what: str, mode: str, without: str | None = None) -> float:
    done = subprocess.run([sys.executable, "-c", script], env=mode_env(mode, without),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{what} ({mode}, without {without}) failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def _entries(name: str, times: dict[tuple[str, str | None], list[float]], unit_scale: float,
             unit: str) -> list[dict]:
    median = {config: statistics.median(values) * unit_scale for config, values in times.items()}
    portable = median[("portable", None)]
    note = f"{_processes()}; CPU {lineage.provenance()['cpu']}; one thread"
    entries = [{"name": f"portable numerics: {name}", "value": round(portable, 3), "unit": unit,
                "peer": "native numerics (same run)",
                "peer_value": round(median[("native", None)], 3),
                "ratio": round(portable / median[("native", None)], 3), "goal": "≤ 1.3",
                "note": note}]
    for (_, pin), value in median.items():
        if pin is not None:
            entries.append({"name": f"portable numerics, the {pin} pin: {name}",
                            "value": round(portable, 3), "unit": unit,
                            "peer": f"portable without {pin} (same run)",
                            "peer_value": round(value, 3), "ratio": round(portable / value, 3),
                            "note": note})
    return entries


def _products_entries(name: str, transformer: dict[tuple[str, str | None], list[float]],
                      torch_products: list[float]) -> list[dict]:
    """The transformer step in portable mode with NumPy's products (new) against torch's (MKL's
    compatible branch, old), and old against native, in ms."""
    new = statistics.median(transformer[("portable", None)]) * 1e3
    native = statistics.median(transformer[("native", None)]) * 1e3
    old = statistics.median(torch_products) * 1e3
    note = f"{_processes()}; CPU {lineage.provenance()['cpu']}; one thread"
    return [{"name": f"portable numerics, products by NumPy's OpenBLAS (new): {name}",
             "value": round(new, 3), "unit": "ms",
             "peer": "portable with torch's products, MKL's compatible branch (old, same run)",
             "peer_value": round(old, 3), "ratio": round(new / old, 3), "note": note},
            {"name": f"portable numerics, products by MKL's compatible branch (old): {name}",
             "value": round(old, 3), "unit": "ms", "peer": "native numerics (same run)",
             "peer_value": round(native, 3), "ratio": round(old / native, 3), "note": note}]


def run() -> list[dict]:
    configurations = _configurations()
    tiny: dict[tuple[str, str | None], list[float]] = {c: [] for c in configurations}
    transformer: dict[tuple[str, str | None], list[float]] = {c: [] for c in configurations}
    torch_products: list[float] = []
    meta: dict[tuple[str, str | None], list[float]] = {(mode, None): [] for mode in MODES}
    for _ in range(ROUNDS):
        for mode, pin in configurations:
            tiny[(mode, pin)].append(_tiny_step(mode, pin))
            transformer[(mode, pin)].append(_script(TRANSFORMER_STEP, "transformer step",
                                                    mode, pin))
        torch_products.append(_script(TORCH_PRODUCTS + TRANSFORMER_STEP,
                                      "transformer step with torch's products", "portable"))
        for mode in MODES:
            meta[(mode, None)].append(_script(IMAML_STEP, "iMAML step", mode))
    transformer_name = ("DEQ-transformer training step (deq_gaps quick: T=64, d=64, batch 32, "
                        "N=8, IFT)")
    return [*_entries("TINY training step (batch 32, N=18, B_THRES=20, IFT)", tiny, 1.0, "s"),
            *_entries(transformer_name, transformer, 1e3, "ms"),
            *_products_entries(transformer_name, transformer, torch_products),
            *_entries("meta iMAML outer step (the chapter's λ and solver, meta-batch 25)", meta,
                      1e3, "ms")]


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
