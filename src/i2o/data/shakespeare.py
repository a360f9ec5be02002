"""Tiny Shakespeare (karpathy/char-rnn): 1,115,394 characters of Shakespeare, character level.

The language-modelling task of the DEQ chapter (a small stand-in for the paper's WikiText-103,
Figure 2). The split is the usual one: the first 90 % of the characters for training, the last
10 % for testing. The vocabulary is the sorted set of characters of the whole file (65 symbols).

Where the text comes from, in order:

1. ``<data dir>/tinyshakespeare/input.txt`` (the offline copy in ``../shared/data`` has this
   layout), where the data dir is ``I2O_DATA_DIR`` or ``<repo>/data``
   (:func:`i2o.base.locations.data_dir`);
2. when it is missing, a download of the public file into that place, checked against its SHA-256.

Batches are windows of ``context + 1`` consecutive characters: the first ``context`` are the
input, the last ``context`` the targets (next-character prediction). Training windows start at
random offsets; evaluation windows tile the split without overlap, so every test character is
predicted exactly once from a context of at most ``context`` characters.
"""

from __future__ import annotations

import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from i2o.base import locations
from i2o.base.digests import sha256
from i2o.data.download import download_lock
from i2o.data.errors import DataCorruptError, DataNotFoundError

FOLDER = "tinyshakespeare"
FILENAME = "input.txt"
URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TRAIN_FRACTION = 0.9
SPLITS = ("train", "test")


@dataclass(frozen=True)
class CharCorpus:
    """A character-level corpus: the vocabulary and the two splits encoded as ``int64`` ids."""

    vocabulary: str
    train: np.ndarray
    test: np.ndarray
    source: str

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def split(self, name: str) -> np.ndarray:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(map(repr, SPLITS))}; got {name!r}")
        return self.train if name == "train" else self.test

    def encode(self, text: str) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.vocabulary)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"characters {unknown!r} are not in the vocabulary")
        return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.vocabulary[int(i)] for i in np.asarray(ids).ravel())


def _download(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with urllib.request.urlopen(URL, timeout=60) as response:
            tmp.write_bytes(response.read())
        if sha256(tmp) != SHA256:
            raise ValueError(f"downloaded file has SHA-256 {sha256(tmp)}, expected {SHA256}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def find_text(data_dir: Path | str | None = None, download: bool = True) -> Path:
    """The path of ``tinyshakespeare/input.txt``, downloading it when missing and allowed.

    Raises :class:`DataNotFoundError` naming the path looked for (and the download tried).
    """
    root = Path(data_dir).resolve() if data_dir is not None else locations.data_dir()
    path = root / FOLDER / FILENAME
    if path.is_file():
        return path
    origin = "the data_dir argument" if data_dir is not None else (
        "I2O_DATA_DIR" if "I2O_DATA_DIR" in os.environ else "the default <repo>/data")
    if not download:
        raise DataNotFoundError(
            f"Tiny Shakespeare not found: looked for {path} (data dir from {origin}); download is "
            "off. Set I2O_DATA_DIR to a folder holding tinyshakespeare/input.txt "
            "(e.g. ../shared/data).")
    try:
        with download_lock(root):  # one download at a time; the waiter finds the file
            if not path.is_file():
                _download(path)
    except Exception as error:  # offline, proxy, checksum: say what was tried
        raise DataNotFoundError(
            f"Tiny Shakespeare not found: looked for {path} (data dir from {origin}), then tried "
            f"to download {URL} there and failed ({type(error).__name__}: {error}). Set "
            "I2O_DATA_DIR to a folder holding tinyshakespeare/input.txt "
            "(e.g. ../shared/data).") from error
    return path


def load_shakespeare(data_dir: Path | str | None = None, download: bool = True,
                     verify: bool = True) -> CharCorpus:
    """The corpus, split 90 % / 10 % (train / test) at character ``int(0.9 · length)``.

    ``verify`` checks the file against its published SHA-256 and raises :class:`DataCorruptError`
    (a ``ValueError``) on a mismatch: a different file would silently change every number of the
    chapter.
    """
    path = find_text(data_dir, download)
    raw = path.read_bytes()
    if verify and (digest := sha256(raw)) != SHA256:
        remedy = (f"What to do: copy it again from the original (e.g. ../shared/data/{FOLDER}/"
                  f"{FILENAME}), or delete it to have it downloaded again from {URL}")
        raise DataCorruptError(
            f"{path} is not the Tiny Shakespeare text: its SHA-256 is {digest}, not the published "
            f"{SHA256} ({len(raw):,} bytes; the original has 1,115,394 characters). {remedy}; "
            "pass verify=False only to study a different text on purpose.",
            bad=[f"{path} ({len(raw):,} bytes, SHA-256 {digest[:12]}…, not the published one)"],
            remedy=remedy)
    text = raw.decode("utf-8")
    vocabulary = "".join(sorted(set(text)))
    lookup = np.zeros(max(map(ord, vocabulary)) + 1, dtype=np.int64)
    lookup[[ord(c) for c in vocabulary]] = np.arange(len(vocabulary))
    ids = lookup[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]
    cut = int(TRAIN_FRACTION * len(ids))
    return CharCorpus(vocabulary, ids[:cut].copy(), ids[cut:].copy(), str(path))


def random_windows(ids: np.ndarray, context: int, count: int,
                   generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` windows at random offsets: inputs and next-character targets, each
    ``(count, context)``."""
    _check_context(ids, context)
    starts = generator.integers(0, len(ids) - context, size=count)
    windows = ids[starts[:, None] + np.arange(context + 1)]
    return windows[:, :-1], windows[:, 1:]


def tiled_windows(ids: np.ndarray, context: int,
                  limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows covering ``ids`` (the tail shorter than a window is dropped).

    ``limit`` keeps the first ``limit`` windows (a smaller evaluation set for quick runs).
    """
    _check_context(ids, context)
    count = (len(ids) - 1) // context
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be ≥ 1 or None; got {limit}")
        count = min(count, limit)
    starts = np.arange(count) * context
    windows = ids[starts[:, None] + np.arange(context + 1)]
    return windows[:, :-1], windows[:, 1:]


def _check_context(ids: np.ndarray, context: int) -> None:
    if isinstance(context, bool) or not isinstance(context, int | np.integer) or context < 1:
        raise ValueError(f"context must be an integer ≥ 1; got {context!r}")
    if len(ids) <= context:
        raise ValueError(f"a window of {context + 1} characters does not fit in {len(ids)}")
