"""Before any notebook or benchmark runs: is every data set it reads there (fetched and verified)?

Each figure of the manifest lists the data sets it reads (``data:`` in its ``chapter.yaml``;
none for the theory and meta-learning chapters). :func:`check` makes each needed data set ready once
(:func:`i2o.data.fetch.ensure_all`: found or downloaded, checksums verified, one process at a
time) and returns, per figure, ``None`` when it can run or a one-line reason naming the data set
and the variable to set (``I2O_DATA_DIR``, or ``DATA_DIR`` with make) when it cannot.
:func:`check_data` does the same for data sets named directly (``make bench``: each benchmark
declares its ``DATA_SETS``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from i2o.compute import profiles
from i2o.data.fetch import DATASETS, ensure_all


def needs(figure: str) -> list[str]:
    """The data sets figure ``figure`` reads (``data:`` in the manifest; ``[]`` when absent)."""

    names = list(profiles.entry(figure).get("data") or [])
    unknown = [name for name in names if name not in DATASETS]
    if unknown:
        raise ValueError(f"{figure}: chapter.yaml: data names unknown data set(s) {unknown}; "
                         f"the data sets are: {', '.join(DATASETS)}")
    return names


def check(figures: Iterable[str], download: bool = True,
          ensure: Callable[..., dict[str, str | None]] | None = None) -> dict[str, str | None]:
    """``{figure: None | "one-line reason"}``; each needed data set is made ready only once.

    ``ensure`` (default :func:`i2o.data.fetch.ensure_all`) maps data set names to ``None`` or the
    reason one is missing.
    """
    figures = list(figures)
    wanted = list(dict.fromkeys(name for figure in figures for name in needs(figure)))
    problems = check_data(wanted, download, ensure)
    return {figure: "; ".join(problem for name in needs(figure) if (problem := problems.get(name)))
            or None for figure in figures}


def check_data(names: Iterable[str], download: bool = True,
               ensure: Callable[..., dict[str, str | None]] | None = None
               ) -> dict[str, str | None]:
    """``{name: None | "one-line reason"}`` for the data sets ``names`` (each made ready once,
    by ``ensure``, default :func:`i2o.data.fetch.ensure_all`); ``ValueError`` for a name that is
    no data set."""
    wanted = list(dict.fromkeys(names))
    unknown = [name for name in wanted if name not in DATASETS]
    if unknown:
        raise ValueError(f"unknown data set(s) {unknown}; the data sets are: "
                         f"{', '.join(DATASETS)}")
    return (ensure or ensure_all)(wanted, download=download) if wanted else {}


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.data.preflight [figure ...]``: exit 1 with one line per figure that cannot
    run."""

    figures = list(argv if argv is not None else sys.argv[1:]) or profiles.figures()
    try:
        for figure in figures:
            profiles.entry(figure)
    except profiles.ParameterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    reasons = check(figures)
    for figure, reason in reasons.items():
        if reason:
            print(f"error: {figure} cannot run: {reason}", file=sys.stderr)
    return 1 if any(reasons.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
