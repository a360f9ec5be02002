"""SHA-256 digests (hex) of bytes, of files, and of arrays.

:func:`sha256` digests bytes, or a file read in blocks. :func:`arrays_sha256` digests arrays in
order, each as a header (its dtype and shape, and its name when named) followed by its bytes in C
order; the two headers are those the stored digests were made with: unnamed, ``<dtype><shape>``
(:func:`i2o.provenance.probes.digest`); named, ``<name>\\0<dtype>\\0<shape>\\0``
(:func:`i2o.provenance.fingerprint.entry_fingerprint`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: Bytes read at a time from a file.
BLOCK = 1 << 20


def sha256(data: bytes | os.PathLike[str]) -> str:
    """The SHA-256 (hex) of ``data``: bytes, or a file path whose contents are read in blocks."""
    if isinstance(data, bytes | bytearray | memoryview):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    with open(data, "rb") as stream:
        for block in iter(lambda: stream.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def arrays_sha256(arrays: Iterable[Any], names: Sequence[str] | None = None) -> str:
    """The SHA-256 (hex) of ``arrays`` in order (NumPy arrays, or tensors, read on the CPU), each
    a header then its bytes in C order: ``<dtype><shape>``, or with ``names`` (one per array)
    ``<name>\\0<dtype>\\0<shape>\\0``; dtype as NumPy's ``dtype.str`` (``<f4``), shape as its
    tuple's text."""
    digest = hashlib.sha256()
    arrays = list(arrays)
    if names is not None and len(names) != len(arrays):
        raise ValueError(f"{len(names)} names for {len(arrays)} arrays")
    for index, array in enumerate(arrays):
        if hasattr(array, "detach"):  # a torch tensor
            array = array.detach().cpu().numpy()
        array = np.ascontiguousarray(np.asarray(array))
        if names is None:
            header = f"{array.dtype.str}{array.shape}"
        else:
            header = f"{names[index]}\0{array.dtype.str}\0{array.shape}\0"
        digest.update(header.encode())
        digest.update(array.tobytes())
    return digest.hexdigest()
