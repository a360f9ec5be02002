"""Golden fingerprints: what the smoke profile and the numerics probes compute, committed in
``tests/golden/`` with the machine that computed them, so that every ``make test`` on another CPU
checks the portable-numerics promise of the Numerics page (``book/numerics.md``).

- ``tests/golden/smoke.json``: :func:`i2o.provenance.fingerprint.fingerprint` of every chapter at
the smoke
  profile, replicate 0, portable mode;
- ``tests/golden/probes.json``: :mod:`i2o.provenance.probes` on the same machine, portable mode;
- ``tests/golden/quick.json``: the quick profile's fingerprints at replicate 0, written by hand
  (``python -m i2o.results fingerprint --profile quick -o tests/golden/quick.json`` after a
  ``make book``) and never checked by ``make test`` (quick takes an hour): a reproduction compares
  its own with ``python -m i2o.compare tests/golden/quick.json mine.json``.

``make golden`` (``python -m i2o.provenance.golden``) executes every smoke notebook into a temporary
build and results folder, then rewrites both files. Run it after a change that is meant to change
results, and say why in the commit; a change that is not meant to change them must leave them as
they are.

:func:`mismatch` is what the tests report when a fingerprint differs: the entries, the first probe
that differs (the kernel family to blame) and both machines.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from i2o.base import lineage, locations, runtime
from i2o.compute import profiles
from i2o.provenance import fingerprint, probes

#: Results that portable mode cannot make identical across CPUs, by chapter and entry name, with
#: the reason; the golden test leaves exactly these out (the Numerics page names them).
NOT_PORTABLE: dict[str, dict[str, str]] = {}
#: Probes of kernels known to differ between CPU vendors, with the reason: they are computed and
#: reported, never asserted across machines. No chapter result may depend on them.
NOT_PORTABLE_PROBES: dict[str, str] = {
    "torch_sqrt": "torch takes an elementwise square root from MKL's vector math, which on a CPU "
                  "outside MKL's Intel branch (and in its compatible branch) starts from the "
                  "approximate reciprocal square root instruction, whose bits differ between "
                  "vendors, in float32 and float64; the book's code takes its square roots "
                  "elsewhere (fused Adam, norms), but for the scalar one of torch's L-BFGS line "
                  "search (separation chapter, whose smoke results agreed under emulation)"}


def golden_dir() -> Path:
    return locations.repo_root() / "tests" / "golden"


def smoke_path() -> Path:
    return golden_dir() / "smoke.json"


def probes_path() -> Path:
    return golden_dir() / "probes.json"


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def without_exceptions(found: Mapping[str, Any]) -> dict[str, Any]:
    """A fingerprint file without the entries of :data:`NOT_PORTABLE`."""
    chapters = {}
    for figure, chapter in found["chapters"].items():
        left_out = NOT_PORTABLE.get(figure, {})
        chapters[figure] = {**chapter, "entries": {name: value for name, value in
                                                   chapter["entries"].items()
                                                   if name not in left_out}}
    return {**found, "chapters": chapters}


def describe_machine(machine: Mapping[str, Any]) -> str:
    flags = machine.get("flags") or []
    widest = next((flag for flag in ("avx512f", "avx2", "avx") if flag in flags), "no AVX")
    return (f"{machine.get('cpu', 'unknown CPU')} ({machine.get('vendor', '?')}, widest "
            f"{widest}; torch {machine.get('torch')}, jaxlib {machine.get('jaxlib')}, numerics "
            f"{machine.get('numerics')})")


def first_probe_differing(golden: Mapping[str, Any], found: Mapping[str, Any]) -> str | None:
    """The first probe (in :data:`i2o.provenance.probes.PROBES` order, outside
    :data:`NOT_PORTABLE_PROBES`) whose fingerprint differs."""
    for name in probes.PROBES:
        if name not in NOT_PORTABLE_PROBES and golden["probes"].get(name) != found["probes"].get(
                name):
            return name
    return None


#: The facts of a machine that the promise holds fixed: library versions (the lock) and threads.
SAME_SETUP = ("torch", "jax", "jaxlib", "jaxopt", "numpy", "scipy", "threads", "numerics")


def setup_differences(golden: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """What differs between two machines' facts that the portable promise holds fixed (another
    library version, thread count or numerics mode): results may differ for that reason alone."""
    a, b = golden.get("machine", {}), found.get("machine", {})
    return [f"{fact} {a.get(fact)!r} here {b.get(fact)!r}" for fact in SAME_SETUP
            if a.get(fact) != b.get(fact)]


def mismatch(golden_smoke: Mapping[str, Any], found_smoke: Mapping[str, Any],
             golden_probes: Mapping[str, Any] | None = None,
             found_probes: Mapping[str, Any] | None = None) -> str | None:
    """``None`` when the smoke fingerprints agree (outside :data:`NOT_PORTABLE`); otherwise what
    differs, the first probe that differs when both probe files are given, and both machines."""
    difference = fingerprint.difference(without_exceptions(golden_smoke),
                                        without_exceptions(found_smoke))
    if difference.same:
        return None
    lines = ["smoke results differ from the golden fingerprints (tests/golden/smoke.json):",
             *(f"  {line}" for line in difference.lines())]
    if setup := setup_differences(golden_smoke, found_smoke):
        lines.append(f"  not the golden's setup (golden {'; '.join(setup)}): the promise holds "
                     "these fixed, so compare on the golden's setup before blaming the code")
    elif golden_probes is not None and found_probes is not None:
        probe = first_probe_differing(golden_probes, found_probes)
        lines.append(f"  first numerics probe that differs: {probe}" if probe else
                     "  every numerics probe agrees: the code's results changed, not the "
                     "kernels (run `make golden` if that was meant, and say why in the commit)")
    lines += [f"  golden: {describe_machine(golden_smoke['machine'])}, git {golden_smoke['git']}",
              f"  here:   {describe_machine(found_smoke['machine'])}, git {found_smoke['git']}"]
    return "\n".join(lines)


def probe_mismatch(golden: Mapping[str, Any], found: Mapping[str, Any]) -> str | None:
    """``None`` when every probe found agrees (outside :data:`NOT_PORTABLE_PROBES`); otherwise
    the probes that differ and both machines."""
    names = [name for name in probes.PROBES
             if name in found["probes"] and name not in NOT_PORTABLE_PROBES
             and golden["probes"].get(name) != found["probes"][name]]
    if not names:
        return None
    return "\n".join([f"numerics probes differ from tests/golden/probes.json: {', '.join(names)}",
                      f"  golden: {describe_machine(golden['machine'])}",
                      f"  here:   {describe_machine(found['machine'])}"])


def write(smoke: Mapping[str, Any], probe_found: Mapping[str, Any]) -> None:
    golden_dir().mkdir(parents=True, exist_ok=True)
    for path, value in ((smoke_path(), smoke), (probes_path(), probe_found)):
        path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def regenerate() -> tuple[dict[str, Any], dict[str, Any]]:
    """Execute every smoke notebook in a temporary build and results folder (portable mode),
    fingerprint the results and run the probes; return both."""
    from i2o.book import execute

    runtime.apply_numerics()
    with tempfile.TemporaryDirectory(prefix="i2o-golden-") as tmp:
        with runtime.environment({"I2O_BUILD_DIR": f"{tmp}/_build",
                                  "I2O_RESULTS_DIR": f"{tmp}/results"}):
            for figure in profiles.figures():
                execute.run(figure, "smoke")
            smoke = fingerprint.fingerprint(profile="smoke")
    return smoke, probes.run(mode="portable")


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.provenance.golden`` (``make golden``): rewrite ``tests/golden/``."""
    argparse.ArgumentParser(prog="python -m i2o.provenance.golden",
                            description=__doc__.split("\n\n")[0]).parse_args(argv)
    if runtime.numerics_mode() != "portable" or not runtime.is_x86_64():
        print(f"error: the golden fingerprints are those of portable mode on x86-64; here: "
              f"{runtime.numerics_mode()} on {lineage.machine_facts()['machine']} (unset "
              "I2O_NUMERICS)", file=sys.stderr)
        return 2
    old = read(smoke_path()) if smoke_path().exists() else None
    smoke, probe_found = regenerate()
    write(smoke, probe_found)
    for figure, chapter in smoke["chapters"].items():
        print(f"{figure}: sha256 {chapter['digest']}")
    if old is not None:
        print("\n".join(fingerprint.difference(old, smoke).lines()) or "no smoke result changed")
    print(f"wrote {smoke_path()} and {probes_path()} on {describe_machine(smoke['machine'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
