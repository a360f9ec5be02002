"""Replicates: the same experiment with every random choice drawn anew.

A verdict that holds at one draw of a chapter's random choices and not at another was decided by
chance. Every chapter therefore has a ``replicate`` parameter (an integer ≥ 0) and passes each of
its seeds — the manifest's seed parameters and the constants that fix data subsets, test sets and
noise — through :func:`seed` before using it:

- replicate 0 returns the seed unchanged, so the book's own numbers are those of replicate 0;
- replicate r > 0 returns ``2**30 + (SHA-256("i2o-replicate/<seed>/<r>") mod 2**30)``: a seed
  fixed by (seed, r) alone, the same on every machine and in every process, outside the range of
  the seeds the manifests configure (all < 2**30), below 2**31 so that every generator of the book
  (NumPy, torch, JAX's ``PRNGKey``) accepts it.

Distinct seeds of one chapter stay distinct within a replicate and across replicates (SHA-256 has
no known collision; :func:`check_distinct` verifies the seeds a chapter actually uses).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

OFFSET = 2**30


def seed(base: int, replicate: int) -> int:
    """The seed to use for ``base`` at ``replicate`` (``base`` itself at replicate 0)."""
    for name, value in (("seed", base), ("replicate", replicate)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer ≥ 0; got {value!r}")
    if replicate == 0:
        return base
    digest = hashlib.sha256(f"i2o-replicate/{base}/{replicate}".encode()).digest()
    return OFFSET + int.from_bytes(digest[:8], "big") % OFFSET


def seeds(bases: Iterable[int], replicate: int) -> list[int]:
    """:func:`seed` of every element of ``bases``."""
    return [seed(int(base), replicate) for base in bases]


def check_distinct(bases: Iterable[int], replicates: Iterable[int]) -> None:
    """Raise ``ValueError`` if two (base, replicate) pairs map to the same seed."""
    seen: dict[int, tuple[int, int]] = {}
    for r in replicates:
        for base in bases:
            value = seed(int(base), int(r))
            if value in seen and seen[value] != (base, r):
                raise ValueError(f"seed collision: {(base, r)} and {seen[value]} both give {value}")
            seen[value] = (base, r)


def suffix(replicate: int) -> str:
    """A job-name suffix: ``""`` at replicate 0 (names unchanged), ``"-r<r>"`` otherwise."""
    return f"-r{replicate}" if replicate else ""
