"""The results cache and the book under real concurrent processes (budget: ~10 s).

Each test starts child Python processes that wait for a "go" file, so that they reach the cache or
the notebook at the same moment, as two ``make`` commands or two SLURM array jobs would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from i2o.base.digests import sha256
from i2o.compute import cache_entries, results

PRELUDE = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[1])
ready = Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.01)
"""


def _start(tmp_path: Path, body: str, count: int, env: dict[str, str] | None = None,
           args: tuple[str, ...] = ()) -> list[subprocess.Popen]:
    """Start ``count`` children running ``body`` after the prelude; release them together."""
    script = tmp_path / f"child-{len(list(tmp_path.glob('child-*.py')))}.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    go = tmp_path / f"{script.stem}.go"
    children, readies = [], []
    for k in range(count):
        ready = tmp_path / f"{script.stem}.ready{k}"
        readies.append(ready)
        children.append(subprocess.Popen(
            [sys.executable, str(script), str(go), str(ready), *args],
            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True))
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in readies):
        assert time.monotonic() < deadline, "children did not start"
        time.sleep(0.01)
    go.touch()
    return children


def _finish(children: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    """Each child's exit code, standard output and standard error."""
    outputs = [c.communicate(timeout=60) for c in children]
    return [(c.returncode, *out) for c, out in zip(children, outputs, strict=True)]


SLOW_ENTRY = """
import numpy as np
from i2o.compute import results

calls = Path(os.environ["CALLS"])

def compute():
    with open(calls, "a") as stream:
        stream.write(f"{os.getpid()}\\n")
    time.sleep(1.0)
    return {"x": np.arange(5.0) * 7, "label": "slow"}

found = results.cached("fig", "slow", {"a": 1}, compute)
print(found["x"].sum(), found["label"])
"""


def test_two_processes_compute_one_entry_once(tmp_path):
    calls = tmp_path / "calls"
    outcomes = _finish(_start(tmp_path, SLOW_ENTRY, 2, {"CALLS": str(calls)}))
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert len(calls.read_text().split()) == 1  # computed by one process only
    assert {out.strip() for _, out, _ in outcomes} == {"70.0 slow"}
    waited = [err for _, _, err in outcomes if "waiting for fig/slow" in err]
    assert len(waited) == 1 and "is computing it" in waited[0], outcomes
    entries = list(cache_entries.results_dir().joinpath("fig").iterdir())
    assert not [p for p in entries if p.name.startswith(".") and p.name != ".locks"]


STORE_SAME = """
import numpy as np
from i2o.compute import cache_entries

path = cache_entries.entry_dir("fig", "race", {})
cache_entries.store(path, {"y": np.linspace(0, 1, 50_000)}, {"figure": "fig"})
print("stored")
"""


def test_simultaneous_writers_of_one_key_all_succeed(tmp_path):
    """Every writer but the first loses the rename; it verifies the winner's entry and keeps it."""
    outcomes = _finish(_start(tmp_path, STORE_SAME, 3))
    assert [code for code, _, _ in outcomes] == [0, 0, 0], outcomes
    entry = cache_entries.entry_dir("fig", "race", {})
    np.testing.assert_array_equal(cache_entries.load(entry)["y"], np.linspace(0, 1, 50_000))
    assert [p.name for p in entry.parent.iterdir() if p.name.startswith(".")] == [".locks"]


def test_losing_the_rename_keeps_a_valid_winner_and_replaces_a_corrupt_one(tmp_path):
    path = cache_entries.entry_dir("fig", "won", {})
    cache_entries.store(path, {"v": np.ones(3)}, {})
    before = (path / "meta.json").read_text()
    loser = path.with_name(f".{path.name}.tmp-loser")
    loser.mkdir()
    (loser / "arrays.npz").write_bytes(b"a different attempt")
    assert cache_entries.publish(loser, path) is False
    assert (path / "meta.json").read_text() == before  # the winner, untouched
    (path / "arrays.npz").write_bytes(b"damaged")
    replacement = path.with_name(f".{path.name}.tmp-second")
    replacement.mkdir()
    np.savez(replacement / "arrays.npz", v=np.zeros(3))
    (replacement / "meta.json").write_text(json.dumps(
        {"sha256": sha256(replacement / "arrays.npz")}))
    with pytest.warns(UserWarning, match="replacing corrupted entry"):
        assert cache_entries.publish(replacement, path) is True
    np.testing.assert_array_equal(cache_entries.load(path)["v"], np.zeros(3))


KILLED_WHILE_WRITING = """
import signal
import numpy as np
from i2o.compute import results
from i2o.compute import cache_entries

save = np.savez

def save_then_die(*args, **kwargs):
    save(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

cache_entries.np.savez = save_then_die
results.cached("fig", "killed", {}, lambda: {"z": np.arange(10)})
"""

KILLED_WHILE_COMPUTING = """
import signal
from i2o.compute import results

def die():
    os.kill(os.getpid(), signal.SIGKILL)

results.cached("fig", "held", {}, die)
"""

AFTER_A_KILL = """
import numpy as np
from i2o.compute import results

print(results.cached("fig", "held", {}, lambda: {"w": np.arange(3)})["w"].tolist())
"""


def test_killed_writers_leave_no_lock_and_their_temporaries_are_removed(tmp_path):
    (writer,) = _finish(_start(tmp_path, KILLED_WHILE_WRITING, 1))
    assert writer[0] == -signal.SIGKILL
    figure_dir = cache_entries.results_dir() / "fig"
    stale = [p for p in figure_dir.iterdir() if p.name.startswith(".killed-")]
    assert len(stale) == 1 and (stale[0] / "arrays.npz").exists()

    (holder,) = _finish(_start(tmp_path, KILLED_WHILE_COMPUTING, 1))
    assert holder[0] == -signal.SIGKILL  # died holding the lock of fig/held
    # the next process to use the figure's cache (another key) removed the dead writer's leftovers
    assert "removed 1 temporary entry left by interrupted writers" in holder[2]
    assert not [p for p in figure_dir.iterdir() if p.name.startswith(".killed-")]
    (after,) = _finish(_start(tmp_path, AFTER_A_KILL, 1))  # would hang if the lock outlived it
    assert after[0] == 0 and after[1].strip() == "[0, 1, 2]", after

    calls = []
    again = results.cached("fig", "killed", {}, lambda: calls.append(1) or {"z": np.arange(10)})
    assert calls == [1] and again["z"].tolist() == list(range(10))


FAKE_BOOK_RUN = """
import json
import types
from i2o.book import execute

calls = Path(os.environ["CALLS"])

def fake_execute(source, output, parameters, **kwargs):
    with open(calls, "a") as stream:
        stream.write(json.dumps(parameters) + "\\n")
    notebook = json.loads(Path(source).read_text())
    Path(output).write_text(json.dumps(notebook))  # what papermill writes first, then fills
    if os.environ.get("DIE"):
        os.kill(os.getpid(), 9)
    time.sleep(0.5)
    notebook["metadata"]["fake"] = parameters
    Path(output).write_text(json.dumps(notebook))

sys.modules["papermill"] = types.SimpleNamespace(execute_notebook=fake_execute)  # no kernel
overrides = json.loads(sys.argv[3])
execute.run("affine", "smoke", overrides, force=True)
"""


def test_two_builds_of_one_figure_wait_for_each_other(tmp_path):
    calls = tmp_path / "calls"
    env = {"CALLS": str(calls)}
    same = _finish(_start(tmp_path, FAKE_BOOK_RUN, 2, env, ("{}",)))
    assert [code for code, _, _ in same] == [0, 0], same
    outs = sorted(out for _, out, _ in same)
    assert "already running" in outs[0] and "executed meanwhile" in outs[0], outs
    assert len(calls.read_text().splitlines()) == 1  # one execution served both
    from i2o.book import stamps

    target = stamps.executed_path("affine")
    notebook = json.loads(target.read_text())
    assert notebook["metadata"]["i2o"]["profile"] == "smoke"

    calls.unlink()
    different = _finish([*_start(tmp_path, FAKE_BOOK_RUN, 1, env, ('{"seed": 1}',)),
                         *_start(tmp_path, FAKE_BOOK_RUN, 1, env, ('{"seed": 2}',))])
    assert [code for code, _, _ in different] == [0, 0], different
    assert len(calls.read_text().splitlines()) == 2  # other parameters: executed in turn
    notebook = json.loads(target.read_text())  # whole, and one of the two runs' own
    assert notebook["metadata"]["i2o"]["params"]["seed"] in (1, 2)
    assert notebook["metadata"]["fake"]["seed"] == notebook["metadata"]["i2o"]["params"]["seed"]
    assert not list(target.parent.glob(".*partial*"))


def test_a_killed_build_leaves_its_notebook_intact(tmp_path):
    from i2o.book import stamps

    env = {"CALLS": str(tmp_path / "calls")}
    (first,) = _finish(_start(tmp_path, FAKE_BOOK_RUN, 1, env, ("{}",)))
    assert first[0] == 0
    target = stamps.executed_path("affine")
    before = target.read_bytes()
    (killed,) = _finish(_start(tmp_path, FAKE_BOOK_RUN, 1, {**env, "DIE": "1"}, ('{"seed": 3}',)))
    assert killed[0] == -signal.SIGKILL
    assert target.read_bytes() == before  # the half-written run never replaced it
    assert len(list(target.parent.glob(".*partial.ipynb"))) == 1
    (after,) = _finish(_start(tmp_path, FAKE_BOOK_RUN, 1, env, ('{"seed": 4}',)))
    assert after[0] == 0 and not list(target.parent.glob(".*partial.ipynb"))
    assert json.loads(target.read_text())["metadata"]["i2o"]["params"]["seed"] == 4
