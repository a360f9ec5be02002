"""The cost of checking the CIFAR-10 image folder against its manifest on the first load.

Peer: the same decode without the check (what a folder without ``cifar10.sha256`` costs), and
coreutils' ``sha256sum -c`` over the same files for the hashing alone. Times are CPU seconds
(this process's, or the child's for ``sha256sum``): on a shared 2-core machine wall time swings by
tens of percent between two runs of the same decode. Needs the offline copy (``I2O_DATA_DIR``);
reports nothing without it.

Measured on the test split (10,000 images, a sixth of the data set): decoding and hashing cost
the same per file in both splits, so the ratios are those of the whole data set, and the
peer ``sha256sum -c`` checks the same 10,000 files (the manifest's test lines).
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from i2o.data import cifar10

SPLITS = ("test",)


def _seconds(action) -> float:
    """CPU seconds of ``action``, its child processes included."""
    def cpu() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    start = cpu()
    action()
    return cpu() - start


def run() -> list[dict]:
    root = Path(os.environ.get("I2O_DATA_DIR", ""))
    manifest = root / cifar10.MANIFEST
    if not os.environ.get("I2O_DATA_DIR") or not manifest.is_file():
        print("  I2O_DATA_DIR with cifar10/ and cifar10.sha256 is not set: skipped")
        return []
    folders = {split: root / cifar10.IMAGE_FOLDER / split for split in SPLITS}
    unchecked = sum(_seconds(lambda f=folder: cifar10._decode_image_folder(f))
                    for folder in folders.values())
    checked = sum(_seconds(lambda s=split, f=folder: cifar10._decode_image_folder(
        f, cifar10.read_manifest(manifest, s), manifest)) for split, folder in folders.items())
    entries = [{"name": "first load of CIFAR-10's test split (10,000 images), checked against the "
                        "manifest",
                "value": checked, "unit": "s (CPU)", "peer": "the same decode unchecked",
                "peer_value": unchecked, "ratio": checked / unchecked}]
    if shutil.which("sha256sum"):
        ours = sum(_seconds(lambda s=s: _hash_all(folders[s], cifar10.read_manifest(manifest, s)))
                   for s in SPLITS)
        coreutils = _sha256sum_seconds(manifest, root / cifar10.IMAGE_FOLDER)
        entries.append({"name": "checking every test file against the manifest, without decoding",
                        "value": ours, "unit": "s (CPU)", "peer": "sha256sum -c",
                        "peer_value": coreutils, "ratio": ours / coreutils})
    return entries


def _hash_all(folder: Path, expected: dict[str, str]) -> None:
    bad = [name for name, digest in expected.items()
           if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest]
    if bad:
        raise ValueError(f"{len(bad)} files of {folder} do not match the manifest")


def _sha256sum_seconds(manifest: Path, folder: Path) -> float:
    """CPU seconds of ``sha256sum -c`` on the manifest's lines of ``SPLITS``, in ``folder``."""
    lines = [line for line in manifest.read_text().splitlines()
             if line.partition(" ")[2].lstrip(" *").removeprefix("./").partition("/")[0]
             in SPLITS]
    with tempfile.NamedTemporaryFile("w", suffix=".sha256") as listed:
        listed.write("\n".join(lines) + "\n")
        listed.flush()
        return _seconds(lambda: subprocess.run(["sha256sum", "--quiet", "-c", listed.name],
                                               cwd=folder, check=True))
