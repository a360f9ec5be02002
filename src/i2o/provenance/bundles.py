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

``python -m i2o.results import FILE`` checks everything before it writes anything
(:func:`import_bundle`): it streams the archive once, member by member, so that memory holds the
manifest and one block of a member (and, while an entry is checked, its arrays) whatever the
archive's size; checks the manifest (format,
figure, at least one file, whole entries, the contents digest) and each member against it
(a plain relative path inside the figure's entries, never a lock folder or a dot name, a regular
file, not twice, listed, its size, never reading more than listed, its checksum), staging the
bytes in a folder inside the results folder; then checks that each entry is whole and belongs
where it lands (its ``meta.json`` records the key its folder is named by; the cache reads it).
Only then are the staged entries renamed into place, each under its entry's lock; an entry
already there with the same files is skipped (a second import of the same archive writes
nothing) and a different valid one refuses the bundle, never overwritten. A refusal is one line
naming the member and the reason (exit status 2), and leaves the cache as it was. The report
says which entries match the current code's keys (a notebook reads them) and which belong to
another version of the code (written, named, never used by this code).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import lzma
import os
import re
import secrets
import shutil
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from filelock import FileLock, Timeout

from i2o.base import lineage, runtime
from i2o.base.digests import sha256
from i2o.compute import cache_entries, door, profiles
from i2o.compute.cache_locks import LOCKS, holding
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


#: The largest manifest an import reads (held in memory whole; a chapter's lists a few hundred
#: bytes per file).
MANIFEST_LIMIT = 64 << 20
#: Bytes copied at a time from a member into the staging folder.
CHUNK = 1 << 20
#: A folder of the cache a bundle may fill: an entry, ``<job>-<20 hex digits of its key>``, or
#: that entry's checkpoints, ``<job>-<key>.ckpt``.
FOLDER = re.compile(r"(?P<entry>(?P<name>[^/]+)-(?P<key>[0-9a-f]{20}))(?P<ckpt>\.ckpt)?")
SHA256 = re.compile(r"[0-9a-f]{64}")
#: The start of the name of an import's staging folder in the results folder (a dot name, as
#: every temporary of the cache), and the lock its import holds inside it while it runs.
STAGING, HELD = ".import-", "held.lock"


@dataclass(frozen=True)
class _Listed:
    """A file as the manifest lists it."""

    path: str
    size: int
    sha256: str


def _refusal(where: str, reason: str) -> BundleError:
    """One line: what is refused (the bundle, and the member or the manifest) and why."""
    return BundleError(f"{where} {reason}; nothing was written".replace("\n", " "))


def _path_problem(name: str) -> str | None:
    """Why a bundle may not carry a file named ``name`` into the cache (``None``: it may)."""
    path = PurePosixPath(name)
    if name.startswith("/") or path.is_absolute():
        return "is an absolute path, outside the cache"
    if ".." in path.parts:
        return "leaves the cache by '..', outside the cache"
    if not path.parts or str(path) != name:
        return "is not a plain relative path (empty, '.', '//' or a trailing '/')"
    if LOCKS in path.parts:
        return f"is inside a lock folder ({LOCKS}): an import never touches the cache's locks"
    if any(part.startswith(".") for part in path.parts):
        return "has a dot name (the cache's locks and temporaries have them, no entry's file does)"
    return None


def _layout_problem(parts: tuple[str, ...], figure: str) -> str | None:
    """Why ``parts`` is not a file of an entry of ``figure`` or of its checkpoints."""
    if parts[0] != figure:
        return f"is not an entry of {figure!r}"
    if len(parts) < 3 or (match := FOLDER.fullmatch(parts[1])) is None:
        return f"is not an entry of {figure!r} (<figure>/<job>-<20 hex digits of its key>/<file>)"
    if match["ckpt"] is None and (len(parts) != 3 or parts[2] not in ENTRY_FILES):
        return f"is not one of an entry's files ({', '.join(ENTRY_FILES)})"
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _manifest(data: bytes, label: str) -> tuple[dict[str, Any], dict[str, _Listed]]:
    """The manifest and its files by path, every check of :func:`import_bundle` on the manifest
    passed: what the members are then checked against."""
    where = f"{label}: {MANIFEST}"
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise _refusal(where, f"is not JSON ({error})") from error
    if not isinstance(manifest, dict):
        raise _refusal(where, f"is not a JSON object but {type(manifest).__name__}")
    if manifest.get("format") != FORMAT:
        raise _refusal(where, f"says bundle format {manifest.get('format')!r}, this code reads "
                              f"{FORMAT}")
    figure = manifest.get("figure")
    if not isinstance(figure, str) or figure not in profiles.figures():
        raise _refusal(where, f"names an unknown figure {figure!r}")
    if not isinstance(manifest.get("profile"), str):
        raise _refusal(where, f"names no profile ({manifest.get('profile')!r})")
    if not _whole(manifest.setdefault("replicate", 0)):
        raise _refusal(where, f"names replicate {manifest['replicate']!r}, not a whole number")
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        raise _refusal(where, "lists no files: an empty bundle is refused")
    listed: dict[str, _Listed] = {}
    for number, item in enumerate(files):
        if not (isinstance(item, dict) and isinstance(item.get("path"), str)):
            raise _refusal(where, f"lists as file {number} {repr(item)[:120]}, not a path with a "
                                  "size and a SHA-256")
        path = item["path"]
        problem = _path_problem(path) or _layout_problem(PurePosixPath(path).parts, figure)
        if not problem and not (_whole(item.get("size")) and isinstance(item.get("sha256"), str)
                                and SHA256.fullmatch(item["sha256"])):
            problem = (f"has the size {item.get('size')!r} and the SHA-256 "
                       f"{repr(item.get('sha256'))[:80]}: not a byte count and 64 hex digits")
        if problem:
            raise _refusal(f"{label}: {path!r}", f"(listed in the manifest) {problem}")
        if path in listed:
            raise _refusal(f"{label}: {path!r}", "is listed twice in the manifest")
        listed[path] = _Listed(path, item["size"], item["sha256"])
    folders = {str(parent) for path in listed for parent in PurePosixPath(path).parents}
    if clash := sorted(set(listed) & folders):
        raise _refusal(f"{label}: {clash[0]!r}", "is listed both as a file and as a folder")
    carried: dict[str, set[str]] = {}
    for path in listed:
        parts = PurePosixPath(path).parts
        if not parts[1].endswith(".ckpt"):
            carried.setdefault(parts[1], set()).add(parts[2])
    for folder, names in sorted(carried.items()):
        if names != set(ENTRY_FILES):
            raise _refusal(f"{label}: {figure + '/' + folder!r}",
                           f"carries only {', '.join(sorted(names))} of an entry's files "
                           f"({', '.join(ENTRY_FILES)}): not a whole entry")
    stated = manifest.get("contents_sha256")
    if stated is not None and stated != contents_digest(files):
        raise _refusal(where, f"states the contents digest {str(stated)[:16]}…, which does not "
                              "match its files (tampered manifest)")
    return manifest, listed


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"a hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    if member.isdir():
        return "a folder"
    if member.issparse():
        return "a sparse file"
    return f"of tar type {member.type!r}"


#: What a damaged or truncated archive raises while it is read (gzip's and tarfile's own errors
#: are OSError and TarError).
_READ_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


def _next(archive: tarfile.TarFile, label: str, after: str) -> tarfile.TarInfo | None:
    """The archive's next member's header (``None`` at its end)."""
    try:
        return archive.next()
    except _READ_ERRORS as error:
        raise _refusal(f"{label}:", f"is damaged after {after} (truncated or not a tar archive: "
                                    f"{error})") from error


def _copy(source: IO[bytes], target: Path, item: _Listed, where: str) -> None:
    """A member's bytes into ``target``, a block at a time, checked against its listing: never
    more than the listed size is read (one byte more refuses it), then its SHA-256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(target, "xb") as out:
        while True:
            try:
                block = source.read(min(CHUNK, item.size - size + 1))
            except _READ_ERRORS as error:
                raise _refusal(where, f"is cut short or damaged in the archive (truncated: "
                                      f"{error})") from error
            if not block:
                break
            size += len(block)
            if size > item.size:
                raise _refusal(where, f"holds more than the manifest's {item.size} bytes "
                                      "(refused while reading it)")
            digest.update(block)
            out.write(block)
    if size != item.size:
        raise _refusal(where, f"holds {size} of the manifest's {item.size} bytes (truncated)")
    if digest.hexdigest() != item.sha256:
        raise _refusal(where, "does not match its checksum in the manifest (tampered or "
                              "damaged)")


def _stream_into(stream: IO[bytes], label: str,
                 files: Path) -> tuple[dict[str, Any], dict[str, _Listed]]:
    """Read the archive front to back, once, member by member: the manifest first (checked),
    then each member's header checked against it before its bytes are read, and its bytes
    copied under ``files`` (a staging folder) with their size and checksum checked; every file
    the manifest lists must have come. Memory holds the manifest and one block."""
    try:
        archive = tarfile.open(fileobj=stream, mode="r|*")  # plain, .gz or .xz, streamed
    except _READ_ERRORS as error:
        raise _refusal(f"{label}:", f"is not a readable bundle (truncated or not a tar archive: "
                                    f"{error})") from error
    with archive:
        first = _next(archive, label, "its start")
        if first is None or first.name != MANIFEST:
            found = "nothing" if first is None else repr(first.name)
            raise _refusal(f"{label}:", f"starts with {found}, not {MANIFEST} (an exported bundle "
                                        "starts with its manifest)")
        if not first.isfile() or first.size > MANIFEST_LIMIT:
            raise _refusal(f"{label}: {MANIFEST}", f"is {_kind(first)} of {first.size} bytes, "
                           f"not a file of at most {MANIFEST_LIMIT} bytes")
        source = archive.extractfile(first)
        assert source is not None  # a regular file's
        try:
            data = source.read(first.size)
        except _READ_ERRORS as error:
            raise _refusal(f"{label}: {MANIFEST}", f"is cut short or damaged (truncated: "
                                                   f"{error})") from error
        manifest, listed = _manifest(data, label)
        seen: set[str] = set()
        after = MANIFEST
        while (member := _next(archive, label, repr(after))) is not None:
            name, where = member.name, f"{label}: {member.name!r}"
            if problem := _path_problem(name):
                raise _refusal(where, problem)
            if not member.isfile() or member.issparse():
                raise _refusal(where, f"is {_kind(member)}, not a regular file")
            if name == MANIFEST or name in seen:
                raise _refusal(where, "is in the archive twice")
            if name not in listed:
                raise _refusal(where, "is not listed in the manifest")
            if member.size != listed[name].size:
                raise _refusal(where, f"is {member.size} bytes in the archive, the manifest says "
                                      f"{listed[name].size} (refused before reading it)")
            source = archive.extractfile(member)
            assert source is not None
            _copy(source, files / name, listed[name], where)
            seen.add(name)
            after = name
    if absent := [path for path in listed if path not in seen]:
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        raise _refusal(f"{label}: {absent[0]!r}", f"is listed in the manifest but absent from the "
                                                  f"archive{more}")
    return manifest, listed


def _npz_problem(path: Path) -> str | None:
    """Why ``path`` is not an array archive as :func:`numpy.savez` writes one (every array
    stored uncompressed, so that reading it takes no more memory than its size)."""
    try:
        with zipfile.ZipFile(path) as arrays:
            infos = arrays.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        return f"is not an array archive ({error})"
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            return (f"holds {info.filename!r} compressed ({info.compress_size} bytes unpacking "
                    f"to {info.file_size}); the cache stores its arrays uncompressed")
    return None


def _check_entry(staged: Path, label: str, figure: str, folder: re.Match[str]) -> None:
    """The entry staged at ``staged`` is whole and belongs in ``folder``: its ``meta.json``
    records the key the folder is named by (:func:`i2o.compute.cache_entries.recorded_key`) and
    the cache reads it (checksum of its arrays, every array readable)."""
    group = f"{figure}/{folder[0]}"
    where = f"{label}: {group!r}"
    meta_where = f"{label}: {group + '/' + cache_entries.META!r}"
    try:
        meta = json.loads((staged / cache_entries.META).read_bytes())
    except (ValueError, RecursionError) as error:
        raise _refusal(meta_where, f"is not JSON ({error})") from error
    if not isinstance(meta, dict):
        raise _refusal(meta_where, f"is not a JSON object but {type(meta).__name__}")
    try:
        claimed = cache_entries.recorded_key(meta)[:20]
    except (ValueError, RecursionError) as error:
        raise _refusal(meta_where, f"does not record the entry's key: {error}") from error
    if (meta["figure"], meta["name"]) != (figure, folder["name"]):
        raise _refusal(where, f"holds the job {meta['figure'] + '/' + meta['name']!r} (its "
                              f"{cache_entries.META}), not {figure + '/' + folder['name']!r}: "
                              "it does not belong there")
    if claimed != folder["key"]:
        raise _refusal(where, f"is named by the key {folder['key']} but its "
                              f"{cache_entries.META} records the key {claimed}: it does not "
                              "belong there")
    if sha256(staged / cache_entries.ARRAYS) != meta.get("sha256"):
        raise _refusal(where, f"is not a whole entry: its {cache_entries.ARRAYS} does not match "
                              f"the SHA-256 its {cache_entries.META} records")
    if problem := _npz_problem(staged / cache_entries.ARRAYS):
        raise _refusal(f"{label}: {group + '/' + cache_entries.ARRAYS!r}", problem)
    try:
        cache_entries.load(staged)
    except cache_entries.CorruptEntry as error:
        reason = str(error).replace(f"{staged}: ", "")
        raise _refusal(where, f"is not a whole entry: {reason}") from error


def _files_of(folder: Path) -> dict[str, Path]:
    return {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*"))
            if path.is_file() or path.is_symlink()}


def _same(target: Path, staged: Path) -> bool:
    """Whether the cache folder ``target`` holds exactly the files staged, byte for byte."""
    theirs, ours = _files_of(target), _files_of(staged)
    return theirs.keys() == ours.keys() and all(
        not theirs[name].is_symlink() and sha256(theirs[name]) == sha256(ours[name])
        for name in ours)


def _state(target: Path, staged: Path, where: str) -> str:
    """What importing ``staged`` into ``target`` does: ``new`` (nothing there, or an empty
    checkpoint folder), ``present`` (the same files there: nothing to write) or ``replace`` (a
    corrupted entry there, which the cache would discard on its next read); a different valid
    entry, or other checkpoints, are refused."""
    if not target.is_symlink() and not target.exists():
        return "new"
    if target.is_symlink() or not target.is_dir():
        raise _refusal(where, "is in the cache as something other than a folder: not "
                              "overwritten")
    if _same(target, staged):
        return "present"
    if target.name.endswith(".ckpt"):
        if not any(target.iterdir()):
            return "new"  # as checkpoint_dir leaves it before a job's first checkpoint
        raise _refusal(where, "differs from the checkpoints already in the cache: not "
                              "overwritten (remove them to replace them)")
    try:
        cache_entries.load(target)
    except cache_entries.CorruptEntry:
        return "replace"
    raise _refusal(where, "differs from the valid entry already in the cache under its key: not "
                          "overwritten (remove that entry to replace it)")


def _move_in(moves: list[tuple[str, Path, str]], root: Path, aside: Path) -> list[str]:
    """Rename each staged folder into the cache, under its entry's lock (as every writer of the
    cache holds it), the state of its target checked again under the lock; the folders already
    there are returned. Should one fail, those moved in are moved out again (and a corrupted
    entry replaced is put back) before the error goes on."""
    present, done = [], []
    try:
        for group, staged, where in moves:
            target = root / group
            target.parent.mkdir(exist_ok=True)
            with holding(target, group):
                state = _state(target, staged, where)  # another process may have written it
                if state == "present":
                    present.append(group)
                    continue
                old = None
                if state == "replace":
                    old = aside / group
                    old.parent.mkdir(parents=True, exist_ok=True)
                    os.rename(target, old)
                try:
                    os.rename(staged, target)
                except BaseException:
                    if old is not None:
                        os.rename(old, target)
                    raise
                done.append((group, staged, old))
    except BaseException:
        for group, staged, old in reversed(done):
            with holding(root / group, group), contextlib.suppress(OSError):
                os.rename(root / group, staged)
                if old is not None:
                    os.rename(old, root / group)
        raise
    return present


def _sweep_stale_staging(root: Path, ours: Path) -> None:
    """Remove the staging folders of imports killed before they ended (their lock is free)."""
    for folder in root.glob(f"{STAGING}*"):
        if folder == ours or not (folder / HELD).is_file():
            continue
        lock = FileLock(str(folder / HELD))
        try:
            lock.acquire(blocking=False)
        except Timeout:
            continue  # its import is running
        try:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            lock.release()


def _expected(manifest: Mapping[str, Any]) -> set[str]:
    """The folder names of the bundle's chapter's entries under this code's keys (none when
    this code has no such profile or replicate)."""
    try:
        return set(_entries(manifest["figure"], manifest["profile"], manifest["replicate"]))
    except profiles.ParameterError:
        return set()


def _topmost_missing(path: Path) -> Path | None:
    top = None
    while not path.exists() and path != path.parent:
        top, path = path, path.parent
    return top


def import_bundle(bundle: Path | IO[bytes]) -> Report:
    """Check every member of ``bundle`` (a path, or a binary file read once front to back), then
    move its entries into the results cache; the report names those that match this code's keys
    and those that do not.

    The archive is streamed: the manifest comes first and is checked (format, a known figure,
    at least one file, every path an entry's file or checkpoint of that figure, no lock folder
    or dot name, no path twice, whole entries, the contents digest); each member's header is
    checked before its bytes are read (a plain relative path in the cache, a regular file, not
    seen before, listed, of the listed size), its bytes are copied a block at a time into a
    staging folder inside the results folder (``.import-…``, same file system) and checked
    (never more than the listed size is read; SHA-256); every listed file must come. Each
    entry staged must then be whole and belong where it lands: its ``meta.json`` records the
    key its folder is named by (:func:`i2o.compute.cache_entries.recorded_key`), its arrays are
    stored uncompressed and the cache reads them (checksum, every array). Checkpoints travel
    only with their entry or for an entry of this code's chapter (a key that can be checked).
    An entry already in the cache with the same files is skipped; a different valid one, or
    other checkpoints, refuse the bundle (nothing is overwritten); a corrupted one, which the
    cache would discard, is replaced. Only when all of that passed is each staged folder renamed
    into place under its entry's lock (those moved are moved out again if one fails). A
    refusal is a :class:`BundleError` of one line naming the member and the reason; whatever
    fails, the cache is as it was and the staging folder is removed."""
    if not isinstance(bundle, str | os.PathLike):
        return _import(bundle, getattr(bundle, "name", "the bundle"))
    try:
        stream = open(bundle, "rb")  # noqa: SIM115  closed below
    except OSError as error:
        raise BundleError(f"{bundle} cannot be read: {error.strerror}") from error
    with stream:
        return _import(stream, str(bundle))


def _import(stream: IO[bytes], label: str) -> Report:
    root = cache_entries.results_dir()
    made = _topmost_missing(root)
    staging, held, finished = None, None, False
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=root))
        held = FileLock(str(staging / HELD))  # while held, no other import removes the folder
        held.acquire()
        files = staging / "files"
        manifest, listed = _stream_into(stream, label, files)
        figure = manifest["figure"]
        expected = _expected(manifest)
        folders = sorted({PurePosixPath(path).parts[1] for path in listed})
        entries = {name for name in folders if not name.endswith(".ckpt")}
        moves = []
        for name in folders:
            match = FOLDER.fullmatch(name)
            assert match is not None  # _manifest checked every path
            where = f"{label}: {figure + '/' + name!r}"
            staged = files / figure / name
            if match["ckpt"] is None:
                _check_entry(staged, label, figure, match)
            elif match["entry"] not in entries | expected:
                raise _refusal(where, "holds the checkpoints of an entry neither in the bundle "
                                      "nor of this code's chapter: their key cannot be checked")
            moves.append((f"{figure}/{name}", staged, where))
        states = {group: _state(root / group, staged, where) for group, staged, where in moves}
        _sweep_stale_staging(root, staging)
        present = set(_move_in([move for move in moves if states[move[0]] != "present"], root,
                               staging / "aside"))
        present |= {group for group, state in states.items() if state == "present"}
        finished = True
    finally:
        if held is not None:
            held.release()
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if not finished and made is not None:  # the results folder this import made
            for folder in [root, *root.parents]:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                if folder == made:
                    break
    report = Report(figure, contents_digest(manifest["files"]))
    for group, _, _ in moves:
        name = PurePosixPath(group).name
        (report.present if group in present else report.written).append(name)
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
        description="Check a bundle member by member against its manifest and each entry "
                    "against its key, then move its entries into the results cache "
                    "(I2O_RESULTS_DIR); when a check fails, one line says which member and why "
                    "and nothing is written.")
    parser.add_argument("bundle", type=Path)
    args = parser.parse_args(argv)
    try:
        report = import_bundle(args.bundle)
    except BundleError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:  # a results folder that cannot be written, …
        print(f"error: {args.bundle} was not imported, the cache is as it was: "
              f"{error}".replace("\n", " "), file=sys.stderr)
        return 2
    print(report.describe())
    return 0
