"""The command line of a sweep, ``python -m i2o.sweep``: a figure's jobs submitted with submitit
(:func:`i2o.compute.sweep.sweep`), its parameters given as ``-p NAME VALUE`` (YAML values).

Command line (``make sweep FIG=stability EXECUTOR=slurm SLURM="--partition gpu --gpus 1"``)::

    python -m i2o.sweep stability --profile paper --executor slurm \\
        --partition gpu --time 720 --gpus 1 --cpus 4 [-p seeds "[0, 1]"] [--dry-run]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from i2o.compute import profiles, sweep
from i2o.compute.sweep import EXECUTORS


def _parse_overrides(pairs: list[list[str]] | None) -> dict[str, Any]:
    return {name: yaml.safe_load(raw) for name, raw in pairs or []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.sweep",
                                     description=(sweep.__doc__ or "").split("\n")[0])
    parser.add_argument("figure", choices=profiles.figures())
    parser.add_argument("--profile", default="quick", choices=profiles.PROFILES)
    parser.add_argument("--executor", default="local", choices=EXECUTORS)
    parser.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="override a figure parameter (YAML value), e.g. -p seeds '[0, 1]'")
    parser.add_argument("--partition", help="SLURM partition (required with --executor slurm)")
    parser.add_argument("--time", type=int, default=240, help="minutes per job (default 240)")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per job (default 0)")
    parser.add_argument("--cpus", type=int, default=1,
                        help="CPU cores (torch threads) per job; a count other than 1 gives "
                        "other bits, stored as other cache entries")
    parser.add_argument("--max-parallel", type=int, default=2,
                        help="jobs running at once (local) / SLURM array parallelism (default 2)")
    parser.add_argument("--slurm-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sbatch option, e.g. --slurm-arg qos=qos_gpu-t3 (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="list the jobs, submit nothing")
    args = parser.parse_args(argv)
    try:
        slurm_args = dict(item.split("=", 1) for item in args.slurm_arg)
    except ValueError:
        parser.error(f"--slurm-arg takes KEY=VALUE; got {args.slurm_arg}")
    try:
        sweep.sweep(args.figure, args.profile, args.executor, _parse_overrides(args.parameter),
                    args.partition, args.time, args.gpus, args.cpus, args.max_parallel,
                    slurm_args, args.dry_run)
    except (profiles.ParameterError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
