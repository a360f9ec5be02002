"""``python -m i2o.results rekey``: the results cache and the published digests moved from the
keys of earlier schemes to the keys of content, so that nothing computed is recomputed for it.

Keys hash content (:func:`i2o.compute.cache_key.module_source_hash`). Two schemes came before
(:data:`EARLIER`): until d14b95d an entry's key hashed the code of its closure with each file's
path (:func:`located_source_hash`), so moving a module changed every key reaching it; then, until
the imports of i2o code were cut out of a module's text, each import was reduced to the names it
binds (:func:`bound_names_source_hash`), which kept their grouping and order, so moving a module
imported beside another (``from i2o import replicates, results``) changed the key too. An entry is
still valid when the ``source`` its ``meta.json`` records is an earlier scheme's hash of its
module under this checkout's code (the code that would compute it now is the code that did);
run the rekey of the commit that moved the code, before moving it further. Such an entry gets the
content hash in its record
and is renamed to the folder of its new key (:func:`i2o.compute.cache_entries.recorded_key`); a
training-checkpoint folder beside it, or one a chapter's job names at the smoke, quick or paper
profile (replicates 0–9), moves with it. An entry recorded by other code is left where it is
(no key of this code reaches it). Rerunning is safe: an entry already at its content key is
counted as such, and one whose record was rewritten before an interruption is renamed.

With ``--verify K``, the K cheapest moved entries of each chapter that its jobs name (by
recorded cost) are computed again into a temporary results folder and their fingerprints
compared with the moved ones (:func:`i2o.provenance.fingerprint.entry_fingerprint`). The
published summaries' digests (``published/*.json``: the chapter's entry names at each replicate
and its claims code, :mod:`i2o.book.published`) that were current under an earlier scheme are
rewritten to content keys; stale ones stay stale.

Run it when no sweep or book is computing into the same cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from i2o.base import runtime
from i2o.base.digests import sha256
from i2o.book import published
from i2o.compute import cache_entries, cache_key, door, import_graph, profiles
from i2o.compute.job import Job
from i2o.provenance.fingerprint import chapter_jobs, entry_fingerprint, entry_jobs

#: Replicates whose jobs are listed to find checkpoint folders by their training keys.
REPLICATES = range(10)
PROFILES = ("smoke", "quick", "paper")


def located_source_hash(module: str, root: Path = import_graph.PACKAGE_DIR) -> str:
    """The hash keys held before content keys: the code (:func:`cache_key.code_of`) of each
    module of ``module``'s dependencies with its path under the package; for a module outside
    i2o, its file's code and the located hash of the i2o modules it imports."""
    if module in import_graph.modules(root):
        return cache_key.source_hash(cache_key.dependencies(module, root), root, code_only=True)
    path = cache_key.source_file(module)
    digest = hashlib.sha256(cache_key.code_of(path))
    imported = import_graph.imports_in(path, root=root)
    stop = cache_key.CACHE_MACHINERY | cache_key.INERT
    digest.update(cache_key.source_hash(import_graph.reach(imported, root, stop), root,
                                        code_only=True).encode())
    return digest.hexdigest()


def bound_names_source_hash(module: str, root: Path = import_graph.PACKAGE_DIR,
                            also_stop: frozenset[str] = frozenset()) -> str:
    """The hash keys held from d14b95d until imports were cut out of the content: the content
    hash with each import of i2o code read as the names it binds
    (:func:`i2o.compute.cache_key.bound_names_content_of`)."""
    return cache_key.module_source_hash(module, root, also_stop,
                                        content=cache_key.bound_names_content_of)


#: The schemes keys held before, oldest first: an entry or digest recorded by one of them under
#: this checkout's code is moved to the current key.
EARLIER: tuple[Callable[[str], str], ...] = (located_source_hash, bound_names_source_hash)


@functools.cache
def _hashes(module: str) -> tuple[tuple[str, ...], str]:
    """(the earlier schemes' hashes, the content hash) of ``module`` under this checkout's
    code."""
    return tuple(scheme(module) for scheme in EARLIER), cache_key.module_source_hash(module)


@dataclasses.dataclass
class Report:
    """What a rekey did: entries moved, already at their content key, left (recorded by other
    code, or unreadable), checkpoint folders moved, and the moved entries' folders."""

    moved: int = 0
    current: int = 0
    other_code: int = 0
    unreadable: int = 0
    checkpoints: int = 0
    by_figure: Counter[str] = dataclasses.field(default_factory=Counter)
    moved_to: list[Path] = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        figures = ", ".join(f"{figure} {count}" for figure, count in sorted(self.by_figure.items()))
        return [f"entries moved to content keys: {self.moved}" + (f" ({figures})" if figures
                                                                  else ""),
                f"entries already at content keys: {self.current}",
                f"entries recorded by other code, left where they are: {self.other_code}",
                f"entries without a readable record, left: {self.unreadable}",
                f"checkpoint folders moved: {self.checkpoints}"]


def entries(root: Path) -> Iterator[Path]:
    """Every entry folder of the results cache at ``root`` (``<figure>/<name>-<key>``)."""
    for figure in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for entry in sorted(figure.iterdir()):
            if entry.is_dir() and not entry.name.endswith(".ckpt") \
                    and not entry.name.startswith("."):
                yield entry


def _json(data: Any, sort_keys: bool = False) -> str:
    return json.dumps(data, indent=1, sort_keys=sort_keys, ensure_ascii=False) + "\n"


def _write_json(path: Path, data: Any, sort_keys: bool = False) -> None:
    tmp = path.with_name(f".{path.name}.rekey")
    tmp.write_text(_json(data, sort_keys))
    os.replace(tmp, path)


def _move(source: Path, target: Path) -> bool:
    if target.exists():
        return False
    os.rename(source, target)
    return True


def rekey_entry(entry: Path, report: Report) -> None:
    meta_path = entry / cache_entries.META
    try:
        meta = json.loads(meta_path.read_text())
        module, recorded = meta["module"], meta["source"]
        earlier, content = _hashes(module)
    except (OSError, ValueError, KeyError, TypeError):
        report.unreadable += 1
        return
    if recorded != content and recorded not in earlier:
        report.other_code += 1
        return
    if recorded != content:
        meta["source"] = content
        _write_json(meta_path, meta)
    target = entry.with_name(f"{meta['name']}-{cache_entries.recorded_key(meta)[:20]}")
    if target == entry:
        report.current += 1
        return
    if not _move(entry, target):  # already computed at its content key: keep that one
        shutil.rmtree(entry)
        report.current += 1
        return
    report.moved += 1
    report.by_figure[meta["figure"]] += 1
    report.moved_to.append(target)
    checkpoint = entry.with_name(f"{entry.name}.ckpt")
    if checkpoint.is_dir() and _move(checkpoint, target.with_name(f"{target.name}.ckpt")):
        report.checkpoints += 1


def _key_prefix(figure: str, name: str, params: dict[str, Any], source: str) -> str:
    return cache_key.key_of(figure, name, params, source, cache_key.torch_threads(),
                            runtime.numerics_key())[:20]


def listed_jobs(figures: list[str]) -> Iterator[Job]:
    """Every job the chapters list at the smoke, quick and paper profiles, replicates 0–9."""
    for figure in figures:
        if figure not in profiles.figures():
            continue
        for profile in PROFILES:
            for replicate in REPLICATES:
                try:
                    params = profiles.resolve(figure, profile, replicate=replicate)
                except (ValueError, KeyError):
                    continue
                for listed in door.entered(params).jobs():
                    yield from entry_jobs(listed)


def rekey_checkpoints(root: Path, jobs: Iterator[Job], report: Report) -> None:
    """Move each checkpoint folder a listed job names by an earlier scheme's training key."""
    seen: set[Path] = set()
    for job in jobs:
        earlier, content = _hashes(job.module)
        folder = root / job.figure
        name, params = job.name, job.training_key()
        new = folder / f"{name}-{_key_prefix(job.figure, name, params, content)}.ckpt"
        for source in earlier:
            old = folder / f"{name}-{_key_prefix(job.figure, name, params, source)}.ckpt"
            if old in seen or not old.is_dir():
                continue
            seen.add(old)
            if _move(old, new):
                report.checkpoints += 1


def rekey(root: Path | None = None, jobs: Callable[[list[str]], Iterator[Job]] = listed_jobs
          ) -> Report:
    """Move every entry of the results cache at ``root`` (default: the results folder) valid
    under an earlier scheme's keys to its content key, and the checkpoints with them."""
    root = root or cache_entries.results_dir()
    report = Report()
    if not root.is_dir():
        return report
    for entry in list(entries(root)):
        rekey_entry(entry, report)
    figures = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))
    rekey_checkpoints(root, jobs(figures), report)
    return report


def verify(moved: list[Path], count: int, jobs: Callable[[list[str]], Iterator[Job]] = listed_jobs
           ) -> list[tuple[str, bool]]:
    """Compute the ``count`` cheapest moved entries of each chapter that a listed job names again,
    in a temporary results folder; (entry, same fingerprint) for each (a moved entry whose arrays
    fail their checksum is not the same)."""
    if not moved or count <= 0:
        return []
    wanted = {path.name: path for path in moved}
    by_name: dict[str, Job] = {}
    for job in jobs(sorted({path.parent.name for path in moved})):
        name = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module).name
        if name in wanted:
            by_name.setdefault(name, job)

    def cost(name: str) -> float:
        recorded = json.loads((wanted[name] / cache_entries.META).read_text())
        return float(recorded.get("cost", {}).get("seconds", float("inf")))

    chosen = [name for figure in sorted({by_name[name].figure for name in by_name})
              for name in sorted((n for n in by_name if by_name[n].figure == figure),
                                 key=cost)[:count]]
    found = []
    before = os.environ.get("I2O_RESULTS_DIR")
    with tempfile.TemporaryDirectory(prefix="i2o-rekey-") as scratch:
        os.environ["I2O_RESULTS_DIR"] = scratch
        try:
            for name in chosen:
                job = by_name[name]
                job.run(progress=False)
                again = cache_entries.entry_dir(job.figure, job.name, job.key(), job.module)
                found.append((f"{job.figure}/{name}",
                              entry_fingerprint(again) == _fingerprint_or_none(wanted[name])))
        finally:
            if before is None:
                os.environ.pop("I2O_RESULTS_DIR", None)
            else:
                os.environ["I2O_RESULTS_DIR"] = before
    return found


def _fingerprint_or_none(path: Path) -> str | None:
    """The entry's fingerprint; ``None`` when its arrays no longer match their checksum."""
    try:
        return entry_fingerprint(path)
    except cache_entries.CorruptEntry:
        return None


def _entry_names_digest(figure: str, params: Any, source_of: Callable[[str], str]) -> str:
    """:func:`i2o.book.published.keys_digest`, with the code's hash given by ``source_of``."""
    names = sorted(
        f"{job.name}-{_key_prefix(job.figure, job.name, job.key(), source_of(job.module))}"
        for job in chapter_jobs(figure, params).values())
    return sha256("\n".join(names).encode())


def _earlier_claims_digests(figure: str) -> tuple[str, ...]:
    claims = f"{profiles.entry(figure)['package']}.claims"
    return (located_source_hash(claims),
            bound_names_source_hash(claims, also_stop=cache_key.SCHEDULING))


def rekey_published(folder: Path) -> list[str]:
    """Rewrite each published summary's digests that are current under an earlier scheme's keys
    to content keys; one line per chapter and summary saying what was done."""
    said = []
    for path in sorted(folder.glob("*.json")):
        text = path.read_text()
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("digests"), dict) \
                or "profile" not in data:
            continue
        changed = False
        for figure, digests in data["digests"].items():
            content = published.claims_code_digest(figure)
            states = []
            if digests.get("claims_code") != content \
                    and digests.get("claims_code") in _earlier_claims_digests(figure):
                digests["claims_code"], changed = content, True
                states.append("claims code rekeyed")
            elif digests.get("claims_code") != content:
                states.append("claims code stale, left")
            for replicate, recorded in digests.get("keys", {}).items():
                params = profiles.resolve(figure, data["profile"], replicate=int(replicate))
                current = _entry_names_digest(figure, params, lambda m: _hashes(m)[1])
                if recorded == current:
                    continue
                if any(recorded == _entry_names_digest(figure, params, scheme)
                       for scheme in EARLIER):
                    digests["keys"][replicate], changed = current, True
                    states.append(f"keys r{replicate} rekeyed")
                else:
                    states.append(f"keys r{replicate} stale, left")
            said.append(f"{path.name} {figure}: {', '.join(states) or 'already content keys'}")
        if changed:  # written as it was: keys sorted or in their order
            _write_json(path, data, sort_keys=text == _json(json.loads(text), sort_keys=True))
    return said


def main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results rekey``."""
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results rekey",
        description="Move the results cache (I2O_RESULTS_DIR) and the published digests from "
                    "the keys of earlier schemes (code with its paths; imports read as the names "
                    "they bind) to content keys; entries recorded by other code are left.")
    parser.add_argument("--verify", type=int, default=0, metavar="K",
                        help="compute the K cheapest moved entries of each chapter again and "
                             "compare fingerprints")
    parser.add_argument("--published", type=Path, default=None,
                        help="the published summaries' folder (default: published/ of the repo)")
    args = parser.parse_args(argv)
    if args.verify < 0:
        print(f"error: --verify must be ≥ 0; got {args.verify}", file=sys.stderr)
        return 2
    report = rekey()
    print(f"results cache {cache_entries.results_dir()}:")
    for line in report.lines():
        print(f"  {line}")
    checked = verify(report.moved_to, args.verify)
    for name, same in checked:
        print(f"  recomputed {name}: {'same fingerprint' if same else 'DIFFERENT fingerprint'}")
    for line in rekey_published(args.published or published.folder()):
        print(f"  {line}")
    return 0 if all(same for _, same in checked) else 1
