"""One download at a time per data dir: the file lock every downloader of :mod:`i2o.data` holds."""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock

from i2o.base import locations
from i2o.base.digests import sha256


def download_lock(root: Path) -> FileLock:
    """The lock held by every download into ``root`` (kept in the array cache: ``root`` may be
    read-only)."""
    locks = locations.cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    key = sha256(str(Path(root).resolve()).encode())[:12]
    return FileLock(str(locks / f"download-{key}.lock"))
