"""CIFAR-10 (Krizhevsky, 2009): 60,000 32×32 RGB images in 10 classes, decoded once, cached.

Where the images come from, in order:

1. an image-folder copy ``<data dir>/cifar10/{train,test}/<class>/*.jpg|png`` (the offline copy in
   ``../shared/data`` has this layout; its JPEG encoding makes pixels differ slightly from the
   official release);
2. the official Python release ``<data dir>/cifar-10-batches-py`` (what torchvision downloads);
3. when neither is there, a download of the official release through torchvision into the data dir.

The data dir is :func:`i2o.runtime.data_dir`: the environment variable ``I2O_DATA_DIR``, or
``<repo>/data``. Decoded arrays are cached as ``.npy`` files under ``<repo>/data/cache`` (or
``I2O_CACHE_DIR``), one per source and split, written atomically; later loads take milliseconds.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from i2o import runtime
from i2o.data.errors import DataNotFoundError

CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
           "dog", "frog", "horse", "ship", "truck")
SPLITS = ("train", "test")
SPLIT_SIZES = {"train": 50_000, "test": 10_000}
# Per-channel statistics used by the MDEQ code for CIFAR-10 normalisation.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2023, 0.1994, 0.2010)
IMAGE_FOLDER = "cifar10"
OFFICIAL_FOLDER = "cifar-10-batches-py"
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
    """Decoded arrays: ``I2O_CACHE_DIR`` or ``<repo>/data/cache``."""
    return Path(os.environ.get("I2O_CACHE_DIR", runtime.repo_root() / "data" / "cache"))


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}; got {split!r}")


def _image_folder(root: Path, split: str) -> Path | None:
    folder = root / IMAGE_FOLDER / split
    return folder if all((folder / name).is_dir() for name in CLASSES) else None


def _decode_image_folder(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    images, labels = [], []
    for label, name in enumerate(CLASSES):
        files = sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in _SUFFIXES)
        if not files:
            raise DataNotFoundError(f"CIFAR-10 class folder {folder / name} holds no image file "
                                    f"({', '.join(_SUFFIXES)})")
        for file in files:
            with Image.open(file) as image:
                array = np.asarray(image.convert("RGB"), dtype=np.uint8)
            if array.shape != (32, 32, 3):
                raise ValueError(f"{file}: a CIFAR-10 image is 32×32 RGB; got shape {array.shape}")
            images.append(array)
            labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def _read_official(root: Path, split: str, download: bool) -> tuple[np.ndarray, np.ndarray]:
    from torchvision.datasets import CIFAR10

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
    return "folder-" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:10]


def load_cifar10(split: str, data_dir: Path | str | None = None,
                 download: bool = True) -> ImageSet:
    """The CIFAR-10 ``split`` ("train": 50,000 images, "test": 10,000) from the first source found.

    ``data_dir`` defaults to :func:`i2o.runtime.data_dir` (``I2O_DATA_DIR`` or ``<repo>/data``).
    Raises :class:`DataNotFoundError` naming every place looked at when no copy is found and the
    download is off or fails (e.g. offline).
    """
    _check_split(split)
    explicit = data_dir is not None or "I2O_DATA_DIR" in os.environ
    root = Path(data_dir).resolve() if data_dir is not None else runtime.data_dir()
    if explicit and not root.is_dir():
        raise DataNotFoundError(
            f"the CIFAR-10 data directory {root} does not exist (set by "
            f"{'the data_dir argument' if data_dir is not None else 'I2O_DATA_DIR'}); point it "
            f"at a folder holding {IMAGE_FOLDER}/{{train,test}}/<class>/*.jpg or "
            f"{OFFICIAL_FOLDER}/, e.g. I2O_DATA_DIR=../shared/data")

    folder = _image_folder(root, split)
    if folder is not None:
        images, labels = _cached(_folder_tag(folder), split,
                                 lambda: _decode_image_folder(folder))
        return ImageSet(images, labels, f"image folder {folder}")

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
        root.mkdir(parents=True, exist_ok=True)
        images, labels = _cached("official", split, lambda: _read_official(root, split, True))
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


def to_tensor(images: np.ndarray, dtype=None):
    """Images (n, 32, 32, 3) uint8 → float tensor (n, 3, 32, 32), standardised with MEAN and STD."""
    import torch

    dtype = dtype or torch.float32
    x = torch.from_numpy(np.ascontiguousarray(images)).to(dtype).div_(255.0).permute(0, 3, 1, 2)
    mean = torch.tensor(MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(STD, dtype=dtype).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()
