"""What a newcomer meets first (issue 23): `make data` with and without names, one-line data errors
that name the bad files and the repair command, benchmarks that print only what was measured, and
environment.yml installing the lock's pins. Budget: a few seconds (the `make data` run reads the
decoded CIFAR-10 arrays from the cache after its first run)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from toy_jobs import toy

from i2o.base import locations
from i2o.book import build, execute, html_build, stamps
from i2o.compute import cache_entries, pool
from i2o.data import CLASSES, fetch, preflight

REPO = locations.repo_root()


# --- 1. `make data` -------------------------------------------------------------------------

def _linked_copy(data_dir: Path, root: Path) -> Path:
    """A copy of the offline data whose big parts are symlinks (nothing of it is modified)."""
    root.mkdir()
    for name in ("cifar10", "cifar10.sha256", "tinyshakespeare"):
        (root / name).symlink_to(data_dir / name)
    return root


def _make_data(*variables: str) -> subprocess.CompletedProcess:
    """``make data`` in this interpreter's environment, its install marker taken as made."""
    venv = Path(sys.prefix)
    marker = subprocess.run(["make", "-s", "-C", str(REPO), "-p", "-n", f"VENV={venv}", "help"],
                            capture_output=True, text=True).stdout
    installed = next(line.split(":=", 1)[1].strip() for line in marker.splitlines()
                     if line.startswith("INSTALLED :="))
    return subprocess.run(["make", "-s", "-C", str(REPO), f"VENV={venv}", "-o", installed,
                           "data", *variables], capture_output=True, text=True, timeout=600)


def test_make_data_without_names_fetches_every_data_set(data_dir, tmp_path):
    copy = _linked_copy(data_dir, tmp_path / "copy")
    done = _make_data(f"DATA_DIR={copy}")
    assert done.returncode == 0, done.stderr
    assert "CIFAR-10: 50,000 + 10,000 images" in done.stdout
    assert "Tiny Shakespeare" in done.stdout


def test_make_data_with_names_fetches_only_those(data_dir, tmp_path):
    copy = _linked_copy(data_dir, tmp_path / "copy")
    done = _make_data(f"DATA_DIR={copy}", "DATASETS=shakespeare")
    assert done.returncode == 0, done.stderr
    assert "Tiny Shakespeare" in done.stdout and "CIFAR-10" not in done.stdout


def test_fetch_cli_accepts_no_names_and_refuses_an_unknown_one(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(fetch, "ensure_all", lambda names, download=True: (
        asked.append(list(names)) or {name: None for name in names}))
    assert fetch.main([]) == 0 and asked[-1] == list(fetch.DATASETS)
    assert fetch.main(["shakespeare"]) == 0 and asked[-1] == ["shakespeare"]
    with pytest.raises(SystemExit) as stop:
        fetch.main(["mnist"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "mnist" in err and "cifar10, shakespeare" in err


# --- 2. one-line data errors name the bad files and the repair -------------------------------

def _checked_folder(root: Path) -> Path:
    """Both CIFAR-10 splits as a tiny image folder (one JPEG per class) with its manifest."""
    rng = np.random.default_rng(2)
    lines = []
    for split in ("train", "test"):
        for name in CLASSES:
            folder = root / "cifar10" / split / name
            folder.mkdir(parents=True)
            file = folder / "0000.jpg"
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(file)
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            lines.append(f"{digest}  ./{split}/{name}/0000.jpg")
    (root / "cifar10.sha256").write_text("\n".join(lines) + "\n")
    return root / "cifar10"


@pytest.fixture
def damaged(tmp_path, monkeypatch):
    """A copy with a truncated file, an unlisted extra file and a missing file (train split)."""
    folder = _checked_folder(tmp_path / "data")
    truncated = folder / "train" / "cat" / "0000.jpg"
    truncated.write_bytes(truncated.read_bytes()[:100])
    (folder / "train" / "dog" / "0000.jpg").rename(folder / "train" / "dog" / "extra.jpg")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_one_line_names_the_bad_files_and_the_repair_command(damaged):
    line = preflight.check(["stability"], download=False)["stability"]
    assert "\n" not in line
    assert "3 bad files" in line
    for bad in ("train/cat/0000.jpg", "train/dog/extra.jpg", "train/dog/0000.jpg"):
        assert bad in line, line
    assert "truncated" in line and "not listed" in line and "missing" in line
    assert f"cd {damaged} && sha256sum --quiet -c ../cifar10.sha256" in line
    assert "I2O_DATA_DIR" not in line  # the copy is found; pointing elsewhere is not the fix


def test_one_line_shows_the_first_few_and_a_count(tmp_path, monkeypatch):
    folder = _checked_folder(tmp_path / "data")
    for name in CLASSES:
        (folder / "test" / name / "0000.jpg").write_bytes(b"broken")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    line = preflight.check(["stability"], download=False)["stability"]
    assert "10 bad files" in line and "and 7 more" in line
    assert "test/airplane/0000.jpg" in line and "test/truck/0000.jpg" not in line
    assert len(line) < 700


def test_one_line_names_a_missing_class_folder(tmp_path, monkeypatch):
    import shutil

    folder = _checked_folder(tmp_path / "data")
    shutil.rmtree(folder / "train" / "frog")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("I2O_CACHE_DIR", str(tmp_path / "cache"))
    line = preflight.check(["stability"], download=False)["stability"]
    assert "\n" not in line and "not found" not in line, line
    assert "class folder frog is missing from" in line and str(folder / "train") in line


def test_fetch_cli_prints_the_bad_files(damaged, capsys):
    assert fetch.main(["cifar10", "--no-download"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train/cat/0000.jpg" in err[0] and "sha256sum" in err[0]


def test_make_book_names_the_bad_files_at_the_end(damaged, monkeypatch, capsys):
    from i2o.data import shakespeare

    def offline(target):
        raise OSError("offline")

    monkeypatch.setattr(shakespeare, "_download", offline)
    monkeypatch.setattr(execute, "run", lambda figure, *a, **k: stamps.executed_path(figure))
    monkeypatch.setattr(html_build, "html", lambda: None)
    monkeypatch.setattr(pool, "run", lambda chapters, workers=None: pool.PoolRun(0))  # no jobs
    assert build.main(["book", "--profile", "smoke"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    last = [line for line in err if line.startswith("[i2o] not built: stability:")]
    assert len(last) == 1  # among the closing lines: only other chapters' such lines follow it
    assert all(line.startswith("[i2o] not built: ") for line in err[err.index(last[0]):])
    assert "train/cat/0000.jpg" in last[0] and "sha256sum --quiet -c" in last[0]


def test_a_damaged_corpus_line_says_what_to_do(tmp_path, monkeypatch):
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_text("not shakespeare")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path))
    line = fetch.ensure_all(["shakespeare"], download=False)["shakespeare"]
    assert "tinyshakespeare/input.txt" in line and "copy it again" in line


# --- 7. environment.yml installs the lock's pins ---------------------------------------------

def _environment() -> dict:
    import yaml

    return yaml.safe_load((REPO / "environment.yml").read_text())


LOCKED_PIP = ["--require-hashes", "-r requirements.lock"]


def environment_problems(environment: dict, requires_python: str) -> list[str]:
    """How ``environment`` (environment.yml, parsed) could resolve differently from the lock."""
    from packaging.specifiers import SpecifierSet

    problems = []
    pip = next((d["pip"] for d in environment["dependencies"] if isinstance(d, dict)), [])
    if pip != LOCKED_PIP:
        problems.append(f"its pip section is {pip}, not {LOCKED_PIP}")
    conda = [d for d in environment["dependencies"] if isinstance(d, str)]
    if others := [d for d in conda if d.split("=")[0] not in ("pip", "python")]:
        problems.append(f"conda packages beside the lock: {others}")
    python = next((d.split("=")[1] for d in conda if d.startswith("python=")), None)
    if python is None or f"{python}.0" not in SpecifierSet(requires_python):
        problems.append(f"python={python} is outside requires-python {requires_python}")
    return problems


@pytest.fixture
def requires_python() -> str:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]


def test_environment_yml_installs_the_lock(requires_python):
    """conda's route installs requirements.lock itself (hashes included), so it resolves to the
    same versions as `make install`; nothing else is pinned beside it."""
    assert environment_problems(_environment(), requires_python) == []
    assert "pip install --no-deps -e ." in (REPO / "environment.yml").read_text()


@pytest.mark.parametrize("change", ["extra pin", "conda numpy", "python 3.10"])
def test_a_diverging_environment_yml_is_caught(change, requires_python):
    environment = _environment()
    if change == "extra pin":
        environment["dependencies"][-1]["pip"].append("numpy==1.26.0")
    elif change == "conda numpy":
        environment["dependencies"].insert(0, "numpy=1.26")
    else:
        environment["dependencies"] = ["python=3.10" if d == "python=3.11" else d
                                       for d in environment["dependencies"]]
    assert len(environment_problems(environment, requires_python)) == 1


# --- 6. benchmarks: nothing printed for what was not measured; a documented reference --------

def _bench(name: str):
    import importlib.util

    path = REPO / "benchmarks" / f"bench_{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_meta_paper_cost_is_absent_when_nothing_was_recorded(monkeypatch):
    bench = _bench("meta")
    nothing = {"training": {}, "sweeps": {}, "missing": ["train-a", "eval-a"], "total": 0.0}
    monkeypatch.setattr(bench.runs, "recorded_cost", lambda p: nothing)
    assert bench._paper_profile_cost() == []
    some = {"training": {"a": 60.0}, "sweeps": {}, "missing": ["eval-a"], "total": 60.0}
    monkeypatch.setattr(bench.runs, "recorded_cost", lambda p: some)
    [entry] = bench._paper_profile_cost()
    assert entry["value"] == 60.0 and "eval-a" in entry["note"]


def test_the_tiny_reference_says_when_where_how_and_which_peer():
    bench = _bench("stability")
    for record in bench.REFERENCE:
        assert {"seconds", "date", "machine", "command", "peer_commit"} <= set(record)
        label = bench.peer_label(record, False, "some other CPU")
        for part in (record["date"], record["machine"], record["command"], "peer_mdeq.py",
                     "benchmarks/README.md", "across machines"):
            assert part in label, label
    readme = (REPO / "benchmarks" / "README.md").read_text()
    assert "cls_mdeq_TINY.yaml" in readme and "REFERENCE" in readme and "peer_mdeq.py" in readme


# --- 5. no sweep log and no library noise in the pages ------------------------------------------

class _InstantExecutor:
    """Stands in for submitit's local executor: every job is done at once."""

    def update_parameters(self, **kwargs):
        pass

    def submit(self, fn, *args):
        class Done:
            job_id = f"4{len(args[0][0].name)}"

            def done(self):
                return True

            def result(self, name=args[0][0].name):
                return name

        return Done()


def test_sweep_job_lines_go_to_the_log_file_not_the_page(monkeypatch, capsys):
    import submitit
    import torch

    from i2o.compute import sweep

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(submitit, "AutoExecutor", lambda folder, cluster: _InstantExecutor())
    todo = [toy(seed) for seed in range(3)]  # never run: the executor returns at once
    assert sweep.submit("toy", [(j,) for j in todo], "local", max_parallel=2) == [
        j.name for j in todo]
    shown = capsys.readouterr()
    for word in ("submitted", "finished", "local jobs"):
        assert word not in shown.out and word not in shown.err, shown
    log = (cache_entries.results_dir() / "_submitit" / "toy" / "sweep.log").read_text()
    assert "submitted residuals-seed2" in log and "finished residuals-seed2" in log
    assert "local jobs on the CPU" in log


def test_the_font_timestamp_warning_is_filtered_at_its_source(caplog):
    """matplotlib's PDF backend subsets fonts with fontTools, which warns about a font file's
    header dates; i2o.book.plotting drops that one message and nothing else of fontTools."""
    import logging

    import i2o.book.plotting  # noqa: F401  (installs the filter)

    logger = logging.getLogger("fontTools.ttLib.tables._h_e_a_d")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.warning("'%s' timestamp seems very low; regarding as unix timestamp", "created")
        logger.warning("extra bytes at the end of 'head' table")
    assert [r.getMessage() for r in caplog.records] == ["extra bytes at the end of 'head' table"]
