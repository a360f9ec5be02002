"""``python -m i2o.provenance COMMAND ...`` (also ``python -m i2o.results COMMAND ...``): the
commands that say where a result came from and move it between machines.

- ``fingerprint``: one SHA-256 per cached result of a chapter's jobs (:mod:`.fingerprint`);
- ``deps``: the modules each job class's cache key covers (:mod:`.dependencies`);
- ``export``: a chapter's cached results as one bundle, manifest and checksums (:mod:`.bundles`);
- ``import``: a bundle verified, then written into the cache (:mod:`.bundles`);
- ``rekey``: the results cache and the published digests moved to content keys
  (:mod:`.rekey`);
- ``plan``: the wall time of the book's jobs on K cores, from recorded costs
  (:mod:`i2o.compute.plan`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from i2o.compute import inputs, plan
from i2o.provenance import bundles, dependencies, fingerprint, rekey

#: Each command, with the function that runs it on the rest of the command line.
COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "fingerprint": fingerprint.main, "deps": dependencies.main, "export": bundles.export_main,
    "import": bundles.import_main, "plan": plan.main, "rekey": rekey.main}

USAGE = f"usage: python -m i2o.results {{{','.join(COMMANDS)}}} ..."


def main(argv: list[str] | None = None) -> int:
    """Run the command named by ``argv[0]`` (default: the command line) on the rest."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n"
              "  fingerprint  one SHA-256 per cached result of a chapter's jobs\n"
              "  deps         the modules each job class's cache key covers\n"
              "  export       a chapter's cached results as one bundle (manifest, checksums)\n"
              "  import       a bundle verified, then written into the cache\n"
              "  plan         the wall time of the book's jobs on K cores, from recorded costs\n"
              "  rekey        the results cache and published digests moved to content keys\n\n"
              "python -m i2o.results COMMAND --help describes each.")
        return 0
    if not argv or argv[0] not in COMMANDS:
        given = f"got {argv[0]!r}" if argv else "none given"
        print(f"{USAGE}\nerror: the command must be one of {', '.join(COMMANDS)}; {given}",
              file=sys.stderr)
        return 2
    try:
        inputs.check_environment()  # I2O_RESULTS_DIR and the others, before any command reads
    except inputs.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
