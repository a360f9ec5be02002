"""The install: requirements.lock agrees with pyproject.toml, every pin has hashes, the Makefile
installs through the lock, and an unsupported Python is refused with a clear message."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
EXTRAS = ("book", "dev", "bench")  # what `make install` installs


def parse_lock(text: str) -> dict[str, list[tuple[Version, str | None, list[str]]]]:
    """``{name: [(version, marker or None, [sha256, ...]), ...]}`` of a hashed requirements file."""
    entries: dict[str, list[tuple[Version, str | None, list[str]]]] = {}
    for line in re.sub(r"\s*\\\n\s*", " ", text).splitlines():
        if not line.strip() or line[0] in "# -":
            continue
        head, *hashes = line.split(" --hash=sha256:")
        spec, _, marker = head.partition(";")
        name, _, version = spec.strip().partition("==")
        name = re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()
        entries.setdefault(name, []).append(
            (Version(version), marker.strip() or None, [h.split()[0] for h in hashes]))
    return entries


def direct_requirements(pyproject: dict) -> list[Requirement]:
    project = pyproject["project"]
    lines = list(project["dependencies"])
    for extra in EXTRAS:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def disagreements(pyproject: dict, lock: dict) -> list[str]:
    """Every direct requirement the lock does not satisfy on this Python, in words."""
    problems = []
    for requirement in direct_requirements(pyproject):
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pins = [version for version, marker, _ in lock.get(name, [])
                if marker is None or Marker(marker).evaluate()]
        if not pins:
            problems.append(f"{requirement} is not in requirements.lock")
        elif not all(requirement.specifier.contains(v, prereleases=True) for v in pins):
            problems.append(f"{requirement}: requirements.lock pins {', '.join(map(str, pins))}")
    return problems


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def lock() -> dict:
    return parse_lock(LOCK.read_text())


def test_lock_satisfies_every_direct_requirement(pyproject, lock):
    problems = disagreements(pyproject, lock)
    assert not problems, ("pyproject.toml and requirements.lock disagree (run `make lock`): "
                          + "; ".join(problems))


def test_a_changed_pin_is_caught(pyproject, lock):
    """The check above can fail: a pin moved in pyproject but not in the lock is named."""
    changed = {**pyproject, "project": {**pyproject["project"]}}
    changed["project"]["dependencies"] = [
        "filelock==4.2.10" if d.startswith("filelock") else d
        for d in pyproject["project"]["dependencies"]] + ["not-a-locked-package>=1"]
    problems = disagreements(changed, lock)
    assert any("filelock==4.2.10" in p and "4.2.11" in p for p in problems), problems
    assert any("not-a-locked-package" in p for p in problems), problems


def test_every_locked_package_is_pinned_with_hashes(lock):
    assert len(lock) > 50, "requirements.lock looks truncated"
    unhashed = [name for name, pins in lock.items() if any(not h for _, _, h in pins)]
    assert not unhashed, f"pins without --hash (pip --require-hashes refuses them): {unhashed}"
    for name in ("torch", "torchvision", "jax", "filelock", "jupyter-book"):
        assert name in lock, f"{name} missing from requirements.lock"


def test_lock_was_made_by_make_lock():
    head = LOCK.read_text().splitlines()[:3]
    assert any("make lock" in line for line in head), head


def test_makefile_installs_through_the_lock():
    makefile = (REPO / "Makefile").read_text()
    assert "--require-hashes -r $(LOCK)" in makefile
    assert "--no-deps -e ." in makefile
    assert re.search(r"INSTALLED\s*:=.*cat \$\(LOCK\)", makefile), "marker not keyed on the lock"
    recipe = makefile.split("$(INSTALLED): $(LOCK)", 1)[1]
    assert recipe.index("check_python.py") < recipe.index("-m venv"), \
        "the Python check must run before the venv is made"


def _check_python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "check_python.py"), *args],
                          capture_output=True, text=True)


def test_this_python_is_supported(pyproject):
    assert _check_python().returncode == 0
    spec = pyproject["project"]["requires-python"]
    from packaging.specifiers import SpecifierSet

    assert Version(".".join(map(str, sys.version_info[:3]))) in SpecifierSet(spec)


@pytest.mark.parametrize("version", ["3.10.12", "3.15.0", "2.7.18"])
def test_unsupported_python_is_refused_in_one_clear_line(version, pyproject):
    done = _check_python("--version", version)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"Python {version}" in lines[0]
    assert pyproject["project"]["requires-python"] in lines[0]
    assert "PYTHON=" in lines[0]


@pytest.mark.parametrize("version", ["3.11.0", "3.12.3", "3.13.1", "3.14.9"])
def test_every_python_of_the_pinned_stack_is_accepted(version):
    assert _check_python("--version", version).returncode == 0


def test_check_python_agrees_with_packaging(pyproject):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import check_python
    finally:
        sys.path.pop(0)
    from packaging.specifiers import SpecifierSet

    spec = pyproject["project"]["requires-python"]
    assert check_python.requires_python() == spec
    for version in ("3.9.1", "3.11.0", "3.11.7", "3.14.0", "3.14.99", "3.15.0", "4.0"):
        parts = tuple(int(p) for p in version.split("."))
        assert check_python.satisfies(parts, spec) == (Version(version) in SpecifierSet(spec))
