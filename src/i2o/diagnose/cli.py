"""``python -m i2o.diagnose``: the diagnosis of a trained implicit model from the command line.

    python -m i2o.diagnose --model my_model.py:build --checkpoint model.pt \\
        --data test.pt --train-data train.pt --train-iters 18 --metric accuracy --out diagnosis/

prints the table and the recommendation, writes ``diagnosis.json``, ``diagnosis.png`` and
``diagnosis.pdf`` into ``--out``, and shows progress on the terminal. Every input is checked before
any compute (the options by :func:`read_options`, with :mod:`i2o.compute.inputs`'s grammar, before
the model file runs; ``--out`` must be a folder that can be written; the environment variables;
then the model and the data, :func:`i2o.diagnose.run.check_inputs`); a bad one stops the command
with one line saying what is wrong (exit status 2).
What a command line cannot load (a model that needs live Python objects, several seeds) is one
call of :func:`i2o.diagnose.diagnose`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from i2o.base import runtime
from i2o.compute import inputs
from i2o.diagnose import run
from i2o.diagnose.metrics import NAMED
from i2o.diagnose.run import DEFAULT_MARGINS, check_inputs, diagnose

#: The integer options, read by :func:`i2o.compute.inputs.read`.
BATCH_SIZE_SPEC = inputs.Spec("int", 1, 1_000_000, help="rows per batch")
THREADS_SPEC = inputs.Spec("int", 1, inputs.MAX_THREADS, help="torch threads")
COUNT_SPEC = inputs.Spec("int", 1, run.MAX_COUNT)

EPILOG = """\
A model file is plain Python: FUNC() returns a torch module holding a torchdeq DEQ, an
i2o.models.MDEQClassifier, or an i2o.diagnose adapter (PlainDEQ(f, z0, readout) for a hand-written
layer). Data: a .pt file holding (x, y), {"x": x, "y": y} or a TensorDataset, or FILE.py:FUNC
returning a DataLoader of (x, y) batches or a pair of tensors.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m i2o.diagnose", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Is an implicit model overfitting its inner iterations, and which test-time "
                    "number of iterations N' should it use? Evaluates the model at every N' of a "
                    "grid (one forward solve per batch where possible), measures the gap "
                    "D(N, ΔN) = metric at N+ΔN minus metric at N with confidence intervals, and "
                    "decides: more iterations help / hurt / make no difference beyond δ; fewer "
                    "hurt; the N' to use.")
    p.add_argument("--model", required=True, metavar="FILE.py:FUNC",
                   help="a Python file and a function in it, called without arguments, that "
                        "returns the model (see below)")
    p.add_argument("--checkpoint", metavar="FILE",
                   help="a state_dict saved with torch.save, loaded into the model (strictly) "
                        "before the diagnosis")
    p.add_argument("--data", required=True, metavar="SPEC",
                   help="the test data: FILE.pt or FILE.py:FUNC (see below)")
    p.add_argument("--train-data", metavar="SPEC",
                   help="the training data (optional): its curve is drawn and --fit is measured "
                        "on it")
    p.add_argument("--train-iters", metavar="N",
                   help=f"N, the forward iterations used in training, at most "
                        f"{run.MAX_TRAIN_ITERS:,} (default for a torchdeq model: its f_max_iter)")
    p.add_argument("--grid", metavar="GRID",
                   help="the test-time counts N': 'A:B' (every count from A to B), 'A:B:S' (step "
                        f"S) or 'n1,n2,...', each ≤ {run.MAX_COUNT:,}, at most "
                        f"{inputs.MAX_ITEMS:,} counts; must include N (default: 1 … 3N)")
    p.add_argument("--metric", default="accuracy", metavar="NAME",
                   help=f"one of {', '.join(NAMED)}, or FILE.py:FUNC, a function (y_hat, y) -> "
                        "one value per example, with --higher-is-better or --lower-is-better "
                        "(default: accuracy)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="higher", action="store_const", const=True,
                           help="the custom metric improves upwards")
    direction.add_argument("--lower-is-better", dest="higher", action="store_const", const=False,
                           help="the custom metric improves downwards")
    p.add_argument("--margin", metavar="DELTA",
                   help="δ, the smallest change of the metric that matters, in its units "
                        "(default: " + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_MARGINS.items())
                        + "; required for a custom metric)")
    p.add_argument("--fit", metavar="THRESHOLD",
                   help="fit criterion gating the verdicts: a threshold on the training metric at "
                        "N (needs --train-data; a fraction for accuracy, in (0, 1]: 0.9 for 90 "
                        "%%), or 'stated' (you state the model fits); default: no gate")
    p.add_argument("--level", default="0.9",
                   help="confidence level of every interval (default 0.9: two one-sided tests "
                        "at 5 %%)")
    p.add_argument("--batch-size", default="250",
                   help="rows per batch for tensor data (default 250)")
    p.add_argument("--limit", metavar="K",
                   help="use at most K examples of each data set (K ≥ 1)")
    p.add_argument("--per-n", action="store_true",
                   help="one forward solve per N' instead of one per batch reading every iterate "
                        "(slower; for models whose solver cannot be shared)")
    p.add_argument("--out", default="diagnosis", metavar="DIR",
                   help="where diagnosis.json, diagnosis.png and diagnosis.pdf are written "
                        "(default ./diagnosis; checked to be writable before any compute)")
    p.add_argument("--threads", default=None,
                   help="torch threads (default: I2O_THREADS or 1); wins over I2O_THREADS")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _load_function(spec: str, what: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise ValueError(f"{what} must be FILE.py:FUNC; got {spec!r}")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{what}: no file {file}")
    module_spec = importlib.util.spec_from_file_location(f"_i2o_user_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{what}: {file} has no function {name!r}")
    return function


#: What a ``--data`` file may hold, as the error for any other content says it.
DATA_FILE_CONTENTS = ("a pair (x, y) of tensors, a dict {'x': x, 'y': y} of tensors or a "
                      "TensorDataset")


def load_tensor_file(file: Path, what: str) -> Any:
    """The data a ``.pt`` file holds, read with ``torch.load(weights_only=True)`` (tensors,
    containers of them and a ``TensorDataset``; no code pickled in the file runs): ``(x, y)``
    from a pair or from a dict with keys ``x`` and ``y``, or the ``TensorDataset``.
    ``ValueError`` naming the file and :data:`DATA_FILE_CONTENTS` for anything else."""
    expected = f"expected {DATA_FILE_CONTENTS}, saved with torch.save"
    try:
        with torch.serialization.safe_globals([torch.utils.data.TensorDataset]):
            data = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", str(error))
        if refused:  # torch's refusal of an object that is not a tensor or a container of them
            raise ValueError(f"{what}: {file} holds objects other than tensors ({refused[1]}), "
                             f"which are not loaded (unpickling them could run code); "
                             f"{expected}") from None
        raise ValueError(f"{what}: {file} is not a file torch.load can read "
                         f"({type(error).__name__}); {expected}") from None
    except Exception as error:
        raise ValueError(f"{what}: {file} is not a file torch.load can read "
                         f"({type(error).__name__}); {expected}") from None
    if isinstance(data, torch.utils.data.TensorDataset):
        return data
    if isinstance(data, dict):
        if not {"x", "y"} <= set(data):
            raise ValueError(f"{what}: {file} holds a dict without keys 'x' and 'y' "
                             f"(keys: {sorted(map(str, data))}); {expected}")
        held, data = "a dict whose 'x' and 'y' are", (data["x"], data["y"])
    elif isinstance(data, tuple | list):
        held = f"a {type(data).__name__} of {len(data)} item(s):"
    else:
        raise ValueError(f"{what}: {file} holds a {type(data).__name__}; {expected}")
    if len(data) != 2 or not all(isinstance(t, torch.Tensor) for t in data):
        kinds = ", ".join(type(item).__name__ for item in data)
        raise ValueError(f"{what}: {file} holds {held} {kinds or 'nothing'}; {expected}")
    return tuple(data)


def load_data(spec: str | None, what: str) -> Any:
    """The data of a ``--data``-like option (module docstring of the epilog)."""
    if spec is None:
        return None
    if ":" in spec and spec.rpartition(":")[0].endswith(".py"):
        return _load_function(spec, what)()
    file = Path(spec)
    if not file.is_file():
        raise ValueError(f"{what}: no file {file} (give FILE.pt or FILE.py:FUNC)")
    return load_tensor_file(file, what)


def load_model(spec: str, checkpoint: str | None) -> Any:
    model = _load_function(spec, "--model")()
    if checkpoint is not None:
        file = Path(checkpoint)
        if not file.is_file():
            raise ValueError(f"--checkpoint: no file {file}")
        module = model if isinstance(model, torch.nn.Module) else getattr(model, "model", None)
        if not isinstance(module, torch.nn.Module):
            raise ValueError("--checkpoint needs a model that is (or holds, as .model) a "
                             "torch.nn.Module")
        module.load_state_dict(torch.load(file, map_location="cpu", weights_only=True))
    return model


def parse_grid(text: str | None) -> list[int] | None:
    """``--grid``: ``A:B``, ``A:B:S`` or ``n1,n2,...`` of integers (:mod:`i2o.compute.inputs`'s
    grammar), each count 1 … :data:`i2o.diagnose.run.MAX_COUNT`, at most
    :data:`i2o.compute.inputs.MAX_ITEMS`."""
    if text is None:
        return None
    allowed = (f"'A:B', 'A:B:S' or 'n1,n2,...' of counts ≥ 1 and ≤ {run.MAX_COUNT:,} (at most "
               f"{inputs.MAX_ITEMS:,} counts)")
    parts = text.split(":") if ":" in text else text.split(",")
    try:
        if ":" in text and len(parts) not in (2, 3):
            raise inputs.ParameterError("")
        numbers = [inputs.read(part, COUNT_SPEC, "--grid") for part in parts]
    except inputs.ParameterError:
        raise inputs.ParameterError(f"--grid must be {allowed}; got {text!r}") from None
    if ":" in text:
        step = numbers[2] if len(numbers) == 3 else 1
        grid = list(range(numbers[0], numbers[1] + 1, step))
    else:
        grid = numbers
    if not grid or len(grid) > inputs.MAX_ITEMS:
        raise inputs.ParameterError(f"--grid must be {allowed}; got {text!r} "
                                    f"({len(grid):,} counts)")
    return grid


def parse_fit(text: str | None, metric: str | None = "accuracy") -> float | bool | None:
    """``--fit``: ``stated``, or a threshold on the training ``metric`` at N
    (:func:`i2o.diagnose.run.fit_spec`: a fraction for accuracy, 0.9 for 90 %)."""
    if text is None:
        return None
    if text == "stated":
        return True
    spec = run.fit_spec(metric)
    try:
        return inputs.read(text, spec, "--fit")
    except inputs.ParameterError:
        raise inputs.ParameterError(
            f"--fit must be 'stated' or {inputs.describe(spec)}; got {text!r}"
            + (f" ({spec.help})" if spec.help else "")) from None


def check_out(text: str) -> Path:
    """``--out``: a folder that exists and can be written, or that can be made in the nearest
    folder above it that exists and can be written; checked by writing (and removing) a file
    there, before any compute. ``ParameterError`` naming ``--out`` otherwise."""
    if not text.strip():
        raise inputs.ParameterError("--out must be a folder; got ''")
    out = Path(text)
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == out else f"is under {existing}, a file"
        raise inputs.ParameterError(f"--out must be a folder that can be written; {out} {what}")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise inputs.ParameterError(f"--out must be a folder that can be written; {existing} "
                                    f"cannot be written ({error.strerror or error})") from None
    return out


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """Every option of the command line that is a value, read before any file is loaded: the
    keyword arguments of :func:`i2o.diagnose.run.check_inputs` (less the model and the data;
    ``metric`` a name or FILE.py:FUNC, still unloaded), ``threads`` and ``out``.
    :class:`i2o.compute.inputs.ParameterError` (one line, naming the option) for a bad one."""
    custom = args.metric.endswith(".py") or ".py:" in args.metric
    if custom:
        name = None
    elif args.metric in NAMED:
        name = args.metric
    else:
        raise inputs.ParameterError(f"--metric must be one of {', '.join(NAMED)} or "
                                    f"FILE.py:FUNC; got {args.metric!r}")
    if args.higher is not None and not custom:
        raise inputs.ParameterError("--higher-is-better/--lower-is-better apply to a custom "
                                    "metric only")

    def number(text: str | None, spec: inputs.Spec, option: str) -> Any:
        return None if text is None else inputs.read(text, spec, option)

    return dict(
        train_iters=number(args.train_iters, run.TRAIN_ITERS_SPEC, "--train-iters"),
        metric=args.metric, higher_is_better=args.higher, grid=parse_grid(args.grid),
        margin=number(args.margin, run.margin_spec(name), "--margin"),
        fit=parse_fit(args.fit, name), level=inputs.read(args.level, run.LEVEL_SPEC, "--level"),
        batch_size=inputs.read(args.batch_size, BATCH_SIZE_SPEC, "--batch-size"),
        limit=number(args.limit, run.LIMIT_SPEC, "--limit"),
        threads=number(args.threads, THREADS_SPEC, "--threads"), out=check_out(args.out))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        inputs.check_environment()
        options = read_options(args)
        threads, out = options.pop("threads"), options.pop("out")
        if threads is not None:  # --threads wins over the I2O_THREADS the Makefile exports
            os.environ["I2O_THREADS"] = str(threads)
        runtime.set_threads(threads)
        if options["metric"].endswith(".py") or ".py:" in options["metric"]:
            options["metric"] = _load_function(options["metric"], "--metric")
        model = load_model(args.model, args.checkpoint)
        test = load_data(args.data, "--data")
        train = load_data(args.train_data, "--train-data")
        check_inputs(model, test, train=train, **options)
    except (ValueError, TypeError, FloatingPointError) as error:
        print(f"python -m i2o.diagnose: error: {error}", file=sys.stderr)
        return 2
    try:
        result = diagnose(model, test, train=train, shared=not args.per_n,
                          progress=False if args.no_progress else None, **options)
    except (ValueError, FloatingPointError) as error:  # a solve that diverged on the data
        print(f"python -m i2o.diagnose: error: {error}", file=sys.stderr)
        return 1
    print(result.table())
    print()
    print(result.claims().to_text())
    print()
    print(result.summary())
    json_path = result.save_json(out / "diagnosis.json")
    import matplotlib  # lazy: matplotlib only when a figure is asked for

    matplotlib.use("Agg")
    from i2o.book import plotting  # lazy: with matplotlib

    plotting.use_style()
    fig = result.figure()
    for suffix in ("png", "pdf"):
        fig.savefig(out / f"diagnosis.{suffix}")
    print(f"wrote {json_path}, {out / 'diagnosis.png'}, {out / 'diagnosis.pdf'}")
    return 0
