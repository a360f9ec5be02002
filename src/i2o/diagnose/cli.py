"""``python -m i2o.diagnose``: the diagnosis of a trained implicit model from the command line.

    python -m i2o.diagnose --model my_model.py:build --checkpoint model.pt \\
        --data test.pt --train-data train.pt --train-iters 18 --metric accuracy --out diagnosis/

prints the table and the recommendation, writes ``diagnosis.json``, ``diagnosis.png`` and
``diagnosis.pdf`` into ``--out``, and shows progress on the terminal. Every input is checked before
any compute; a bad one stops the command with one line saying what is wrong (exit status 2).
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
from pathlib import Path
from typing import Any

import torch

from i2o import runtime
from i2o.diagnose.metrics import NAMED
from i2o.diagnose.run import DEFAULT_MARGINS, check_inputs, diagnose

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
    p.add_argument("--train-iters", type=int, metavar="N",
                   help="N, the forward iterations used in training (default for a torchdeq "
                        "model: its f_max_iter)")
    p.add_argument("--grid", metavar="GRID",
                   help="the test-time counts N': 'A:B' (every count from A to B), 'A:B:S' (step "
                        "S) or 'n1,n2,...'; must include N (default: 1 … 3N)")
    p.add_argument("--metric", default="accuracy", metavar="NAME",
                   help=f"one of {', '.join(NAMED)}, or FILE.py:FUNC, a function (y_hat, y) -> "
                        "one value per example, with --higher-is-better or --lower-is-better "
                        "(default: accuracy)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="higher", action="store_const", const=True,
                           help="the custom metric improves upwards")
    direction.add_argument("--lower-is-better", dest="higher", action="store_const", const=False,
                           help="the custom metric improves downwards")
    p.add_argument("--margin", type=float, metavar="DELTA",
                   help="δ, the smallest change of the metric that matters, in its units "
                        "(default: " + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_MARGINS.items())
                        + "; required for a custom metric)")
    p.add_argument("--fit", metavar="THRESHOLD",
                   help="fit criterion gating the verdicts: a threshold on the training metric at "
                        "N (needs --train-data), or 'stated' (you state the model fits); default: "
                        "no gate")
    p.add_argument("--level", type=float, default=0.9,
                   help="confidence level of every interval (default 0.9: two one-sided tests "
                        "at 5 %%)")
    p.add_argument("--batch-size", type=int, default=250,
                   help="rows per batch for tensor data (default 250)")
    p.add_argument("--limit", type=int, metavar="K",
                   help="use at most K examples of each data set")
    p.add_argument("--per-n", action="store_true",
                   help="one forward solve per N' instead of one per batch reading every iterate "
                        "(slower; for models whose solver cannot be shared)")
    p.add_argument("--out", default="diagnosis", metavar="DIR",
                   help="where diagnosis.json, diagnosis.png and diagnosis.pdf are written "
                        "(default ./diagnosis)")
    p.add_argument("--threads", type=int, default=None,
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
    if text is None:
        return None
    try:
        if ":" in text:
            parts = [int(p) for p in text.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
                raise ValueError
            return list(range(parts[0], parts[1] + 1, parts[2] if len(parts) == 3 else 1))
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"--grid must be 'A:B', 'A:B:S' or 'n1,n2,...'; got {text!r}") from None


def parse_fit(text: str | None) -> float | bool | None:
    if text is None:
        return None
    if text == "stated":
        return True
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--fit must be a number or 'stated'; got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser().error(f"--threads must be ≥ 1; got {args.threads}")
    if args.threads is not None:  # --threads wins over the I2O_THREADS the Makefile exports
        os.environ["I2O_THREADS"] = str(args.threads)
    runtime.set_threads()
    try:
        metric: Any = args.metric
        if args.metric.endswith(".py") or ".py:" in args.metric:
            metric = _load_function(args.metric, "--metric")
        elif args.higher is not None:
            raise ValueError("--higher-is-better/--lower-is-better apply to a custom metric only")
        options = dict(train_iters=args.train_iters, metric=metric, higher_is_better=args.higher,
                       grid=parse_grid(args.grid), margin=args.margin, fit=parse_fit(args.fit),
                       level=args.level, batch_size=args.batch_size, limit=args.limit)
        model = load_model(args.model, args.checkpoint)
        test = load_data(args.data, "--data")
        train = load_data(args.train_data, "--train-data")
        check_inputs(model, test, train=train, **options)
    except (ValueError, TypeError) as error:
        print(f"python -m i2o.diagnose: error: {error}", file=sys.stderr)
        return 2
    result = diagnose(model, test, train=train, shared=not args.per_n,
                      progress=False if args.no_progress else None, **options)
    print(result.table())
    print()
    print(result.claims().to_text())
    print()
    print(result.summary())
    out = Path(args.out)
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
