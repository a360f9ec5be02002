"""Damaged data is named, not decoded: CIFAR-10 image folders against their checksum manifest and
Tiny Shakespeare against its published SHA-256 (budget: ~2 s; small fake folders in tmp_path)."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest
from PIL import Image

from i2o.data import CLASSES, DataCorruptError, DataNotFoundError, load_cifar10, shakespeare
from i2o.data import cifar10 as cifar

PER_CLASS = 2


def _image_folder(root, split="test", manifest=True):
    """A CIFAR-10-shaped image folder of JPEG files, with its ``sha256sum`` manifest beside it."""
    rng = np.random.default_rng(1)
    lines = []
    for name in CLASSES:
        folder = root / "cifar10" / split / name
        folder.mkdir(parents=True)
        for k in range(PER_CLASS):
            file = folder / f"{k:04d}.jpg"
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(file)
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            lines.append(f"{digest}  ./{split}/{name}/{file.name}")
    if manifest:
        (root / "cifar10.sha256").write_text("\n".join(lines) + "\n")
    return root / "cifar10" / split


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("I2O_CACHE_DIR", str(path))
    return path


@pytest.fixture
def no_download(monkeypatch):
    def refuse(root, split, download):
        raise AssertionError("the official release was looked for beside an image folder")

    monkeypatch.setattr(cifar, "_read_official", refuse)


def _truncate(file):
    file.write_bytes(file.read_bytes()[:200])


def test_checked_folder_loads_and_its_arrays_carry_the_manifests_hash(tmp_path, cache):
    _image_folder(tmp_path / "data")
    loaded = load_cifar10("test", data_dir=tmp_path / "data", download=False)
    assert loaded.images.shape == (10 * PER_CLASS, 32, 32, 3)
    assert "checked against" in loaded.source
    manifest_hash = hashlib.sha256((tmp_path / "data" / "cifar10.sha256").read_bytes()).hexdigest()
    cached = sorted(p.name for p in cache.glob("*.npy"))
    assert cached == [f"cifar10-sha256-{manifest_hash[:16]}-test-{kind}.npy"
                      for kind in ("images", "labels")]


def test_truncated_file_is_named_with_what_to_do(tmp_path, cache, no_download):
    folder = _image_folder(tmp_path / "data")
    _truncate(folder / "cat" / "0001.jpg")
    with pytest.raises(DataCorruptError) as error:
        load_cifar10("test", data_dir=tmp_path / "data")
    message = str(error.value)
    assert f"{folder / 'cat' / '0001.jpg'}: truncated or altered (200 bytes" in message
    assert "1 bad file" in message and "What to do: copy these files again" in message
    assert "sha256sum --quiet -c ../cifar10.sha256" in message
    assert not list(cache.glob("*.npy"))  # nothing decoded from a damaged copy is kept


def test_truncated_file_without_a_manifest_is_named(tmp_path, cache, no_download):
    """No manifest: the decoder's own error (PIL's anonymous "truncated") now names the file."""
    folder = _image_folder(tmp_path / "data", manifest=False)
    _truncate(folder / "ship" / "0000.jpg")
    with pytest.raises(DataCorruptError, match=r"ship/0000\.jpg: cannot be decoded: OSError"):
        load_cifar10("test", data_dir=tmp_path / "data")


def test_missing_class_folder_is_named_and_nothing_is_downloaded(tmp_path, cache, no_download):
    folder = _image_folder(tmp_path / "data")
    shutil.rmtree(folder / "dog")
    with pytest.raises(DataNotFoundError) as error:
        load_cifar10("test", data_dir=tmp_path / "data")
    message = str(error.value)
    assert f"class folder dog is missing from {folder}" in message
    assert "Restore it from the original copy" in message


def test_missing_and_unlisted_files_are_named(tmp_path, cache, no_download):
    folder = _image_folder(tmp_path / "data")
    (folder / "frog" / "0000.jpg").unlink()
    shutil.copy(folder / "horse" / "0000.jpg", folder / "horse" / "9999.jpg")
    with pytest.raises(DataCorruptError) as error:
        load_cifar10("test", data_dir=tmp_path / "data")
    message = str(error.value)
    assert "2 bad files" in message
    assert f"{folder / 'frog' / '0000.jpg'}: missing (listed in cifar10.sha256)" in message
    assert f"{folder / 'horse' / '9999.jpg'}: not listed in" in message


def test_only_the_first_load_hashes(tmp_path, cache, no_download):
    """Later loads read the arrays cached under the manifest's hash; a new manifest re-checks."""
    folder = _image_folder(tmp_path / "data")
    first = load_cifar10("test", data_dir=tmp_path / "data")
    _truncate(folder / "bird" / "0000.jpg")
    again = load_cifar10("test", data_dir=tmp_path / "data")  # no hashing: the cached arrays
    np.testing.assert_array_equal(first.images, again.images)
    manifest = tmp_path / "data" / "cifar10.sha256"
    manifest.write_text(manifest.read_text() + "\n")  # another manifest: another key
    with pytest.raises(DataCorruptError, match=r"bird/0000\.jpg: truncated or altered"):
        load_cifar10("test", data_dir=tmp_path / "data")


def test_malformed_manifest_is_named(tmp_path, cache, no_download):
    _image_folder(tmp_path / "data")
    manifest = tmp_path / "data" / "cifar10.sha256"
    manifest.write_text("not a checksum line\n" + manifest.read_text())
    with pytest.raises(DataCorruptError, match="cifar10.sha256, line 1: not a line of sha256sum"):
        load_cifar10("test", data_dir=tmp_path / "data")


def _corpus_copy(tmp_path, data_dir=None):
    folder = tmp_path / "copy" / "tinyshakespeare"
    folder.mkdir(parents=True)
    if data_dir is not None:
        shutil.copy(data_dir / "tinyshakespeare" / "input.txt", folder / "input.txt")
    else:
        (folder / "input.txt").write_text("First Citizen:\nBefore we proceed any further.\n" * 50)
    return folder / "input.txt"


def test_altered_corpus_is_refused_with_what_to_do(tmp_path):
    path = _corpus_copy(tmp_path)
    with pytest.raises(DataCorruptError) as error:
        shakespeare.load_shakespeare(path.parent.parent, download=False)
    message = str(error.value)
    assert f"{path} is not the Tiny Shakespeare text" in message
    assert "What to do: copy it again" in message and shakespeare.SHA256 in message


def test_one_altered_character_of_the_real_corpus_is_caught(tmp_path, data_dir):
    path = _corpus_copy(tmp_path, data_dir)
    shakespeare.load_shakespeare(path.parent.parent, download=False)  # the copy itself is fine
    text = bytearray(path.read_bytes())
    text[500_000] = ord("Z") if text[500_000] != ord("Z") else ord("Y")
    path.write_bytes(bytes(text))
    with pytest.raises(DataCorruptError, match="is not the Tiny Shakespeare text"):
        shakespeare.load_shakespeare(path.parent.parent, download=False)


# -- the decoded arrays in the cache (i2o.data.decoded) ----------------------------------------

@pytest.fixture
def both_splits(tmp_path, cache, monkeypatch):
    """Both splits as checked image folders (one manifest), ``I2O_DATA_DIR`` pointing at them,
    and a count of the decodes."""
    import os

    from i2o.data import decoded

    root = tmp_path / "data"
    _image_folder(root, "train")
    train_manifest = (root / "cifar10.sha256").read_text()
    _image_folder(root, "test")
    (root / "cifar10.sha256").write_text(train_manifest + (root / "cifar10.sha256").read_text())
    monkeypatch.setenv("I2O_DATA_DIR", str(root))
    decodes = []
    original = cifar._decode_image_folder
    monkeypatch.setattr(cifar, "_decode_image_folder",
                        lambda *a, **k: decodes.append(1) or original(*a, **k))

    def images(split):
        return decoded.array_files(decoded.source(split)[0], split)[0]

    def age(path):  # as if decoded by an earlier process
        os.utime(path, (path.stat().st_mtime - 60, path.stat().st_mtime - 60))

    return images, age, decodes


def test_decoded_arrays_get_their_digest_when_decoded_and_pass_unchanged(both_splits):
    from i2o.data import fetch

    images, age, decodes = both_splits
    said = fetch.ensure("cifar10", download=False)
    assert "decoded arrays checked against their SHA-256" in said and "decoded again" not in said
    assert len(decodes) == 2  # each split decoded once, not again to check it
    sidecar = images("train").with_name(images("train").name + ".sha256")
    assert sidecar.read_text().strip() == hashlib.sha256(images("train").read_bytes()).hexdigest()
    age(images("train"))
    assert "decoded again" not in fetch.ensure("cifar10", download=False) and len(decodes) == 2


def test_a_flipped_byte_in_the_decoded_arrays_is_found_and_decoded_again(both_splits):
    from i2o.data import fetch

    images, age, decodes = both_splits
    fetch.ensure("cifar10", download=False)
    good = np.load(images("test"))
    data = bytearray(images("test").read_bytes())
    data[-5] ^= 0xFF  # a pixel: the array still loads, with other values
    images("test").write_bytes(bytes(data))
    age(images("test"))
    assert not np.array_equal(np.load(images("test")), good)
    said = fetch.ensure("cifar10", download=False)
    assert f"the decoded test arrays {images('test').name}" in said
    assert "did not match their SHA-256" in said and "\n" not in said
    assert np.array_equal(np.load(images("test")), good)
    assert np.array_equal(load_cifar10("test", download=False).images, good)


def test_arrays_decoded_before_digests_existed_are_checked_by_a_fresh_decode(both_splits):
    from i2o.data import fetch

    images, age, decodes = both_splits
    fetch.ensure("cifar10", download=False)
    good = np.load(images("train"))
    for split in ("train", "test"):
        images(split).with_name(images(split).name + ".sha256").unlink()
        age(images(split))
        age(images(split).with_name(images(split).name.replace("images", "labels")))
    assert "decoded again" not in fetch.ensure("cifar10", download=False)  # same bytes as decoded
    assert images("train").with_name(images("train").name + ".sha256").exists()
    (images("train").with_name(images("train").name + ".sha256")).unlink()
    np.save(images("train"), np.zeros_like(good))
    age(images("train"))
    said = fetch.ensure("cifar10", download=False)
    assert "the decoded train arrays" in said
    assert np.array_equal(np.load(images("train")), good)
