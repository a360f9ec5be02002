"""The decoded CIFAR-10 arrays in the cache carry the digest of what was decoded, and are checked.

:func:`i2o.data.cifar10.load_cifar10` decodes a copy once (its files checked against
``cifar10.sha256`` as they are read) and keeps the arrays in ``<cache>/cifar10-<tag>-<split>-
{images,labels}.npy``, where the tag names the source (the manifest's digest, the folder, or the
official release); later loads read those arrays. A flipped byte in them would go unnoticed, so
the data check that runs before any notebook, sweep or benchmark (:func:`i2o.data.fetch.ensure`)
calls :func:`verify`: each array file has a sidecar ``<file>.sha256`` holding its SHA-256, written
when the arrays are decoded (or, for arrays decoded before sidecars existed, after a fresh decode
gave the same bytes); a file whose bytes no longer match is removed with its sidecar and decoded
again from the verified source, and the check says so in its line.

The loader itself is not changed: it is in every CIFAR-10 job's import closure, and a change there
would give every such result a new cache key; this check runs where the data are made ready.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from i2o.base import locations
from i2o.base.digests import sha256
from i2o.data import cifar10

#: The sidecar's suffix: ``<array file>.sha256`` holds the file's SHA-256 (hex, one line).
SUFFIX = ".sha256"
Decode = Callable[[], tuple[np.ndarray, np.ndarray]]


def source(split: str, root: Path | None = None) -> tuple[str, Decode] | None:
    """The cache tag of the copy :func:`i2o.data.cifar10.load_cifar10` reads ``split`` from,
    with a function decoding it afresh (never from the cache); ``None`` without a local copy."""
    root = locations.data_dir() if root is None else root
    folder = root / cifar10.IMAGE_FOLDER / split
    manifest = root / cifar10.MANIFEST
    if folder.is_dir() and manifest.is_file():
        return ("sha256-" + sha256(manifest.read_bytes())[:16],
                lambda: cifar10._decode_image_folder(
                    folder, cifar10.read_manifest(manifest, split), manifest))
    if folder.is_dir():
        return cifar10._folder_tag(folder), lambda: cifar10._decode_image_folder(folder)
    if (root / cifar10.OFFICIAL_FOLDER).is_dir():
        return "official", lambda: cifar10._read_official(root, split, False)
    return None


def array_files(tag: str, split: str) -> tuple[Path, Path]:
    """The cached images and labels of ``split`` decoded from the copy ``tag``."""
    folder = cifar10.cache_dir()
    return (folder / f"cifar10-{tag}-{split}-images.npy",
            folder / f"cifar10-{tag}-{split}-labels.npy")


def _digest(path: Path) -> str:
    return sha256(path.read_bytes())


def _write_sidecar(path: Path) -> None:
    sidecar = path.with_name(path.name + SUFFIX)
    temporary = sidecar.with_name(f".{sidecar.name}.{os.getpid()}.tmp")
    temporary.write_text(_digest(path) + "\n")
    os.replace(temporary, sidecar)


def _recorded(path: Path) -> str | None:
    sidecar = path.with_name(path.name + SUFFIX)
    return sidecar.read_text().strip() if sidecar.is_file() else None


def _same_as(decode: Decode, files: tuple[Path, Path]) -> bool:
    images, labels = decode()
    return (np.array_equal(np.load(files[0]), images)
            and np.array_equal(np.load(files[1]), labels))


def verify(split: str, since: float, root: Path | None = None) -> str | None:
    """Check ``split``'s cached arrays against their sidecars; ``None`` when all is well, else
    what was found and done (one line). Arrays written at or after ``since`` (a ``time.time()``
    taken before the caller's load) were just decoded from the verified copy: their sidecars are
    written. Arrays without a sidecar, older than that, are compared with a fresh decode."""
    found = source(split, root)
    if found is None:
        return None
    tag, decode = found
    files = array_files(tag, split)
    if not all(path.is_file() for path in files):
        return None
    fresh = all(path.stat().st_mtime >= since for path in files)
    recorded = [_recorded(path) for path in files]
    if fresh or (None in recorded and _same_as(decode, files)):
        for path in files:
            _write_sidecar(path)
        return None
    damaged = [path for path, digest in zip(files, recorded, strict=True)
               if digest is None or digest != _digest(path)]
    if not damaged:
        return None
    for path in files:  # images and labels are decoded together
        path.unlink(missing_ok=True)
        path.with_name(path.name + SUFFIX).unlink(missing_ok=True)
    cifar10._cached(tag, split, decode)
    for path in files:
        _write_sidecar(path)
    return (f"the decoded {split} arrays {', '.join(path.name for path in damaged)} in "
            f"{files[0].parent} did not match their SHA-256 (changed since they were decoded): "
            f"decoded again from the checked copy")
