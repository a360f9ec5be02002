"""Results bundles: export → import into an empty cache gives the same entries and a chapter that
computes nothing; every bad bundle is refused with its reason and leaves the cache untouched; a
second import writes nothing; entries of another version of the code are named."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from i2o.base.digests import sha256
from i2o.compute import cache_entries, door
from i2o.provenance import __main__ as commands
from i2o.provenance import bundles, fingerprint

FIGURE, PROFILE = "affine", "smoke"


def _listing(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()} if root.exists() else {}


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}


def _export(figure: str, theirs: Path, tmp_path: Path, monkeypatch) -> tuple[Path, dict, dict]:
    """``figure``'s smoke entries of the cache ``theirs`` exported; the caller then runs against
    an empty cache."""
    monkeypatch.setenv("I2O_RESULTS_DIR", str(theirs))
    prints = fingerprint.fingerprint([figure], PROFILE, 0)["chapters"][figure]["entries"]
    bundle = tmp_path / f"{figure}.tar"
    manifest = bundles.export(figure, PROFILE, bundle)
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "ours"))
    return bundle, manifest, prints


@pytest.fixture
def exported(tmp_path, monkeypatch):
    """The small affine chapter computed afresh and exported."""
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "theirs"))
    door.enter(FIGURE, PROFILE).collect()
    return _export(FIGURE, tmp_path / "theirs", tmp_path, monkeypatch)


#: the chapters whose smoke jobs read the offline data sets
NEEDS_DATA = ("stability", "deq_gaps", "diagnose")


@pytest.mark.book
@pytest.mark.parametrize("figure", ["affine", "stability", "deq_gaps", "meta", "separation",
                                    "diagnose"])
def test_an_imported_bundle_gives_the_same_entries_and_nothing_recomputes(figure, tmp_path,
                                                                          monkeypatch, request):
    """Exports what the smoke book computed (its session fixture), so no chapter is computed
    twice by the test suite."""
    if figure in NEEDS_DATA:
        request.getfixturevalue("data_dir")
    theirs = request.getfixturevalue("built_book")["build"].parent / "results"
    bundle, manifest, prints = _export(figure, theirs, tmp_path, monkeypatch)
    assert manifest["figure"] == figure and not manifest["missing"] and manifest["files"]
    report = bundles.import_bundle(bundle)
    jobs = [job for listed in door.enter(figure, PROFILE).jobs()
            for job in fingerprint.entry_jobs(listed)]
    entries = {cache_entries.entry_dir(j.figure, j.name, j.key(), j.module).name for j in jobs}
    assert sorted(report.written) == sorted(report.current) == sorted(entries)
    assert not report.other
    assert fingerprint.fingerprint([figure], PROFILE, 0)["chapters"][figure]["entries"] == prints

    def refuse(self, progress=None):
        raise AssertionError(f"{self.name} recomputed after an import")

    for job in jobs:
        monkeypatch.setattr(type(job), "compute", refuse)
    door.enter(figure, PROFILE).collect()  # reads every entry, computes none of the jobs
    again = bundles.import_bundle(bundle)  # a second import is a no-op
    assert again.written == [] and sorted(again.present) == sorted(entries)


def _refused(bundle: Path, match: str) -> None:
    root = cache_entries.results_dir()
    before = _listing(root)
    with pytest.raises(bundles.BundleError, match=match):
        bundles.import_bundle(bundle)
    assert _listing(root) == before


def test_bad_bundles_are_refused_before_anything_is_written(exported, tmp_path):
    bundle, manifest, _ = exported
    members = _members(bundle)
    data = bundle.read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    _refused(tmp_path / "cut.tar", "truncated|does not match|absent")
    (tmp_path / "text.tar").write_text("not an archive")
    _refused(tmp_path / "text.tar", "not a readable bundle")
    first = manifest["files"][0]["path"]
    tampered = {**members, first: members[first][:-1] + bytes([members[first][-1] ^ 1])}
    _refused(_tar(tmp_path / "tampered.tar", tampered), "does not match its checksum")
    _refused(_tar(tmp_path / "extra.tar", {**members, f"{FIGURE}/x-1/arrays.npz": b"x"}),
             "is not listed in the manifest")
    escaping = {**manifest, "files": [*manifest["files"],
                                      {"path": "../x", "size": 1, "sha256": "0"}]}
    _refused(_tar(tmp_path / "escape.tar", {**members, "manifest.json":
                                            json.dumps(escaping).encode(), "../x": b"x"}),
             "outside the cache")
    other = {**manifest, "figure": "nope"}
    _refused(_tar(tmp_path / "other.tar", {**members,
                                           "manifest.json": json.dumps(other).encode()}),
             "unknown figure")
    wrong = {**manifest, "figure": "stability"}
    _refused(_tar(tmp_path / "wrong.tar", {**members,
                                           "manifest.json": json.dumps(wrong).encode()}),
             "is not an entry of 'stability'")
    forged = {**manifest, "contents_sha256": "0" * 64}
    _refused(_tar(tmp_path / "forged.tar", {**members,
                                            "manifest.json": json.dumps(forged).encode()}),
             "contents digest")
    newer = {**manifest, "format": bundles.FORMAT + 1}
    _refused(_tar(tmp_path / "newer.tar", {**members,
                                           "manifest.json": json.dumps(newer).encode()}),
             "bundle format")


def test_the_contents_digest_names_the_files_whatever_the_export(exported, tmp_path,
                                                                 monkeypatch):
    """The digest a published summary records (written nowhere) is the exported bundle's and
    the import's; one changed byte of one file changes it."""
    bundle, manifest, _ = exported
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "theirs"))
    described = bundles.describe_entries(FIGURE, PROFILE)
    assert described["contents_sha256"] == manifest["contents_sha256"]
    assert described["files"] == len(manifest["files"]) and not described["missing"]
    again = bundles.export(FIGURE, PROFILE, tmp_path / "again.tar")
    assert again["contents_sha256"] == manifest["contents_sha256"]
    changed = [{**manifest["files"][0], "sha256": "f" * 64}, *manifest["files"][1:]]
    assert bundles.contents_digest(changed) != manifest["contents_sha256"]
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "ours"))
    assert bundles.import_bundle(bundle).contents_sha256 == manifest["contents_sha256"]


def test_entries_of_another_version_of_the_code_are_named_not_used(exported, tmp_path):
    """An entry computed by other code: its meta.json records another code hash, and its folder
    is named by the key that hash gives."""
    bundle, manifest, _ = exported
    members = _members(bundle)
    first = manifest["files"][0]["path"]
    folder = "/".join(first.split("/")[:2])
    meta = json.loads(members[f"{folder}/meta.json"])
    meta["source"] = "0" * 64  # what another version of the code computed
    moved = f"{FIGURE}/{meta['name']}-{cache_entries.recorded_key(meta)[:20]}"
    members[f"{folder}/meta.json"] = json.dumps(meta).encode()
    renamed = {name.replace(folder, moved): data for name, data in members.items()}
    resized = {f"{folder}/meta.json": {"size": len(members[f"{folder}/meta.json"]),
                                       "sha256": sha256(members[f"{folder}/meta.json"])}}
    listed = {**manifest, "files": [{**f, **resized.get(f["path"], {}),
                                     "path": f["path"].replace(folder, moved)}
                                    for f in manifest["files"]]}
    listed["contents_sha256"] = bundles.contents_digest(listed["files"])
    renamed["manifest.json"] = json.dumps(listed).encode()
    report = bundles.import_bundle(_tar(tmp_path / "old.tar", renamed))
    assert report.other == [moved.split("/")[1]]
    assert "another version of the code" in report.describe()


def test_the_commands_report_errors_with_status_2(tmp_path, capsys):
    (tmp_path / "bad.tar").write_text("x")
    assert commands.main(["import", str(tmp_path / "bad.tar")]) == 2
    assert "error:" in capsys.readouterr().err
    assert commands.main(["export", "intro-not-a-figure", "-o", str(tmp_path / "o.tar")]) == 2


def _forget_first_entry(manifest: dict, cache: Path) -> str:
    """Delete the first entry of ``manifest`` from ``cache`` (as if not computed yet); its name."""
    name = manifest["files"][0]["path"].split("/")[1]
    shutil.rmtree(cache / FIGURE / name)
    return name


def test_an_export_that_would_leave_out_entries_is_refused_unless_partial(exported, tmp_path,
                                                                          monkeypatch, capsys):
    _, complete, _ = exported
    assert complete["partial"] is False and complete["missing"] == []
    total = complete["entries"]
    assert total == len({f["path"].split("/")[1] for f in complete["files"]}) > 1
    theirs = tmp_path / "theirs"
    monkeypatch.setenv("I2O_RESULTS_DIR", str(theirs))
    gone = _forget_first_entry(complete, theirs)
    command = ["export", FIGURE, "--profile", PROFILE, "-o", str(tmp_path / "part.tar")]

    assert commands.main(command) == 2
    err = capsys.readouterr().err
    assert f"1 of {total} entries of {FIGURE} ({PROFILE}) are not computed yet: {gone};" in err
    assert "--partial" in err and not (tmp_path / "part.tar").exists()

    assert commands.main([*command, "--partial"]) == 0
    out = capsys.readouterr().out
    assert f"partial bundle: 1 of {total} entries of {FIGURE} ({PROFILE}) are not computed " \
           f"yet: {gone}" in out
    contents = _members(tmp_path / "part.tar")
    manifest = json.loads(contents.pop("manifest.json"))
    assert manifest["partial"] is True and manifest["missing"] == [gone]
    assert manifest["entries"] == total and all(gone not in path for path in contents)

    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "empty"))
    with pytest.raises(bundles.IncompleteExport, match=f"^{total} of {total} entries"):
        bundles.export(FIGURE, PROFILE, tmp_path / "none.tar")
    assert not (tmp_path / "none.tar").exists()


def test_a_partial_bundle_with_checkpoints_carries_the_unfinished_jobs_checkpoints(
        exported, tmp_path, monkeypatch):
    """A sweep in progress moves to another machine: an unfinished job's checkpoint travels
    (a write in progress, a dot name, does not) and lands where that machine's job resumes."""
    _, complete, _ = exported
    theirs = tmp_path / "theirs"
    monkeypatch.setenv("I2O_RESULTS_DIR", str(theirs))
    unfinished = _forget_first_entry(complete, theirs)
    checkpoint = theirs / FIGURE / f"{unfinished}.ckpt"
    (checkpoint / "step").mkdir(parents=True)
    (checkpoint / "step" / "state.pt").write_bytes(b"half-way")
    (checkpoint / ".state.pt.tmp-1234").write_bytes(b"being written")
    bundle = tmp_path / "moving.tar"

    without = bundles.export(FIGURE, PROFILE, bundle, partial=True)
    assert not any(".ckpt/" in f["path"] for f in without["files"])
    manifest = bundles.export(FIGURE, PROFILE, bundle, partial=True, checkpoints=True)
    carried = [f["path"] for f in manifest["files"] if ".ckpt/" in f["path"]]
    assert carried == [f"{FIGURE}/{unfinished}.ckpt/step/state.pt"]

    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "elsewhere"))
    bundles.import_bundle(bundle)
    landed = tmp_path / "elsewhere" / FIGURE / f"{unfinished}.ckpt"
    assert _listing(landed) == {"step/state.pt": b"half-way"}


@pytest.mark.parametrize("suffix", [".tar.xz", ".tar.gz"])
def test_a_compressed_bundle_carries_the_same_files(exported, tmp_path, monkeypatch, suffix):
    """The name's suffix compresses the archive; the import reads it like a plain one."""
    plain, manifest, _ = exported
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "theirs"))
    packed = tmp_path / f"packed{suffix}"
    again = bundles.export(FIGURE, PROFILE, packed)
    assert again["contents_sha256"] == manifest["contents_sha256"]
    assert packed.read_bytes()[:6] != plain.read_bytes()[:6]  # not a plain tar
    theirs, ours = _members(plain), _members(packed)
    assert {**theirs, "manifest.json": ours["manifest.json"]} == ours
    monkeypatch.setenv("I2O_RESULTS_DIR", str(tmp_path / "fresh"))
    assert bundles.import_bundle(packed).written
