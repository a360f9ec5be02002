"""i2o.base.digests: a file's digest is its bytes' digest; arrays are digested with the two headers
the stored digests were made with (probes unnamed, entry fingerprints named)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from i2o.base.digests import BLOCK, arrays_sha256, sha256


def test_a_file_read_in_blocks_has_its_bytes_digest(tmp_path):
    data = bytes(range(256)) * (BLOCK // 256 + 3)  # more than one block
    (tmp_path / "f").write_bytes(data)
    assert sha256(tmp_path / "f") == sha256(data) == hashlib.sha256(data).hexdigest()
    assert sha256(b"") == hashlib.sha256(b"").hexdigest()


def test_arrays_are_digested_with_their_headers_in_order():
    x, y = np.arange(3, dtype=np.float32), np.array([[1, 2]], dtype=np.int64)
    unnamed = hashlib.sha256(b"<f4(3,)" + x.tobytes() + b"<i8(1, 2)" + y.tobytes()).hexdigest()
    named = hashlib.sha256(b"x\0<f4\0(3,)\0" + x.tobytes()
                           + b"y\0<i8\0(1, 2)\0" + y.tobytes()).hexdigest()
    assert arrays_sha256([x, y]) == unnamed
    assert arrays_sha256([x, y], ["x", "y"]) == named
    assert arrays_sha256([y, x]) != unnamed
    assert arrays_sha256([torch.arange(3, dtype=torch.float32), y]) == unnamed
    assert arrays_sha256([np.asfortranarray(np.ones((2, 2)))]) == \
        arrays_sha256([np.ones((2, 2))])  # C order whatever the layout
    with pytest.raises(ValueError, match="1 names for 2 arrays"):
        arrays_sha256([x, y], ["x"])
