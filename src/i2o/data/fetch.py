"""Fetch and verify every data set once, before any job starts: ``make data``.

``python -m i2o.data.fetch [cifar10 shakespeare]`` finds each data set in the data dir
(:func:`i2o.base.locations.data_dir`: ``I2O_DATA_DIR`` or ``<repo>/data``), downloads it there when
it is missing (online), and verifies it against its checksums (CIFAR-10: the image folder against
``cifar10.sha256``, the official archive against torchvision's MD5; Tiny Shakespeare: its
published SHA-256). It decodes CIFAR-10 into the array cache so that the jobs only read it.

Downloads are atomic (a private temporary folder or file, renamed into place) and done by one
process at a time: every download, here or in a loader, holds the lock of its data dir
(:func:`i2o.data.download.download_lock`), and re-checks for the data set once it holds it,
so two jobs started together download it once.
Exit status 0 when every data set is ready, 1 with one line per missing or damaged data set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable

from i2o.base import locations
from i2o.data import decoded
from i2o.data.cifar10 import load_cifar10
from i2o.data.errors import DataCorruptError, DataNotFoundError
from i2o.data.shakespeare import load_shakespeare

DATASETS = ("cifar10", "shakespeare")
VARIABLE_HINT = ("set I2O_DATA_DIR (or DATA_DIR=... with make) to a folder holding a copy, "
                 "e.g. ../shared/data")


def ensure(name: str, download: bool = True) -> str:
    """Make data set ``name`` ready (found or downloaded, verified, decoded); say where it is.

    Raises the loaders' :class:`~i2o.data.DataNotFoundError` / :class:`~i2o.data.DataCorruptError`.
    """
    if name == "cifar10":
        since = time.time()  # arrays written after it were decoded by these loads
        sets = [load_cifar10(split, download=download) for split in ("train", "test")]
        repaired = [said for split in ("train", "test")
                    if (said := decoded.verify(split, since)) is not None]
        if repaired:
            sets = [load_cifar10(split, download=download) for split in ("train", "test")]
        return (f"CIFAR-10: {len(sets[0]):,} + {len(sets[1]):,} images from {sets[0].source}, "
                "decoded arrays checked against their SHA-256"
                + "".join(f"; {said}" for said in repaired))
    if name == "shakespeare":
        corpus = load_shakespeare(download=download)
        return f"Tiny Shakespeare: {len(corpus.train) + len(corpus.test):,} characters from " \
               f"{corpus.source} (SHA-256 checked)"
    raise ValueError(f"unknown data set {name!r}; the data sets are: {', '.join(DATASETS)}")


def one_line(name: str, error: BaseException) -> str:
    """What is wrong with data set ``name``, in one line: for a copy not found, where it was
    looked for and the variable to set; for a damaged copy, the count of bad files, the first few
    of them and the command that checks or repairs it (:meth:`DataCorruptError.summary`). The
    loaders' full messages, with every path, are for their own tracebacks."""

    if isinstance(error, DataNotFoundError) and "class folder" in str(error):
        return f"{name}: {str(error).strip().splitlines()[0]}"  # the copy is there, a part not
    if isinstance(error, DataNotFoundError):
        cause = error.__cause__
        tried = (f" (download failed: {type(cause).__name__}: {str(cause).splitlines()[0]})"
                 if cause is not None and str(cause).strip() else "")
        return f"{name}: not found in {locations.data_dir()}{tried}; {VARIABLE_HINT}"
    if isinstance(error, DataCorruptError):  # the copy is found: name its bad files, the repair
        return f"{name}: {type(error).__name__}: {error.summary()}"
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    hint = "" if "I2O_DATA_DIR" in first else f"; {VARIABLE_HINT}"
    return f"{name}: {type(error).__name__}: {first}{hint}"


def ensure_all(names: Iterable[str] = DATASETS, download: bool = True) -> dict[str, str | None]:
    """``{name: None}`` for each ready data set, ``{name: one-line reason}`` for the others."""

    problems: dict[str, str | None] = {}
    for name in names:
        try:
            print(f"[i2o] data: {ensure(name, download)}", flush=True)
            problems[name] = None
        except (DataNotFoundError, DataCorruptError) as error:
            problems[name] = one_line(name, error)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i2o.data.fetch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # No ``choices=``: argparse checks a ``nargs="*"`` default against them as one value (and
    # refused `make data` without names); the names are checked below instead.
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"data sets ({', '.join(DATASETS)}; default: all)")
    parser.add_argument("--no-download", action="store_true", help="only find and verify")
    args = parser.parse_args(argv)
    if unknown := [name for name in args.names if name not in DATASETS]:
        parser.error(f"unknown data set(s) {', '.join(unknown)}; the data sets are: "
                     f"{', '.join(DATASETS)}")
    print(f"[i2o] data dir: {locations.data_dir()}"
          + (" (I2O_DATA_DIR)" if "I2O_DATA_DIR" in os.environ else " (default; I2O_DATA_DIR "
             "unset)"), flush=True)
    problems = ensure_all(args.names or DATASETS, download=not args.no_download)
    for line in filter(None, problems.values()):
        print(f"error: data set {line}", file=sys.stderr)
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
