"""Checkpoints written atomically and read back with ``torch.load(weights_only=True)``.

A checkpoint is a dict of tensors, numbers, strings, lists and dicts only (model and optimiser
state dicts, the step, the torch RNG state, the history), so that loading never unpickles code.
It is written to a temporary file in the same directory, flushed to disk, then renamed over the
previous one: a run killed at any moment leaves either the old or the new checkpoint, whole.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_NAME = "last.pt"


def save_checkpoint(directory: Path | str, state: dict[str, Any]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_NAME
    tmp = directory / f".{CHECKPOINT_NAME}.{os.getpid()}.tmp"
    with open(tmp, "wb") as stream:
        torch.save(state, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(directory: Path | str | None) -> dict[str, Any] | None:
    """The last checkpoint in ``directory`` (on CPU), or ``None`` when there is none."""
    if directory is None:
        return None
    path = Path(directory) / CHECKPOINT_NAME
    if not path.is_file():
        return None
    return torch.load(path, map_location="cpu", weights_only=True)
