"""Run every ``benchmarks/bench_*.py`` and write ``_build/bench.json`` (``make bench``).

Each module defines ``run() -> list[dict]``; each dict has ``name``, ``value``, ``unit`` and,
where a peer was measured in the same run, ``peer``, ``peer_value`` and ``ratio`` (ours / peer),
optionally ``goal`` and ``note``. Nothing here asserts a time: the numbers are reported.

A module that reads data sets names them in ``DATA_SETS`` (a tuple of literals, read from its
source without importing it); before any benchmark runs, every data set the chosen ones name is
made ready (:func:`i2o.data.preflight.check_data`), and a missing one stops the run (exit status 2)
with one line each naming the data set and ``I2O_DATA_DIR`` (``DATA_DIR=...`` with make).

    python benchmarks/run.py [topic ...]     # e.g. `python benchmarks/run.py broyden`
"""

from __future__ import annotations

import ast
import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

from i2o.base import lineage, locations, runtime
from i2o.data import preflight

HERE = Path(__file__).resolve().parent
REQUIRED = ("name", "value", "unit")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data_sets(path: Path) -> tuple[str, ...]:
    """The ``DATA_SETS`` a benchmark module assigns at its top level (``()`` when none)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "DATA_SETS"
                for target in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def chosen(topics: list[str]) -> list[Path]:
    """The benchmark modules of ``topics`` (every one when empty), in name order."""
    return [path for path in sorted(HERE.glob("bench_*.py"))
            if not topics or path.stem.removeprefix("bench_") in topics]


def missing_data(paths: list[Path], download: bool = True) -> list[str]:
    """One line per data set the benchmarks ``paths`` read that is not ready (found or
    downloaded, verified), naming it and the variable to set."""
    needed = [name for path in paths for name in data_sets(path)]
    problems = preflight.check_data(needed, download=download)
    return [reason for reason in problems.values() if reason]


def main(topics: list[str]) -> int:
    runtime.apply_numerics()  # this process and every measuring subprocess, before torch loads
    runtime.set_threads()
    paths = chosen(topics)
    if missing := missing_data(paths):
        print("error: the benchmarks need data sets that are not ready (set I2O_DATA_DIR, or "
              "DATA_DIR=... with make, to a folder holding them); nothing was run:",
              file=sys.stderr)
        for reason in missing:
            print(f"  {reason}", file=sys.stderr)
        return 2
    entries, failures = [], []
    for path in paths:
        topic = path.stem.removeprefix("bench_")
        print(f"== {topic}", flush=True)
        start = time.perf_counter()
        try:
            measured = _load(path).run()
        except Exception:
            failures.append(topic)
            traceback.print_exc()
            continue
        for entry in measured:
            missing = [k for k in REQUIRED if k not in entry]
            if missing:
                raise ValueError(f"{path.name}: entry {entry} misses {missing}")
            entry = {"topic": topic, **entry}
            entries.append(entry)
            ratio = f"  ratio {entry['ratio']:.3g} vs {entry['peer']}" if "ratio" in entry else ""
            print(f"  {entry['name']}: {entry['value']:.4g} {entry['unit']}{ratio}")
        print(f"  ({time.perf_counter() - start:.0f} s)")
    report = {"git": lineage.git_sha(), "date": lineage.now_iso(), "machine": platform.node(),
              "device": lineage.device_name(), "python": platform.python_version(),
              "provenance": lineage.provenance(),
              "entries": entries, "failed": failures}
    out = locations.build_dir() / "bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if topics and out.exists():  # a partial run updates its topics, keeps the others
        previous = json.loads(out.read_text())
        kept = [e for e in previous.get("entries", []) if e.get("topic") not in topics]
        report["entries"] = kept + entries
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
