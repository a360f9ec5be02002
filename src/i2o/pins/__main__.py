"""``python -m i2o.pins env [portable|native]``: the numerics environment as shell lines, for
``eval "$(python -m i2o.pins env)"`` before starting a Python that computes results."""

from __future__ import annotations

import shlex
import sys

from i2o.base import runtime


def env_lines(mode: str | None = None) -> list[str]:
    """Shell lines giving a process the environment of ``mode`` (default the current one):
    ``export NAME=value`` for :func:`i2o.base.runtime.numerics_env`, and in native mode ``unset``
    for each portable pin."""
    env = runtime.numerics_env(mode)
    drop = runtime.PORTABLE_PINS if env["I2O_NUMERICS"] == "native" else ()
    return ([f"unset {name}" for name in drop]
            + [f"export {name}={shlex.quote(value)}" for name, value in env.items()])


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0] != "env":
        print("usage: python -m i2o.pins env [portable|native]\n  prints the numerics "
              "environment as shell lines: eval \"$(python -m i2o.pins env)\"", file=sys.stderr)
        return 2
    print("\n".join(env_lines(argv[1] if len(argv) == 2 else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
