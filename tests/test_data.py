"""i2o.data.cifar10: sources, caching, clear errors, subsets, tensors. Budget: ~5 s (real data: the
first decode of the offline copy takes ~10 s once, then reads the cache)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from i2o.data import CLASSES, DataNotFoundError, balanced_subset, load_cifar10, to_tensor
from i2o.data import cifar10 as cifar


def _fake_image_folder(root, split="test", per_class=2):
    rng = np.random.default_rng(0)
    for label, name in enumerate(CLASSES):
        folder = root / "cifar10" / split / name
        folder.mkdir(parents=True)
        for k in range(per_class):
            pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            pixels[0, 0] = label  # a marker the test can read back (PNG is lossless)
            Image.fromarray(pixels).save(folder / f"{k:04d}.png")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("I2O_CACHE_DIR", str(path))
    return path


def test_image_folder_is_decoded_in_class_order_and_cached(tmp_path, cache, monkeypatch):
    _fake_image_folder(tmp_path / "data")
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "data"))
    first = load_cifar10("test")
    assert first.images.shape == (20, 32, 32, 3) and first.images.dtype == np.uint8
    assert first.labels.tolist() == [c for c in range(10) for _ in range(2)]
    assert (first.images[:, 0, 0, 0] == first.labels).all()
    assert len(list(cache.glob("cifar10-*-test-*.npy"))) == 2
    for png in (tmp_path / "data" / "cifar10" / "test").rglob("*.png"):
        png.unlink()  # the cache must now be what is read
    second = load_cifar10("test")
    np.testing.assert_array_equal(first.images, second.images)


def test_missing_data_dir_names_the_path(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("I2O_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError, match="nowhere.*I2O_DATA_DIR"):
        load_cifar10("train")


def test_empty_data_dir_without_download_lists_what_was_looked_for(tmp_path, cache):
    with pytest.raises(DataNotFoundError) as error:
        load_cifar10("train", data_dir=tmp_path, download=False)
    message = str(error.value)
    assert str(tmp_path / "cifar10" / "train") in message
    assert "cifar-10-batches-py" in message and "airplane" in message


def test_failed_download_is_reported_with_the_places_looked_at(tmp_path, cache, monkeypatch):
    def offline(root, split, download):
        raise OSError("network is unreachable")

    monkeypatch.setattr(cifar, "_read_official", offline)
    with pytest.raises(DataNotFoundError, match="download.*network is unreachable"):
        load_cifar10("test", data_dir=tmp_path)


def test_bad_split_is_rejected_before_any_io(tmp_path):
    with pytest.raises(ValueError, match="'train', 'test'"):
        load_cifar10("validation", data_dir=tmp_path)


def test_balanced_subset_is_balanced_and_deterministic():
    labels = np.repeat(np.arange(10), 50)
    chosen = balanced_subset(labels, 95, seed=3)
    counts = np.bincount(labels[chosen], minlength=10)
    assert counts.sum() == 95 and counts.max() - counts.min() <= 1
    np.testing.assert_array_equal(chosen, balanced_subset(labels, 95, seed=3))
    assert not np.array_equal(chosen, balanced_subset(labels, 95, seed=4))
    assert len(balanced_subset(labels, 10_000)) == 500


def test_to_tensor_standardises_channels_first():
    images = np.full((2, 32, 32, 3), 255, dtype=np.uint8)
    x = to_tensor(images)
    assert x.shape == (2, 3, 32, 32) and x.dtype == torch.float32
    expected = (1 - torch.tensor(cifar.MEAN)) / torch.tensor(cifar.STD)
    torch.testing.assert_close(x[0, :, 5, 7], expected)


def test_offline_copy_has_the_official_split_sizes(data_dir):
    test = load_cifar10("test", data_dir=data_dir)
    assert test.images.shape == (10_000, 32, 32, 3)
    assert np.bincount(test.labels).tolist() == [1000] * 10
    # a real photograph, not a blank: pixel statistics near CIFAR-10's published means
    assert abs(test.images[..., 0].mean() / 255 - cifar.MEAN[0]) < 0.02
