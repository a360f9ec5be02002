"""Results bundles: a chapter's cache entries in one archive, to publish a run and to import it
elsewhere.

``python -m i2o.results export FIG --profile P [--replicate R] [--checkpoints] [--partial] -o
FILE`` writes every cached entry of the chapter's jobs (``arrays.npz`` and ``meta.json``, with its
provenance; checkpoints only when asked) into one ``tar`` archive whose first member is
``manifest.json``: the format, the figure, profile and replicate, the commit, the numerics mode,
the machine, the chapter's number of entries, whether the bundle is ``partial`` and the entries
it misses, and per file its path in the cache, its size and its SHA-256, and the *contents
digest*: the SHA-256 of one line ``path size sha256`` per file, in path order
(:func:`contents_digest`), which names what a bundle carries independently of when and where it
was written (the archive's own SHA-256 changes with the manifest's date). A published summary
records it (:func:`describe_entries`), so that a reader can check that a downloaded bundle holds
the published run. A chapter with entries not computed yet is exported only when asked
(``--partial``): otherwise the export is refused (exit status 2) with the count and names of the
missing entries, so that no bundle leaves out entries unnoticed. ``--partial --checkpoints``
carries a sweep in progress: the checkpoints of the jobs not finished travel too, and after the
import ``make sweep`` on the other machine resumes them where they stopped.

``python -m i2o.results import FILE`` reads the whole archive and verifies it before it writes
anything: the manifest's format and figure, every member named in the manifest and nothing else,
regular files only, no path that leaves the cache (absolute, ``..``), every size and checksum. Each
entry is then written into the results cache atomically (a temporary directory renamed into place,
under the entry's lock, as :func:`i2o.compute.cache_entries.store` does); an entry already there
with the same files is left as it is, so a second import of the same archive writes nothing. The
report says which entries match the current code's keys (a notebook reads them) and which belong to
another version of the code (written, named, never used by this code).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import shutil
import sys
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from i2o import lineage, runtime
from i2o.compute import cache_entries, door, profiles
from i2o.digests import sha256
from i2o.provenance import fingerprint

FORMAT = 1
MANIFEST = "manifest.json"
#: the files of an entry a bundle carries (a checkpoint directory only with ``checkpoints``)
ENTRY_FILES = ("arrays.npz", "meta.json")
#: How many entries not computed yet an export's message names (then says how many more).
NAMED_MISSING = 10


class BundleError(ValueError):
    """A bundle that cannot be imported (or exported), with the reason; nothing was written."""


@dataclass
class Report:
    """What an import did: entries written, entries already there (identical), and which of
    them the current code reads (``current``) or not (``other``: another version of the code)."""

    figure: str
    contents_sha256: str
    written: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"{self.figure}: {len(self.written)} entries written, {len(self.present)} "
                 f"already in the cache; {len(self.current)} match this code's keys; contents "
                 f"digest {self.contents_sha256}"]
        if self.other:
            lines.append(f"{len(self.other)} belong to another version of the code (kept, never "
                         "used by this code): " + ", ".join(self.other))
        return "\n".join(lines)


def _entries(figure: str, profile: str, replicate: int) -> dict[str, Path]:
    """The cache folders of the chapter's jobs and of the jobs they are made of (a meta
    evaluation's model), under the current code's keys (folder name → path); the same entries
    :mod:`i2o.provenance.fingerprint` fingerprints. Jobs that measure the machine rather than
    compute a result (stability's step costs) are not among a chapter's jobs: the importing machine
    measures them again."""
    chapter = door.enter(figure, profile, replicate=replicate)
    return {path.name: path
            for path in fingerprint.chapter_entries(figure, chapter.params).values()}


def contents_digest(files: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 of one line ``path size sha256`` per file (a manifest's ``files``), in path
    order: what a bundle carries, whatever its manifest's date and machine."""
    lines = sorted(f"{f['path']} {f['size']} {f['sha256']}\n" for f in files)
    return sha256("".join(lines).encode())


def _chosen(figure: str, profile: str, replicate: int,
            checkpoints: bool) -> tuple[list[Path], list[str], int]:
    """The files a bundle of ``figure`` carries, the entries not computed yet, and how many
    entries the chapter has."""
    files, missing = [], []
    entries = _entries(figure, profile, replicate)
    for name, entry in entries.items():
        if (entry / ENTRY_FILES[0]).exists():
            cache_entries.load(entry)  # a corrupted entry is not published
            files += [entry / f for f in ENTRY_FILES]
        else:
            missing.append(name)
        if checkpoints:
            files += _checkpoint_files(entry.with_name(f"{entry.name}.ckpt"))
    return files, missing, len(entries)


def _checkpoint_files(folder: Path) -> list[Path]:
    """The files of a job's checkpoint folder (of a job not finished yet too, so that another
    machine resumes it), without the temporary files of a write in progress (dot names)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and not any(part.startswith(".")
                                             for part in p.relative_to(folder).parts))


def _listing(files: Iterable[Path]) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    root = cache_entries.results_dir()
    listed, blobs = [], {}
    for path in files:
        data = path.read_bytes()
        relative = path.relative_to(root).as_posix()
        blobs[relative] = data
        listed.append({"path": relative, "size": len(data), "sha256": sha256(data)})
    return listed, blobs


def describe_entries(figure: str, profile: str, replicate: int = 0) -> dict[str, Any]:
    """What :func:`export` would write for ``figure`` (without checkpoints), written nowhere:
    its number of files, their bytes, the :func:`contents_digest` and the entries missing."""
    files, missing, _ = _chosen(figure, profile, replicate, checkpoints=False)
    listed, _ = _listing(files)
    return {"files": len(listed), "bytes": sum(f["size"] for f in listed),
            "contents_sha256": contents_digest(listed), "missing": missing}


class IncompleteExport(BundleError):
    """An export that would leave out entries not computed yet, not asked to (``partial``)."""


def _missing_message(figure: str, profile: str, missing: list[str], total: int) -> str:
    """``3 of 5 entries of affine (smoke) are not computed yet: a, b, c``; the first
    :data:`NAMED_MISSING` names, then how many more."""
    shown = ", ".join(missing[:NAMED_MISSING])
    more = f" and {len(missing) - NAMED_MISSING} more" if len(missing) > NAMED_MISSING else ""
    return (f"{len(missing)} of {total} entries of {figure} ({profile}) are not computed yet: "
            f"{shown}{more}")


def export(figure: str, profile: str, output: Path, replicate: int = 0,
           checkpoints: bool = False, partial: bool = False) -> dict[str, Any]:
    """Write the bundle of ``figure``'s cached entries to ``output``; return its manifest.

    An entry not computed yet refuses the export (:class:`IncompleteExport`, nothing written)
    unless ``partial``: the bundle then carries what is there, and its manifest lists the
    entries ``missing`` and says ``partial``."""
    files, missing, total = _chosen(figure, profile, replicate, checkpoints)
    if missing and not partial:
        raise IncompleteExport(_missing_message(figure, profile, missing, total)
                               + "; compute them first (make fig-" + figure + f" PROFILE="
                               f"{profile}) or export what is there with --partial")
    listed, blobs = _listing(files)
    manifest = {"format": FORMAT, "figure": figure, "profile": profile, "replicate": replicate,
                "git": lineage.git_sha(), "numerics": runtime.numerics_key(),
                "machine": lineage.machine_facts(), "written": lineage.now_iso(),
                "partial": bool(missing), "entries": total, "missing": missing, "files": listed,
                "contents_sha256": contents_digest(listed)}
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp-{secrets.token_hex(4)}")
    with _new_archive(tmp, output.suffix) as archive:
        for name, data in [(MANIFEST, json.dumps(manifest, indent=1, default=repr).encode()),
                           *blobs.items()]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            archive.addfile(info, io.BytesIO(data))
    os.replace(tmp, output)
    return manifest


def _new_archive(path: Path, suffix: str) -> tarfile.TarFile:
    """An archive compressed by the bundle name's suffix: ``.xz`` (LZMA, the smallest for the
    cache's arrays), ``.gz``, else none; :func:`read` opens any of them."""
    if suffix == ".xz":
        return tarfile.open(path, "w:xz")
    if suffix == ".gz":
        return tarfile.open(path, "w:gz")
    return tarfile.open(path, "w")


def _safe(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or name.startswith("/"):
        raise BundleError(f"the bundle names a path outside the cache: {name!r}")
    return path


def read(bundle: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The bundle's manifest and files, every check of the module docstring passed."""
    try:
        with tarfile.open(bundle, "r:*") as archive:  # plain, .gz or .xz
            members = archive.getmembers()
            contents: dict[str, bytes] = {}
            for member in members:
                if not member.isfile():
                    raise BundleError(f"the bundle holds something other than a file: "
                                      f"{member.name!r}")
                _safe(member.name)
                if member.name in contents:
                    raise BundleError(f"the bundle holds {member.name!r} twice")
                stream = archive.extractfile(member)
                assert stream is not None
                contents[member.name] = stream.read()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise BundleError(f"{bundle} is not a readable bundle (truncated or not a tar "
                          f"archive): {error}") from error
    if MANIFEST not in contents:
        raise BundleError(f"{bundle} has no {MANIFEST}")
    try:
        manifest = json.loads(contents.pop(MANIFEST))
    except ValueError as error:
        raise BundleError(f"{bundle}: its manifest is not JSON: {error}") from error
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{bundle}: bundle format {manifest.get('format')!r}, this code reads "
                          f"{FORMAT}")
    figure = manifest.get("figure")
    if figure not in profiles.figures():
        raise BundleError(f"{bundle}: unknown figure {figure!r}")
    listed = {f["path"]: f for f in manifest.get("files", [])}
    if set(listed) != set(contents):
        extra, absent = sorted(set(contents) - set(listed)), sorted(set(listed) - set(contents))
        raise BundleError(f"{bundle}: the files do not match the manifest (not listed: {extra}; "
                          f"listed but absent: {absent})")
    for path, data in contents.items():
        parts = _safe(path).parts
        if parts[0] != figure or len(parts) < 3:
            raise BundleError(f"{bundle}: {path!r} is not an entry of {figure!r}")
        if len(data) != listed[path]["size"] or sha256(data) != listed[path]["sha256"]:
            raise BundleError(f"{bundle}: {path!r} does not match its checksum (tampered or "
                              "damaged); nothing was written")
    stated = manifest.get("contents_sha256")
    if stated is not None and stated != contents_digest(listed.values()):
        raise BundleError(f"{bundle}: its contents digest {stated[:16]}… does not match its "
                          "files (tampered manifest); nothing was written")
    return manifest, contents


def _entry_groups(contents: Mapping[str, bytes]) -> dict[str, dict[str, bytes]]:
    """Files grouped by the cache folder they go to (``figure/entry``, its checkpoint apart)."""
    groups: dict[str, dict[str, bytes]] = {}
    for path, data in contents.items():
        parts = PurePosixPath(path).parts
        groups.setdefault("/".join(parts[:2]), {})["/".join(parts[2:])] = data
    return groups


def _same(folder: Path, files: Mapping[str, bytes]) -> bool:
    return folder.is_dir() and all((folder / name).is_file()
                                   and (folder / name).read_bytes() == data
                                   for name, data in files.items())


def _write(folder: Path, files: Mapping[str, bytes]) -> None:
    """``files`` into ``folder`` atomically, as the cache writes an entry
    (:func:`i2o.compute.cache_entries.staging`); an entry already there, which differs, is
    replaced."""
    with cache_entries.staging(folder) as tmp:
        for name, data in files.items():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(tmp, folder)


def import_bundle(bundle: Path) -> Report:
    """Verify ``bundle`` (:func:`read`), then write its entries into the results cache; the
    report names those that match this code's keys and those that do not."""
    manifest, contents = read(Path(bundle))
    figure = manifest["figure"]
    try:
        expected = set(_entries(figure, manifest["profile"], int(manifest.get("replicate", 0))))
    except profiles.ParameterError:
        expected = set()
    root = cache_entries.results_dir()
    report = Report(figure, contents_digest(manifest["files"]))
    for group, files in sorted(_entry_groups(contents).items()):
        folder = root / group
        name = PurePosixPath(group).name
        if _same(folder, files):
            report.present.append(name)
        else:
            _write(folder, files)
            report.written.append(name)
        if not name.endswith(".ckpt"):
            (report.current if name in expected else report.other).append(name)
    return report


def export_main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results export``."""
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results export",
        description="Write a chapter's cached results (one profile, one replicate) into one "
                    "bundle with a manifest of checksums, to publish or to import elsewhere.")
    parser.add_argument("figure", metavar="FIG", help=", ".join(profiles.figures()))
    parser.add_argument("--profile", default="quick", help="smoke, quick (default) or paper")
    parser.add_argument("--replicate", type=int, default=0, help="default 0")
    parser.add_argument("--checkpoints", action="store_true",
                        help="include the checkpoints (of unfinished jobs too: they resume "
                             "after an import)")
    parser.add_argument("--partial", action="store_true",
                        help="export the entries computed so far when some are not (the "
                             "manifest says the bundle is partial); without it such an export "
                             "is refused")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the bundle to write")
    args = parser.parse_args(argv)
    try:
        manifest = export(args.figure, args.profile, args.output, args.replicate,
                          args.checkpoints, partial=args.partial)
    except (profiles.ParameterError, BundleError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    digest = sha256(Path(args.output).read_bytes())
    print(f"{args.output}: {len(manifest['files'])} files of {args.figure} ({args.profile}, "
          f"replicate {args.replicate}); contents digest {manifest['contents_sha256']}; archive "
          f"sha256 {digest}")
    if manifest["partial"]:
        print("partial bundle: " + _missing_message(args.figure, args.profile,
                                                    manifest["missing"], manifest["entries"]))
    return 0


def import_main(argv: list[str] | None = None) -> int:
    """``python -m i2o.results import``."""
    parser = argparse.ArgumentParser(
        prog="python -m i2o.results import",
        description="Verify a bundle, then write its entries into the results cache "
                    "(I2O_RESULTS_DIR); nothing is written when a check fails.")
    parser.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    try:
        report = import_bundle(args.bundle)
    except BundleError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report.describe())
    return 0
