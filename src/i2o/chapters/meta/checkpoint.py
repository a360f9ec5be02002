"""Atomic checkpoints of pytrees (meta-parameters, optimizer state, step, loss trace).

A checkpoint is one ``.npz`` file written to a temporary name in the same directory and renamed
into place (``os.replace`` is atomic on POSIX), so an interruption leaves either the previous
checkpoint or the new one, never a partial file. Loading needs a template pytree of the same
structure (the freshly initialized state) and checks that every leaf's shape matches.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

FILENAME = "state.npz"


def save(directory: Path, tree: Any) -> Path:
    """Write ``tree``'s leaves to ``directory/state.npz`` atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree_util.tree_leaves(tree)
    arrays = {f"leaf{i:04d}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    handle, tmp_name = tempfile.mkstemp(prefix=".state.", suffix=".npz", dir=directory)
    os.close(handle)
    try:
        np.savez(tmp_name, **arrays)
        target = directory / FILENAME
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.remove(tmp_name)
    return target


def load(directory: Path, template: Any) -> Any | None:
    """The checkpointed pytree shaped like ``template``, or ``None`` if there is no checkpoint.

    Raises ``ValueError`` if the checkpoint does not match the template (another model)."""
    path = directory / FILENAME
    if not path.exists():
        return None
    leaves, treedef = jax.tree_util.tree_flatten(template)
    with np.load(path, allow_pickle=False) as stored:
        if len(stored.files) != len(leaves):
            raise ValueError(f"{path}: {len(stored.files)} arrays, expected {len(leaves)}")
        restored = []
        for i, leaf in enumerate(leaves):
            array = stored[f"leaf{i:04d}"]
            if array.shape != np.shape(leaf):
                raise ValueError(f"{path}: leaf {i} has shape {array.shape}, "
                                 f"expected {np.shape(leaf)}")
            restored.append(jax.numpy.asarray(array, dtype=np.asarray(leaf).dtype))
    return jax.tree_util.tree_unflatten(treedef, restored)
