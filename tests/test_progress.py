"""Progress of long loops: on the terminal with an ETA, never in a notebook's pages."""

from __future__ import annotations

import json
import os
import sys

import pytest

from i2o.base import progress


def test_progress_shows_rate_and_eta(monkeypatch, capsys):
    monkeypatch.setenv("I2O_PROGRESS_INTERVAL", "0")
    with progress.Progress(4, "demo loop", unit="step") as bar:
        for _ in range(4):
            bar.update(1)
            bar.note(loss="0.5")
    err = capsys.readouterr().err
    assert "[i2o] demo loop" in err and "4/4" in err
    assert "<" in err and "step/s" in err  # elapsed<remaining: the ETA


def test_over_wraps_a_loop_and_keeps_the_items(monkeypatch, capsys):
    monkeypatch.setenv("I2O_PROGRESS_INTERVAL", "0")
    assert list(progress.Progress.over(range(3), "jobs", unit="job")) == [0, 1, 2]
    assert "3/3" in capsys.readouterr().err


def test_progress_can_be_turned_off(monkeypatch, capsys):
    monkeypatch.setenv("I2O_PROGRESS", "0")
    with progress.Progress(3, "silent") as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""
    assert not progress.Progress(1, "x", enabled=False).enabled


def test_inside_a_kernel_it_writes_to_the_terminal_copy_not_the_page(monkeypatch, tmp_path):
    """ipykernel captures sys.stderr and fd 2 into the notebook; the bar goes to its copy of the
    original descriptor, and is off when there is none."""
    target = tmp_path / "terminal.txt"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT)
    captured = []

    class OutStream:  # what ipykernel puts in sys.stderr
        _original_stdstream_copy = fd

        def write(self, text):
            captured.append(text)

        def flush(self):
            pass

    OutStream.__module__ = "ipykernel.iostream"
    monkeypatch.setattr(sys, "stderr", OutStream())
    monkeypatch.setenv("I2O_PROGRESS_INTERVAL", "0")
    progress._fd_stream.cache_clear()
    try:
        with progress.Progress(2, "in a kernel") as bar:
            bar.update(2)
    finally:
        os.close(fd)
        progress._fd_stream.cache_clear()
    assert "in a kernel" in target.read_text()
    assert not captured

    del OutStream._original_stdstream_copy
    assert progress.terminal_stream() is None
    assert not progress.Progress(1, "nowhere").enabled
    OutStream._should_watch = False  # descriptor 2 not captured into the page: usable
    assert progress.terminal_stream() is sys.__stderr__


def test_training_loop_reports_progress(monkeypatch, capsys):
    import torch

    from i2o.train.loop import Plan, train_steps

    monkeypatch.setenv("I2O_PROGRESS_INTERVAL", "0")
    model = torch.nn.Linear(2, 1)
    x = torch.randn(8, 2)
    train_steps(model, lambda step: (model(x).pow(2).mean(), {}), Plan(steps=3),
                description="tiny model")
    assert "[i2o] tiny model" in capsys.readouterr().err


@pytest.mark.book
def test_papermill_run_shows_progress_in_the_terminal_and_none_in_the_notebook(tmp_path, capfd):
    import nbformat
    import papermill

    source = tmp_path / "loop.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from i2o.base import progress\n"
        "for _ in progress.Progress.over(range(5), 'kernel loop', unit='step'):\n"
        "    pass\n"
        "print('done')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, str(source))
    env = {"I2O_PROGRESS": "1", "I2O_PROGRESS_INTERVAL": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        papermill.execute_notebook(str(source), str(tmp_path / "out.ipynb"),
                                   kernel_name="python3", progress_bar=False)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    executed = json.loads((tmp_path / "out.ipynb").read_text())
    outputs = json.dumps(executed["cells"][0]["outputs"])
    assert "done" in outputs and "kernel loop" not in outputs
    err = capfd.readouterr().err
    assert "[i2o] kernel loop" in err, err
