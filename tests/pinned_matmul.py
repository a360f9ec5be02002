"""A toy job for the numerics guard's tests (``tests/test_pins.py``): one float64 matrix product
through NumPy's OpenBLAS, whose last bits depend on the OpenBLAS core (``OPENBLAS_CORETYPE``) on
a CPU with AVX-512. Importable by name from ``tests/`` in the test process, its subprocesses and
the sweep's workers (``PYTHONPATH``)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from i2o.compute.job import Job


@dataclasses.dataclass(frozen=True)
class MatmulJob(Job):
    """The product of two standard normal matrices drawn from ``seed``; says when it computes."""

    figure: ClassVar[str] = "pins-toy"
    seed: int = 0

    @property
    def name(self) -> str:
        return f"matmul-{self.seed}"

    def compute(self, progress: bool | None = None) -> Mapping[str, Any]:
        print("COMPUTING", flush=True)
        rng = np.random.default_rng(self.seed)
        return {"product": rng.standard_normal((257, 263)) @ rng.standard_normal((263, 129))}


def digest(result: Mapping[str, Any]) -> str:
    """The SHA-256 of a result's product, its bits."""
    return hashlib.sha256(np.ascontiguousarray(result["product"]).tobytes()).hexdigest()
