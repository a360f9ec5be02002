"""The cost of checking the CIFAR-10 image folder against its manifest on the first load.

Peer: the same decode without the check (what a folder without ``cifar10.sha256`` costs), and
coreutils' ``sha256sum -c`` over the same files for the hashing alone. Times are CPU seconds
(this process's, or the child's for ``sha256sum``): on a shared 2-core machine wall time swings by
tens of percent between two runs of the same decode. Needs the offline copy (``I2O_DATA_DIR``);
reports nothing without it.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

from i2o.data import cifar10

SPLITS = ("test", "train")


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
    entries = [{"name": "first load of CIFAR-10 (60,000 images), checked against the manifest",
                "value": checked, "unit": "s (CPU)", "peer": "the same decode unchecked",
                "peer_value": unchecked, "ratio": checked / unchecked}]
    if shutil.which("sha256sum"):
        ours = sum(_seconds(lambda s=s: _hash_all(folders[s], cifar10.read_manifest(manifest, s)))
                   for s in SPLITS)
        coreutils = _seconds(lambda: subprocess.run(
            ["sha256sum", "--quiet", "-c", f"../{cifar10.MANIFEST}"],
            cwd=root / cifar10.IMAGE_FOLDER, check=True))
        entries.append({"name": "checking every file against the manifest, without decoding",
                        "value": ours, "unit": "s (CPU)", "peer": "sha256sum -c",
                        "peer_value": coreutils, "ratio": ours / coreutils})
    return entries


def _hash_all(folder: Path, expected: dict[str, str]) -> None:
    bad = [name for name, digest in expected.items()
           if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest]
    if bad:
        raise ValueError(f"{len(bad)} files of {folder} do not match the manifest")
