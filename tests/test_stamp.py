"""An executed notebook's stamp: what it is computed from, that two builds in a row leave it
unchanged (issue 50: a second `make book` on a fresh clone re-executed `affine`), and that a
changed stamp names what moved."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from i2o.base import locations
from i2o.book import execute, stamps
from i2o.compute import import_graph, profiles

REPO = locations.repo_root()

#: Prints, for every figure with an executed notebook, whether a fresh process computes the stamp
#: it recorded, and what moved when not (what a second `make book` would decide).
SECOND_BUILD = """
import json
from i2o.book import stamps
from i2o.compute import door, profiles
found = {}
for figure in profiles.figures():
    recorded = stamps.recorded_stamp(stamps.executed_path(figure))
    stamp, inputs = stamps.stamped(figure, door.enter(figure, recorded["profile"]).params)
    found[figure] = [] if recorded["stamp"] == stamp else \\
        stamps.stamp_changes(recorded.get("inputs", {}), inputs)
print(json.dumps(found))
"""


def _affine_inputs() -> dict:
    return stamps.stamped("affine", profiles.resolve("affine", "smoke"))[1]


def test_a_stamp_is_the_hash_of_its_inputs_and_its_sources_are_the_hashed_files():
    params = profiles.resolve("affine", "smoke")
    stamp, inputs = stamps.stamped("affine", params)
    assert stamp == stamps.stamp("affine", params)
    assert stamp == stamps.stamp_of({k: v for k, v in inputs.items() if k != "sources"})
    assert set(inputs["sources"]) == {str(p.relative_to(import_graph.PACKAGE_DIR))
                                      for p in import_graph.PACKAGE_DIR.rglob("*.py")}
    assert "book/build.py" in inputs["sources"]


def test_stamp_changes_is_empty_when_no_input_moved():
    inputs = _affine_inputs()
    assert stamps.stamp_changes(inputs, json.loads(json.dumps(inputs))) == []


def test_stamp_changes_names_the_files_parameters_and_notebook_that_moved():
    before = _affine_inputs()
    after = json.loads(json.dumps(before))
    after["sources"]["book/build.py"] = "0" * 16
    after["sources"]["chapters/affine/new.py"] = "1" * 16
    del after["sources"]["compute/pool.py"]
    after["i2o"] = "f" * 64
    after["params"]["n_seeds"] = before["params"]["n_seeds"] + 1
    after["notebook"] = "e" * 64
    changes = stamps.stamp_changes(before, after)
    assert changes == [
        "the source notebook changed",
        f"parameter n_seeds: {before['params']['n_seeds']} → {before['params']['n_seeds'] + 1}",
        "i2o source: changed book/build.py; added chapters/affine/new.py; removed compute/pool.py",
    ]


def test_stamp_changes_says_when_the_notebook_kept_no_inputs():
    assert stamps.stamp_changes({}, _affine_inputs()) == [
        "the executed notebook keeps no stamp inputs (executed before they were kept)"]


def test_a_re_execution_says_what_moved_and_an_unchanged_run_says_nothing(monkeypatch, capsys):
    """``run`` with a stand-in for papermill (no kernel): the first execution and an up-to-date
    run name no change; a run with another seed names the parameter that moved."""

    def copy_notebook(source, output, parameters, **options):
        Path(output).write_text(Path(source).read_text())

    monkeypatch.setitem(sys.modules, "papermill",
                        types.SimpleNamespace(execute_notebook=copy_notebook))
    said = []
    for seed in (1, 1, 2):
        execute.run("affine", "smoke", {"seed": seed})
        said.append(capsys.readouterr().out)
    assert "stamp changed" not in said[0] + said[1] and "up to date" in said[1]
    assert "affine: its stamp changed since its last execution: parameter seed: 1 → 2\n" in said[2]
    recorded = stamps.recorded_stamp(stamps.executed_path("affine"))
    assert recorded["stamp"] == stamps.stamp_of({k: v for k, v in recorded["inputs"].items()
                                               if k != "sources"})


def test_a_failure_whose_cause_is_gone_leaves_the_page_to_the_up_to_date_notebook(
        monkeypatch, capsys):
    """A run refused after a good execution (``DATA_DIR=/bad``) records why the page is not
    built; the corrected run finds the notebook up to date and the page is that notebook again."""

    def copy_notebook(source, output, parameters, **options):
        Path(output).write_text(Path(source).read_text())

    monkeypatch.setitem(sys.modules, "papermill",
                        types.SimpleNamespace(execute_notebook=copy_notebook))
    execute.run("affine", "smoke")
    execute.record_failure("affine", "FileNotFoundError: no CIFAR-10 under /bad")
    assert execute.failure_path("affine").exists()
    execute.run("affine", "smoke")
    assert "up to date" in capsys.readouterr().out
    assert not execute.failure_path("affine").exists()


@pytest.mark.book
def test_a_second_build_finds_every_stamp_unchanged(built_book):
    """After a build (every chapter at smoke), a new process, as the next `make book` is, computes
    every chapter's recorded stamp again: nothing the first build did moved one."""
    env = {**os.environ, "I2O_BUILD_DIR": str(built_book["build"])}
    done = subprocess.run([sys.executable, "-c", SECOND_BUILD], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    moved = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(moved) == set(profiles.figures())
    assert moved == {figure: [] for figure in moved}


def _fresh_tree(root: Path) -> Path:
    """A copy of the package and the first chapter's notebook, as a fresh clone has them: no
    ``__pycache__``, no ``_build``, no results cache."""
    shutil.copytree(REPO / "src", root / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    notebook = profiles.entry(profiles.figures()[0])["notebook"]
    (root / notebook).parent.mkdir(parents=True)
    shutil.copy(REPO / notebook, root / notebook)
    return root


@pytest.mark.book
def test_the_first_chapter_run_twice_in_a_fresh_tree_executes_once(tmp_path):
    """The first chapter executed in a fresh tree (its first notebook, its first bytecode, its
    first build and results folders), then asked again by a new process: up to date."""
    root = _fresh_tree(tmp_path / "clone")
    figure = profiles.figures()[0]
    env = {name: value for name, value in os.environ.items()
           if name not in ("I2O_BUILD_DIR", "I2O_RESULTS_DIR", "I2O_CACHE_DIR", "I2O_ROOT",
                           "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "src"),
                                                      env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "i2o.book", "run", figure, "--profile", "smoke"]
    runs = [subprocess.run(command, capture_output=True, text=True, env=env, cwd=root,
                           timeout=900) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr[-3000:]
    assert f"executing {figure}" in runs[0].stdout
    assert (root / "_build" / "notebooks").is_dir() and (root / "data" / "results").is_dir()
    assert f"{figure}: up to date" in runs[1].stdout, runs[1].stdout[-3000:]
