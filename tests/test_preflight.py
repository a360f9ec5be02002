"""The preflight (data sets of the chapters that need them), `make data`, and a book run that
keeps going past a chapter that cannot run or fails."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from i2o.book import build, execute, html_build, stamps
from i2o.compute import door, pool, profiles
from i2o.data import cifar10, fetch, preflight, shakespeare


def test_the_manifest_says_which_chapters_read_data():
    assert preflight.needs("stability") == ["cifar10"]
    assert set(preflight.needs("deq_gaps")) == {"cifar10", "shakespeare"}
    assert preflight.needs("affine") == [] and preflight.needs("meta") == []


def test_each_data_set_is_made_ready_once_and_missing_ones_block_only_their_chapters():
    calls = []

    def ensure(names, download=True):
        calls.append(list(names))
        return {name: ("cifar10: DataNotFoundError: nowhere; set I2O_DATA_DIR"
                       if name == "cifar10" else None) for name in names}

    reasons = preflight.check(profiles.figures(), ensure=ensure)
    assert calls == [["cifar10", "shakespeare"]]  # one call, each data set once
    assert reasons["affine"] is None and reasons["meta"] is None
    assert "I2O_DATA_DIR" in reasons["stability"] and "I2O_DATA_DIR" in reasons["deq_gaps"]


def test_no_data_gives_one_line_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    reasons = preflight.check(["stability", "deq_gaps", "affine"], download=False)
    assert reasons["affine"] is None
    for figure in ("stability", "deq_gaps"):
        assert "\n" not in reasons[figure]
        assert "I2O_DATA_DIR" in reasons[figure] and "DATA_DIR=" in reasons[figure]
        assert reasons[figure].startswith(f"cifar10: not found in {tmp_path / 'empty'}")
    assert "; shakespeare: not found" in reasons["deq_gaps"]
    assert len(reasons["stability"]) < 200


def test_a_failed_download_is_named_briefly(tmp_path, monkeypatch):
    from i2o.data.errors import DataNotFoundError

    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path))
    try:
        raise DataNotFoundError("long message\nwith every path") from OSError("no network")
    except DataNotFoundError as error:
        line = fetch.one_line("cifar10", error)
    assert line == (f"cifar10: not found in {tmp_path} (download failed: OSError: no network); "
                    f"{fetch.VARIABLE_HINT}")


def test_preflight_cli_names_each_blocked_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "ensure_all", lambda names, download=True: {
        n: f"{n}: DataNotFoundError: missing; set I2O_DATA_DIR" for n in names})
    assert preflight.main(["stability"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: stability cannot run") and \
        "I2O_DATA_DIR" in err[0]
    assert preflight.main(["meta"]) == 0
    assert preflight.main(["no-such-figure"]) == 2


def test_make_data_verifies_the_offline_copy(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    assert fetch.main(["shakespeare", "--no-download"]) == 0
    assert "SHA-256 checked" in capsys.readouterr().out


def test_a_damaged_copy_is_reported_in_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_text("not shakespeare")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    assert fetch.main(["shakespeare", "--no-download"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "DataCorruptError" in err[0] and "SHA-256" in err[0]


def test_concurrent_downloads_happen_once_and_atomically(tmp_path, monkeypatch):
    """Two loaders asking for the official CIFAR-10 release at once: one download, renamed into
    place whole; the other waits and finds it."""
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    downloads = []

    def slow_download(root, split, download):
        assert download
        downloads.append(root)
        folder = Path(root) / cifar10.OFFICIAL_FOLDER
        folder.mkdir(parents=True)
        time.sleep(0.3)
        (folder / "data_batch_1").write_text("x")

    monkeypatch.setattr(cifar10, "_read_official", slow_download)
    threads = [threading.Thread(target=cifar10.download_cifar10_official, args=(tmp_path,))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(downloads) == 1
    assert (tmp_path / cifar10.OFFICIAL_FOLDER / "data_batch_1").read_text() == "x"
    assert not list(tmp_path.glob(".cifar10-download.*")), "private download folder left behind"


def test_shakespeare_is_downloaded_once_by_concurrent_loaders(tmp_path, monkeypatch):
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    downloads = []

    def fake_download(target):
        downloads.append(target)
        time.sleep(0.3)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("text")

    monkeypatch.setattr(shakespeare, "_download", fake_download)
    threads = [threading.Thread(target=shakespeare.find_text, args=(tmp_path,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(downloads) == 1


def test_book_keeps_going_past_a_missing_data_set_and_a_failing_chapter(monkeypatch, capsys):
    """Data missing for one chapter, another chapter failing, a third whose code does not import:
    the rest still run, each problem is one line at the end, the HTML stage shows 'not built'
    pages, the exit status is non-zero."""
    figures = profiles.figures()
    ran = []
    monkeypatch.setattr(preflight, "check", lambda names, **_: {
        f: ("cifar10: DataNotFoundError: no copy; set I2O_DATA_DIR" if f == "stability" else None)
        for f in names})

    def fake_run(figure, profile="quick", overrides=None, force=False, chapter=None):
        ran.append(figure)
        if figure == "affine":
            raise RuntimeError("boom\nsecond line")
        return stamps.executed_path(figure)

    entered = door.enter

    def enter(figure, *args, **kwargs):  # a chapter whose code fails to import
        if figure == "diagnose":
            raise ImportError("no module named torchdeq")
        return entered(figure, *args, **kwargs)

    monkeypatch.setattr(execute, "run", fake_run)
    monkeypatch.setattr(html_build, "html", lambda: None)
    monkeypatch.setattr(door, "enter", enter)
    monkeypatch.setattr(pool, "run", lambda chapters, workers=None: pool.PoolRun(0))  # no jobs
    assert build.main(["book", "--profile", "smoke"]) == 1
    assert ran == [f for f in figures if f not in ("stability", "diagnose")]
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("[i2o] not built:")]
    assert len(lines) == 3
    assert any("diagnose: ImportError: no module named torchdeq" in line for line in lines)
    assert any("affine: RuntimeError: boom" in line and "second" not in line for line in lines)
    assert any("stability: " in line and "I2O_DATA_DIR" in line for line in lines)
    assert execute.failure_path("affine").read_text().strip() == "RuntimeError: boom"

    staged = html_build.stage()
    for figure in ("affine", "stability"):
        notebook = json.loads((staged / profiles.entry(figure)["notebook"]).read_text())
        text = "".join(notebook["cells"][0]["source"])
        assert "Not built" in text and "{error}" in text


def test_a_bad_parameter_still_stops_before_anything_runs(monkeypatch, capsys):
    monkeypatch.setattr(execute, "run", lambda *a, **k: pytest.fail("ran a notebook"))
    assert build.main(["all", "--profile", "huge"]) == 2
    assert "profile" in capsys.readouterr().err


def test_first_error_line_of_a_notebook_error():
    class PapermillExecutionError(Exception):
        ename, evalue = "DataNotFoundError", "CIFAR-10 (train) not found: looked for …\nmore"

    assert execute.first_error_line(PapermillExecutionError("long traceback")) == \
        "DataNotFoundError: CIFAR-10 (train) not found: looked for …"
