"""The book's check of its choice of λ for iMAML: at initialization the meta-gradient of the
hidden layers is not dominated by noise (:mod:`.gradient_noise` measures it), and the table of
every measured meta-gradient's signal and noise.
"""

from __future__ import annotations

import math
from typing import Any

from i2o.chapters.meta import gradient_noise
from i2o.verdicts import gates
from i2o.verdicts.decision import Decision


def _noise_rows(noise: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {name: row for name, row in noise.items() if name.startswith(prefix)}


def usable_meta_gradient_claim(regularization: float) -> str:
    return (f"iMAML (λ = {regularization:g}): at initialization its meta-gradient in the hidden "
            f"layers is not dominated by noise (book check of λ)")


def usable_meta_gradient(noise: dict[str, Any], regularization: float,
                         max_ratio: float) -> Decision:
    """*The chapter's iMAML meta-gradient is not noise at initialization* (a check of the book's
    choice of λ, not a claim of the paper): the noise of the hidden layers' meta-gradient over
    the measured meta-batches (:mod:`.gradient_noise`) is at most ``max_ratio`` × MAML's."""
    name = gradient_noise.imaml_row(regularization)
    maml_rows = _noise_rows(noise, "maml-")

    def measured() -> Decision:  # behind the gate: both rows were measured
        imaml_row = noise[name]
        maml_name, maml_row = next(iter(maml_rows.items()))
        ratio = float(imaml_row["noise"]) / float(maml_row["noise"])
        return gates.compare(ratio, "<=", max_ratio).with_reason(
            f"noise {float(imaml_row['noise']):.3g} against {float(maml_row['noise']):.3g} for "
            f"{maml_name} ({ratio:.2f}×; needs ≤ {max_ratio:g}×); signal/noise "
            f"{float(imaml_row['ratio']):.2f}, pure noise "
            f"{gradient_noise.noise_level(int(imaml_row['n_batches'])):.2f} over "
            f"{int(imaml_row['n_batches'])} meta-batches")

    measured_rows = gates.condition(noise.get(name) is not None and bool(maml_rows),
                                    "the meta-gradient noise of this λ or of MAML was not "
                                    "measured")
    return gates.gated([measured_rows], measured)


def noise_table(noise: dict[str, Any]) -> str:
    """The measured signal and noise of every meta-gradient, as a Markdown table."""
    maml_noise = next(iter(_noise_rows(noise, "maml-").values()), {}).get("noise", math.nan)
    lines = ["| meta-gradient | signal ‖ḡ‖ | noise s | signal/noise | noise / MAML's |",
             "|---|---|---|---|---|"]
    for name, row in noise.items():
        lines.append(f"| {name} | {float(row['signal']):.3g} | {float(row['noise']):.3g} | "
                     f"{float(row['ratio']):.2f} | {float(row['noise']) / maml_noise:.2f} |")
    return "\n".join(lines)
