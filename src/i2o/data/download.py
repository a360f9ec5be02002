"""One download at a time per data dir: the file lock every downloader of :mod:`i2o.data` holds."""

from __future__ import annotations

import hashlib
from pathlib import Path

from filelock import FileLock

from i2o import locations


def download_lock(root: Path) -> FileLock:
    """The lock held by every download into ``root`` (kept in the array cache: ``root`` may be
    read-only)."""
    locks = locations.cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:12]
    return FileLock(str(locks / f"download-{key}.lock"))
