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


def save_training_state(directory: Path | str | None, run: dict[str, Any], step: int,
                        model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        history: dict[str, Any]) -> None:
    """Checkpoint a training run: its description ``run``, the step, model, optimiser, torch's RNG
    state and the history (nothing when ``directory`` is ``None``)."""
    if directory is not None:
        save_checkpoint(directory, {"run": run, "step": step, "model": model.state_dict(),
                                    "optimizer": optimizer.state_dict(),
                                    "rng_torch": torch.get_rng_state(), "history": history})


def restore_training_state(directory: Path | str | None, run: dict[str, Any],
                           model: torch.nn.Module, optimizer: torch.optim.Optimizer
                           ) -> tuple[int, dict[str, Any]] | None:
    """Load the checkpoint of ``run`` from ``directory`` into ``model``, ``optimizer`` and torch's
    RNG; return ``(step, history)``, or ``None`` when there is no checkpoint. A checkpoint written
    by a different run raises ``ValueError`` rather than being silently continued."""
    state = load_checkpoint(directory)
    if state is None:
        return None
    if state.get("run") != run:
        raise ValueError(f"checkpoint in {directory} was written by another run: "
                         f"{state.get('run')} ≠ {run}")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_torch"])
    return state["step"], state["history"]
