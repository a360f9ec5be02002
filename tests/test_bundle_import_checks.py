"""``python -m i2o.results import`` checks before it writes: every hostile bundle (built with the
project's own export, then altered, or written by hand) is refused in one line naming the member
and the reason, and the results folder is the same, byte for byte, before and after (a digest of
every folder and file under it); a valid bundle imports and the cache then reads its entries; a
member larger than its manifest says is refused without being read."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from i2o.base.digests import sha256
from i2o.compute import cache_entries, cache_key, door
from i2o.compute.cache_locks import LOCKS
from i2o.provenance import __main__ as commands
from i2o.provenance import bundles, fingerprint

FIGURE, PROFILE = "affine", "smoke"
MB = 1 << 20


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Any]:
    """The affine chapter (smoke) computed once into its own cache and exported there: the
    cache, the bundle, its manifest and its members (manifest first, as the export writes)."""
    base = tmp_path_factory.mktemp("theirs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("I2O_RESULTS_DIR", str(base / "results"))
        door.enter(FIGURE, PROFILE).collect()
        manifest = bundles.export(FIGURE, PROFILE, base / "bundle.tar")
    with tarfile.open(base / "bundle.tar") as archive:
        members = {m.name: archive.extractfile(m).read() for m in archive.getmembers()}
    return {"cache": base / "results", "bundle": base / "bundle.tar", "manifest": manifest,
            "members": members}


@pytest.fixture
def ours(exported, tmp_path, monkeypatch) -> Path:
    """This machine's results folder: one entry of the bundle already there (the first), the
    figure's lock folder as the computation left it, and another figure's entry."""
    root = tmp_path / "ours"
    theirs = exported["cache"] / FIGURE
    first = _folders(exported["manifest"])[0]
    shutil.copytree(theirs / first, root / FIGURE / first)
    shutil.copytree(theirs / LOCKS, root / FIGURE / LOCKS)
    (root / "stability" / "other-0123456789abcdef0123").mkdir(parents=True)
    (root / "stability" / "other-0123456789abcdef0123" / "meta.json").write_text("{}")
    monkeypatch.setenv("I2O_RESULTS_DIR", str(root))
    return root


def _folders(manifest: dict) -> list[str]:
    """The bundle's entry folders, in the manifest's order."""
    return list(dict.fromkeys(f["path"].split("/")[1] for f in manifest["files"]))


def digest(root: Path) -> str:
    """SHA-256 of every folder's and file's path under ``root`` and of every file's bytes (a
    link's target)."""
    total = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        here = Path(folder)
        total.update(f"folder {here.relative_to(root).as_posix()}\0".encode())
        for name in sorted(files):
            path = here / name
            total.update(f"file {path.relative_to(root).as_posix()}\0".encode())
            total.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    return total.hexdigest()


def listing(members: dict[str, bytes], manifest: dict) -> dict:
    """``manifest`` listing exactly ``members`` (sizes, checksums, contents digest): a hostile
    member is then refused for what it is, not for a manifest that disagrees."""
    files = [{"path": name, "size": len(data), "sha256": sha256(data)}
             for name, data in members.items() if name != bundles.MANIFEST]
    return {**manifest, "files": files, "contents_sha256": bundles.contents_digest(files)}


Member = tuple[tarfile.TarInfo, bytes | None]


def regular(name: str, data: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, target: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def write_tar(path: Path, manifest: dict | bytes, members: list[Member],
              mode: str = "w") -> Path:
    """A tar archive: the manifest first, then ``members`` as given (any type, any order,
    repeated)."""
    raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with tarfile.open(path, mode) as archive:
        for info, data in [regular(bundles.MANIFEST, raw), *members]:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def files_of(exported: dict) -> dict[str, bytes]:
    return {name: data for name, data in exported["members"].items()
            if name != bundles.MANIFEST}


def as_members(files: dict[str, bytes]) -> list[Member]:
    return [regular(name, data) for name, data in files.items()]


# Each hostile bundle: (what it is, how it is built from the export, what the refusal says).
# A builder gets the export and a folder to write in and returns the bundle's path.
Builder = Callable[[dict, Path], Path]


def _with_member(extra: Member, listed: bool = False) -> Builder:
    """The exported files plus ``extra`` (listed in the manifest, or not)."""
    def build(exported: dict, where: Path) -> Path:
        files = files_of(exported)
        manifest = exported["manifest"]
        if listed:
            info, data = extra
            manifest = listing({**files, info.name: data or b""}, manifest)
        return write_tar(where / "bundle.tar", manifest, [*as_members(files), extra])
    return build


def _replacing(path_of: Callable[[dict], str], make: Callable[[str], Member]) -> Builder:
    """The export with one listed file's member replaced by ``make(name)``."""
    def build(exported: dict, where: Path) -> Path:
        files = files_of(exported)
        name = path_of(exported["manifest"])
        members = [make(n) if n == name else regular(n, d) for n, d in files.items()]
        return write_tar(where / "bundle.tar", exported["manifest"], members)
    return build


def _first_arrays(manifest: dict) -> str:
    return f"{FIGURE}/{_folders(manifest)[0]}/arrays.npz"


def _last_entry_arrays(manifest: dict) -> str:
    return f"{FIGURE}/{_folders(manifest)[-1]}/arrays.npz"


def _edited(edit: Callable[[dict[str, bytes], dict], tuple[dict[str, bytes], dict]]) -> Builder:
    """The export's files and manifest changed by ``edit`` (files by path, manifest)."""
    def build(exported: dict, where: Path) -> Path:
        files, manifest = edit(dict(files_of(exported)), json.loads(json.dumps(
            exported["manifest"])))
        return write_tar(where / "bundle.tar", manifest, as_members(files))
    return build


def _moved_to_another_key(files: dict[str, bytes], manifest: dict):
    """The last entry's folder renamed to another key, its meta.json left as it is."""
    folder = _folders(manifest)[-1]
    other = folder[:-1] + ("0" if folder[-1] != "0" else "1")
    files = {name.replace(folder, other): data for name, data in files.items()}
    return files, listing(files, manifest)


def _swapped(files: dict[str, bytes], manifest: dict):
    """Two entries' files swapped between their folders (each claims the other's key)."""
    one, two = _folders(manifest)[-2:]
    swap = {one: two, two: one}
    moved = {}
    for name, data in files.items():
        parts = name.split("/")
        parts[1] = swap.get(parts[1], parts[1])
        moved["/".join(parts)] = data
    return moved, listing(moved, manifest)


def _wrong_digest(files: dict[str, bytes], manifest: dict):
    last = manifest["files"][-1]
    last["sha256"] = ("0" if last["sha256"][0] != "0" else "1") + last["sha256"][1:]
    manifest["contents_sha256"] = bundles.contents_digest(manifest["files"])
    return files, manifest


def _listed_smaller(files: dict[str, bytes], manifest: dict):
    """The manifest says one file is a byte shorter (and its checksum is of those bytes)."""
    name = _last_entry_arrays(manifest)
    relisted = listing({**files, name: files[name][:-1]}, manifest)
    return files, relisted


def _arrays_changed(files: dict[str, bytes], manifest: dict):
    """One entry's arrays changed and relisted: the manifest agrees, its meta.json does not."""
    name = _last_entry_arrays(manifest)
    files[name] = files[name][:-1] + bytes([files[name][-1] ^ 1])
    return files, listing(files, manifest)


def _compressed_arrays(files: dict[str, bytes], manifest: dict):
    """One entry's arrays deflated (which np.savez never writes: what a zip bomb needs), its
    meta.json's checksum updated so that only the compression is wrong."""
    name = _last_entry_arrays(manifest)
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(files[name])) as plain, \
            zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as deflated:
        for info in plain.infolist():
            deflated.writestr(info.filename, plain.read(info))
    files[name] = packed.getvalue()
    meta_name = name.replace("arrays.npz", "meta.json")
    meta = json.loads(files[meta_name])
    meta["sha256"] = sha256(files[name])
    files[meta_name] = json.dumps(meta).encode()
    return files, listing(files, manifest)


def _meta_without(field: str):
    """One entry's meta.json without ``field`` (relisted: only the record is wrong)."""
    def edit(files: dict[str, bytes], manifest: dict):
        name = _last_entry_arrays(manifest).replace("arrays.npz", "meta.json")
        meta = json.loads(files[name])
        del meta[field]
        files[name] = json.dumps(meta).encode()
        return files, listing(files, manifest)
    return edit


def _half_an_entry(files: dict[str, bytes], manifest: dict):
    del files[_last_entry_arrays(manifest)]
    return files, listing(files, manifest)


def _missing(files: dict[str, bytes], manifest: dict):
    """The manifest lists every file; the archive leaves one out."""
    del files[_last_entry_arrays(manifest)]
    return files, manifest


def _stray_checkpoint(files: dict[str, bytes], manifest: dict):
    """Checkpoints of an entry that is neither in the bundle nor one of this code's."""
    files[f"{FIGURE}/unknown-0123456789abcdef0123.ckpt/last.pt"] = b"weights"
    return files, listing(files, manifest)


def _empty(files: dict[str, bytes], manifest: dict):
    return {}, {**manifest, "files": [], "contents_sha256": bundles.contents_digest([])}


def _duplicated(exported: dict, where: Path) -> Path:
    files = files_of(exported)
    name = _last_entry_arrays(exported["manifest"])
    return write_tar(where / "bundle.tar", exported["manifest"],
                     [*as_members(files), regular(name, files[name])])


def _manifest_not_first(exported: dict, where: Path) -> Path:
    with tarfile.open(where / "bundle.tar", "w") as archive:
        for info, data in [*as_members(files_of(exported)),
                           regular(bundles.MANIFEST, json.dumps(exported["manifest"]).encode())]:
            archive.addfile(info, io.BytesIO(data))
    return where / "bundle.tar"


def _truncated_gzip(exported: dict, where: Path) -> Path:
    whole = write_tar(where / "whole.tar.gz", exported["manifest"],
                      as_members(files_of(exported)), mode="w:gz").read_bytes()
    (where / "bundle.tar.gz").write_bytes(whole[: len(whole) * 2 // 3])
    return where / "bundle.tar.gz"


def _not_gzip_inside(exported: dict, where: Path) -> Path:
    """A gzip header then garbage."""
    (where / "bundle.tar.gz").write_bytes(gzip.compress(b"x" * 4000)[:30] + b"\x00" * 600)
    return where / "bundle.tar.gz"


def _manifest_bytes(raw: bytes) -> Builder:
    def build(exported: dict, where: Path) -> Path:
        return write_tar(where / "bundle.tar", raw, as_members(files_of(exported)))
    return build


def _manifest_edit(change: Callable[[dict], None]) -> Builder:
    def build(exported: dict, where: Path) -> Path:
        manifest = json.loads(json.dumps(exported["manifest"]))
        change(manifest)
        return write_tar(where / "bundle.tar", manifest, as_members(files_of(exported)))
    return build


LOCK_MEMBER = f"{FIGURE}/{LOCKS}/figure-g3-09f366c0b4cf635dec09.lock"

HOSTILE: dict[str, tuple[Builder, str, str]] = {
    "traversal": (_with_member(regular(f"{FIGURE}/../../escaped", b"x")),
                  f"'{FIGURE}/../../escaped'", "leaves the cache by '..'"),
    "traversal listed": (_with_member(regular("../escaped", b"x"), listed=True),
                         "'../escaped'", r"\(listed in the manifest\) leaves the cache"),
    "absolute path": (_with_member(regular("/tmp/i2o-escaped", b"x")),
                      "'/tmp/i2o-escaped'", "is an absolute path"),
    "not normalised": (_with_member(regular(f"./{FIGURE}/x", b"x")),
                       f"'./{FIGURE}/x'", "not a plain relative path"),
    "symlink": (_replacing(_first_arrays, lambda n: special(n, tarfile.SYMTYPE, "/etc/passwd")),
                "arrays.npz'", "is a symbolic link \\(to '/etc/passwd'\\), not a regular file"),
    "hardlink": (_replacing(_first_arrays, lambda n: special(n, tarfile.LNKTYPE, "etc/passwd")),
                 "arrays.npz'", "is a hard link \\(to 'etc/passwd'\\), not a regular file"),
    "device": (_replacing(_first_arrays, lambda n: special(n, tarfile.CHRTYPE)),
               "arrays.npz'", "is a device, not a regular file"),
    "folder member": (_replacing(_first_arrays, lambda n: special(n, tarfile.DIRTYPE)),
                      "arrays.npz'", "is a folder, not a regular file"),
    "oversized member": (_edited(_listed_smaller), "arrays.npz'",
                         r"is \d+ bytes in the archive, the manifest says \d+ \(refused before "
                         "reading it\\)"),
    "wrong digest": (_edited(_wrong_digest), "meta.json'",
                     "does not match its checksum in the manifest"),
    "member claiming another key": (_edited(_moved_to_another_key), f"'{FIGURE}/",
                                    "is named by the key [0-9a-f]{20} but its meta.json records "
                                    "the key [0-9a-f]{20}: it does not belong there"),
    "entries swapped": (_edited(_swapped), f"'{FIGURE}/", "does not belong there"),
    "arrays not as recorded": (_edited(_arrays_changed), f"'{FIGURE}/",
                               "is not a whole entry: its arrays.npz does not match the "
                               "SHA-256 its meta.json records"),
    "record without its parameters": (_edited(_meta_without("params")), "meta.json'",
                                      "does not record the entry's key: its params is None"),
    "record without its checksum": (_edited(_meta_without("sha256")), f"'{FIGURE}/",
                                    "is not a whole entry: its arrays.npz does not match"),
    "compressed arrays": (_edited(_compressed_arrays), "arrays.npz'",
                          "compressed .* the cache stores its arrays uncompressed"),
    "half an entry": (_edited(_half_an_entry), f"'{FIGURE}/",
                      r"carries only meta.json of an entry's files \(arrays.npz, meta.json\): "
                      "not a whole entry"),
    "lock-folder member": (_with_member(regular(LOCK_MEMBER, b""), listed=True),
                           repr(LOCK_MEMBER), r"is inside a lock folder \(\.locks\)"),
    "lock-folder member, unlisted": (_with_member(regular(LOCK_MEMBER, b"")), repr(LOCK_MEMBER),
                                     "is inside a lock folder"),
    "dot name (a staging folder)": (_with_member(regular(".import-1-x/files/a", b"x")),
                                    "'.import-1-x/files/a'", "has a dot name"),
    "stray checkpoint": (_edited(_stray_checkpoint), "unknown-0123456789abcdef0123.ckpt'",
                         "checkpoints of an entry neither in the bundle nor of this code's"),
    "empty manifest": (_edited(_empty), "manifest.json", "lists no files: an empty bundle"),
    "missing member": (_edited(_missing), "arrays.npz'",
                       "is listed in the manifest but absent from the archive"),
    "extra member": (_with_member(regular(f"{FIGURE}/x-0123456789abcdef0123/arrays.npz", b"x")),
                     "'affine/x-0123456789abcdef0123/arrays.npz'", "is not listed in the "
                     "manifest"),
    "duplicate member": (_duplicated, "arrays.npz'", "is in the archive twice"),
    "manifest not first": (_manifest_not_first, "", "starts with 'affine/.*', not manifest.json"),
    "truncated gzip": (_truncated_gzip, "", "truncated"),
    "gzip of garbage": (_not_gzip_inside, "bundle.tar.gz", "not a readable bundle|truncated"),
    "manifest not JSON": (_manifest_bytes(b'{"format": 1, "files": ['), "manifest.json",
                          "is not JSON"),
    "manifest nested too deep": (_manifest_bytes(b"[" * 100_000), "manifest.json",
                                 "is not JSON"),
    "manifest not an object": (_manifest_bytes(b"[1, 2]"), "manifest.json",
                               "is not a JSON object but list"),
    "manifest file malformed": (_manifest_edit(lambda m: m["files"].append({"path": 3})),
                                "manifest.json", "not a path with a size and a SHA-256"),
    "manifest size not a number": (_manifest_edit(
        lambda m: m["files"][0].update(size="4062")), "arrays.npz'",
        "has the size '4062' .*not a byte count"),
    "manifest lists a file twice": (_manifest_edit(lambda m: m["files"].append(m["files"][0])),
                                    "arrays.npz'", "is listed twice in the manifest"),
    "manifest unknown figure": (_manifest_edit(lambda m: m.update(figure="nope")),
                                "manifest.json", "names an unknown figure 'nope'"),
    "manifest other figure": (_manifest_edit(lambda m: m.update(figure="stability")),
                              "arrays.npz'", "is not an entry of 'stability'"),
    "manifest newer format": (_manifest_edit(lambda m: m.update(format=bundles.FORMAT + 1)),
                              "manifest.json", "bundle format"),
    "manifest forged digest": (_manifest_edit(lambda m: m.update(contents_sha256="0" * 64)),
                               "manifest.json", "contents digest"),
}


def run_import(bundle: Path, capsys) -> tuple[int, str, str]:
    status = commands.main(["import", str(bundle)])
    said = capsys.readouterr()
    return status, said.out, said.err


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_bundle_is_refused_in_one_line_and_the_cache_is_unchanged(
        case, exported, ours, tmp_path, capsys):
    build, member, reason = HOSTILE[case]
    (tmp_path / "build").mkdir()
    bundle = build(exported, tmp_path / "build")
    before = digest(ours)
    status, out, err = run_import(bundle, capsys)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert member in err, err
    assert re.search(reason, err), err
    assert err.rstrip().endswith("nothing was written"), err
    assert digest(ours) == before


def test_a_different_valid_entry_already_there_is_not_overwritten(exported, ours, capsys):
    """Skip identical, refuse different: an entry of the same key whose files differ (here its
    meta.json, still valid) stays as it is and the bundle is refused."""
    first = _folders(exported["manifest"])[0]
    meta = ours / FIGURE / first / "meta.json"
    meta.write_text(meta.read_text().replace('"created": "', '"created": "1'))
    cache_entries.load(ours / FIGURE / first)  # still a valid entry
    before = digest(ours)
    status, out, err = run_import(exported["bundle"], capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert f"'{FIGURE}/{first}' differs from the valid entry already in the cache" in err
    assert digest(ours) == before


def test_a_valid_bundle_imports_and_the_cache_reads_it(exported, ours, capsys, monkeypatch):
    """The bundle's entries land where this code's keys name them; the one already there is
    skipped; the lock folder keeps what it held (the import takes the lock of each entry it
    writes, as every writer does, and so names itself its holder); nothing is left in staging;
    the chapter then reads every entry and computes none; a second import changes nothing."""
    folders = _folders(exported["manifest"])
    locks = {p.name: p.read_bytes() for p in (ours / FIGURE / LOCKS).iterdir()}
    status, out, err = run_import(exported["bundle"], capsys)
    assert status == 0, err
    assert out.startswith(f"{FIGURE}: {len(folders) - 1} entries written, 1 already in the "
                          f"cache; {len(folders)} match this code's keys"), out
    assert not list(ours.glob(f"{bundles.STAGING}*"))
    held = {p.name: p.read_bytes() for p in (ours / FIGURE / LOCKS).iterdir()}
    assert set(held) == set(locks)
    assert {name: data for name, data in held.items() if name.endswith(".lock")
            or name.startswith(folders[0])} == {name: data for name, data in locks.items()
                                                if name.endswith(".lock")
                                                or name.startswith(folders[0])}
    for folder in folders:
        for name in bundles.ENTRY_FILES:
            assert ((ours / FIGURE / folder / name).read_bytes()
                    == (exported["cache"] / FIGURE / folder / name).read_bytes())

    jobs = [job for listed in door.enter(FIGURE, PROFILE).jobs()
            for job in fingerprint.entry_jobs(listed)]
    assert {cache_entries.entry_dir(j.figure, j.name, j.key(), j.module).name
            for j in jobs} == set(folders)

    def refuse(self, progress=None):
        raise AssertionError(f"{self.name} recomputed after an import")

    for job in jobs:
        monkeypatch.setattr(type(job), "compute", refuse)
    door.enter(FIGURE, PROFILE).collect()  # every entry a hit
    before = digest(ours)
    assert run_import(exported["bundle"], capsys)[0] == 0
    assert digest(ours) == before


def test_a_corrupted_entry_there_is_replaced_and_stale_staging_removed(exported, ours, capsys):
    """A corrupted entry (which the cache would discard) is replaced by the bundle's; the
    staging folder of an import killed earlier is removed, one whose import runs is kept."""
    first = _folders(exported["manifest"])[0]
    arrays = ours / FIGURE / first / "arrays.npz"
    arrays.write_bytes(arrays.read_bytes()[:-10])
    stale, running = ours / f"{bundles.STAGING}1-dead", ours / f"{bundles.STAGING}2-live"
    for folder in (stale, running):
        (folder / "files").mkdir(parents=True)
        (folder / bundles.HELD).write_text("")
    with FileLock(str(running / bundles.HELD)):
        status, out, err = run_import(exported["bundle"], capsys)
    assert status == 0, err
    assert out.startswith(f"{FIGURE}: {len(_folders(exported['manifest']))} entries written")
    assert arrays.read_bytes() == (exported["cache"] / FIGURE / first / "arrays.npz").read_bytes()
    assert not stale.exists() and running.exists()


def test_a_refused_import_into_a_missing_results_folder_leaves_no_folder(exported, tmp_path,
                                                                         monkeypatch, capsys):
    root = tmp_path / "not" / "there"
    monkeypatch.setenv("I2O_RESULTS_DIR", str(root))
    bundle = _edited(_wrong_digest)(exported, tmp_path)
    assert run_import(bundle, capsys)[0] == 2
    assert not (tmp_path / "not").exists()


class Endless(io.RawIOBase):
    """A stream of ``head`` then zeros up to ``total`` bytes, counting what it served."""

    def __init__(self, head: bytes, total: int) -> None:
        self.head, self.total, self.served = head, total, 0
        self.name = "endless.tar"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.total - self.served)
        start = self.served
        head = self.head[start:start + count]
        buffer[:count] = head + bytes(count - len(head))
        self.served += count
        return count


def test_a_member_larger_than_its_manifest_says_is_refused_without_being_read(exported, ours):
    """A member that the manifest lists at 1 kB but whose archive header says 50 MB (and whose
    50 MB follow) is refused at its header: the import reads some kB of the stream, not the
    member; the cache is unchanged."""
    folder = _folders(exported["manifest"])[-1]
    files = {f"{FIGURE}/{folder}/arrays.npz": bytes(1024),
             f"{FIGURE}/{folder}/meta.json": files_of(exported)[f"{FIGURE}/{folder}/meta.json"]}
    manifest = json.dumps(listing(files, exported["manifest"])).encode()
    head = io.BytesIO()
    archive = tarfile.open(fileobj=head, mode="w", format=tarfile.USTAR_FORMAT)
    info, data = regular(bundles.MANIFEST, manifest)
    archive.addfile(info, io.BytesIO(data))  # written at once; the archive is never closed
    big = tarfile.TarInfo(f"{FIGURE}/{folder}/arrays.npz")
    big.size = 50 * MB
    prefix = head.getvalue() + big.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    stream = Endless(prefix, len(prefix) + 50 * MB)
    before = digest(ours)
    with pytest.raises(bundles.BundleError, match="is 52428800 bytes in the archive, the "
                                                  "manifest says 1024"):
        bundles.import_bundle(io.BufferedReader(stream))
    assert stream.served < len(prefix) + 64 * 1024  # the member's 50 MB were never read
    assert digest(ours) == before


def test_a_member_stream_longer_than_listed_is_cut_at_the_listed_size(tmp_path):
    """The copy itself never asks for more than the listed size and one byte: a member that
    keeps giving is refused while it is read."""
    asked: list[int] = []

    class Endless:
        def read(self, size: int) -> bytes:
            asked.append(size)
            return b"\0" * size

    listed = bundles._Listed("a/b", 1024, "0" * 64)
    with pytest.raises(bundles.BundleError, match="holds more than the manifest's 1024 bytes"):
        bundles._copy(Endless(), tmp_path / "staged", listed, "'a/b'")  # type: ignore[arg-type]
    assert sum(asked) == 1025


@pytest.mark.parametrize("environment", [{}, {"I2O_THREADS": "2"}, {"I2O_NUMERICS": "native"}],
                         ids=["one thread, portable", "two threads", "native"])
def test_an_entrys_record_gives_the_key_its_folder_is_named_by(environment, monkeypatch):
    """What the import checks an entry against: the key recomputed from its meta.json is the
    one the cache named its folder by, whatever the thread count and numerics mode."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    params, module = {"a": 1, "b": [0.5, "c"]}, "i2o.base.digests"
    path = cache_entries.entry_dir(FIGURE, "toy", params, module)
    cache_entries.store(path, {"x": 1}, {"figure": FIGURE, "name": "toy", "params": params,
                                         "source": cache_key.module_source_hash(module),
                                         "module": module})
    meta = json.loads((path / cache_entries.META).read_text())
    assert path.name == f"toy-{cache_entries.recorded_key(meta)[:20]}"
    assert cache_entries.recorded_key({**meta, "source": "0" * 64})[:20] not in path.name
