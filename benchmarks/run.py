"""Run every ``benchmarks/bench_*.py`` and write ``_build/bench.json`` (``make bench``).

Each module defines ``run() -> list[dict]``; each dict has ``name``, ``value``, ``unit`` and,
where a peer was measured in the same run, ``peer``, ``peer_value`` and ``ratio`` (ours / peer),
optionally ``goal`` and ``note``. Nothing here asserts a time: the numbers are reported.

    python benchmarks/run.py [topic ...]     # e.g. `python benchmarks/run.py broyden`
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

from i2o import lineage, locations, runtime

HERE = Path(__file__).resolve().parent
REQUIRED = ("name", "value", "unit")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(topics: list[str]) -> int:
    runtime.apply_numerics()  # this process and every measuring subprocess, before torch loads
    runtime.set_threads()
    entries, failures = [], []
    for path in sorted(HERE.glob("bench_*.py")):
        topic = path.stem.removeprefix("bench_")
        if topics and topic not in topics:
            continue
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
