"""The command line of a sweep, ``python -m i2o.sweep``: a figure's jobs submitted with submitit
(:func:`i2o.compute.sweep.sweep`), its parameters given as ``-p NAME VALUE`` (each value read by
the parameter's schema, :func:`i2o.compute.profiles.read_overrides`; the grammar is
:mod:`i2o.compute.inputs`'s, not YAML's). Every bad figure, profile, parameter, option or
environment variable stops it before anything is listed, with one line (exit status 2).

Command line (``make sweep FIG=stability EXECUTOR=slurm SLURM="--partition gpu --gpus 1"``)::

    python -m i2o.sweep stability --profile paper --executor slurm \\
        --partition gpu --time 720 --gpus 1 --cpus 4 [-p seeds "[0, 1]"] [--dry-run]
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
from typing import Any

from i2o.compute import inputs, profiles, sweep
from i2o.compute.sweep import EXECUTORS

#: The numeric options, each read by :func:`i2o.compute.inputs.read` (one line for a bad one).
OPTIONS = {
    "time": inputs.Spec("int", 1, 60 * 24 * 30, help="minutes per job, at most 30 days"),
    "gpus": inputs.Spec("int", 0, 64, help="GPUs per job"),
    "cpus": inputs.Spec("int", 1, inputs.MAX_THREADS, help="CPU cores (torch threads) per job"),
    "max_parallel": inputs.Spec("int", 1, 10_000, help="jobs running at once"),
}


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep's arguments from the parsed command line, every one checked: the figure, the
    profile, the numeric options, ``--slurm-arg KEY=VALUE`` and the ``-p`` pairs
    (:class:`i2o.compute.profiles.ParameterError`, one line, for the first bad one)."""
    profiles.entry(args.figure)
    if args.profile not in profiles.PROFILES:
        raise profiles.ParameterError(f"--profile must be one of "
                                      f"{', '.join(profiles.PROFILES)}; got {args.profile!r}")
    if args.executor not in EXECUTORS:
        raise profiles.ParameterError(f"--executor must be one of {', '.join(EXECUTORS)}; "
                                      f"got {args.executor!r}")
    numbers = {name: inputs.read(getattr(args, name), spec, f"--{name.replace('_', '-')}")
               for name, spec in OPTIONS.items()}
    slurm_args = {}
    for item in args.slurm_arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise profiles.ParameterError(f"--slurm-arg takes KEY=VALUE; got {item!r}")
        slurm_args[key] = value
    return {"figure": args.figure, "profile": args.profile, "executor": args.executor,
            "overrides": profiles.read_overrides(args.figure, args.parameter),
            "partition": args.partition, **numbers, "slurm_args": slurm_args,
            "dry_run": args.dry_run}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.sweep",
                                     description=(sweep.__doc__ or "").split("\n")[0])
    parser.add_argument("figure", help=f"one of {', '.join(profiles.figures())}")
    parser.add_argument("--profile", default="quick",
                        help=f"one of {', '.join(profiles.PROFILES)} (default quick)")
    parser.add_argument("--executor", default="local",
                        help=f"one of {', '.join(EXECUTORS)} (default local)")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="override a figure parameter, e.g. -p seeds '[0, 1]' (the grammar "
                             "of i2o.compute.inputs: 1e-2 is a number, 010 and 1:30 are refused)")
    parser.add_argument("--partition", help="SLURM partition (required with --executor slurm)")
    parser.add_argument("--time", default="240", help="minutes per job (default 240)")
    parser.add_argument("--gpus", default="0", help="GPUs per job (default 0)")
    parser.add_argument("--cpus", default="1",
                        help="CPU cores (torch threads) per job; a count other than 1 gives "
                        "other bits, stored as other cache entries")
    parser.add_argument("--max-parallel", default="2",
                        help="jobs running at once (local) / SLURM array parallelism (default 2)")
    parser.add_argument("--slurm-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sbatch option, e.g. --slurm-arg qos=qos_gpu-t3 (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="list the jobs, submit nothing")
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminated)  # an exception: workers cancelled
    try:
        return _run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        inputs.check_environment()
        o = read_options(args)
        sweep.sweep(o["figure"], o["profile"], o["executor"], o["overrides"], o["partition"],
                    o["time"], o["gpus"], o["cpus"], o["max_parallel"], o["slurm_args"],
                    o["dry_run"])
    except (profiles.ParameterError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # submitit's UncompletedJobError: a task failed or was killed
        if type(error).__module__.split(".")[0] != "submitit":
            raise
        print(f"error: a task of {args.figure} did not finish ({_reason(error)}); the other "
              f"running jobs were cancelled; logs: {sweep.log_path(args.figure).parent}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the running jobs were cancelled; their checkpoints are kept and a "
              "rerun resumes from them", file=sys.stderr)
        return 130
    return 0


def _reason(error: BaseException) -> str:
    """A submitit error in a few words: a failed task's own error (its message's last line), or,
    for a task that produced no result (killed, out of memory), its state."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if type(error).__name__ == "FailedJobError":
        return f"{type(error).__name__}: {lines[-1] if lines else 'no message'}"
    state = re.search(r"has not produced any output \(state: ([^)]*)\)", str(error))
    if state:
        return (f"its process ended without a result, state {state.group(1)}: killed, or out "
                "of memory")
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: the sweep's loop cancels its workers on the way out."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
