"""One figure style for the whole book, and figures saved with their provenance.

Every figure is written as PNG and PDF into ``_build/figures/`` with metadata that says how it was
made: commit, parameter hash, profile, device, date; ``i2o.book.plotting.provenance(path)`` reads it
back.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.text import Text

from i2o.base import lineage, locations
from i2o.base.digests import sha256


class _FontDateNoise(logging.Filter):
    """Drops fontTools' "'created' timestamp seems very low; regarding as unix timestamp".

    Writing a PDF with embedded fonts (``pdf.fonttype`` 42) subsets them with fontTools, which
    warns when a font file's header stores its dates from 1970 instead of 1904. It corrects the
    dates itself (they only stamp the embedded font): the message says nothing to a reader, yet
    it was printed under Figure 5 in the executed notebook. fontTools' other warnings pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "timestamp seems very low" not in str(record.msg)


logging.getLogger("fontTools.ttLib.tables._h_e_a_d").addFilter(_FontDateNoise())

PALETTE = "colorblind"
#: Colours of the two training arms and of reference lines, shared by every chapter.
ARM_COLOURS = {"ift": "#0173b2", "unrolled": "#de8f05", "maml": "#029e73", "imaml": "#cc78bc"}
TRAIN_N_LINE = {"color": "black", "linestyle": "--", "linewidth": 1.0}
ZERO_LINE = {"color": "#d62728", "linestyle": "--", "linewidth": 1.0}


def use_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE)
    plt.rcParams.update({
        "figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight",
        "axes.spines.top": False, "axes.spines.right": False, "legend.frameon": False,
        "pdf.fonttype": 42,
    })


def figures_dir() -> Path:
    return locations.build_dir() / "figures"


def params_hash(params: Mapping[str, Any]) -> str:
    blob = json.dumps(dict(params), sort_keys=True, default=repr)
    return sha256(blob.encode())[:16]


def provenance_of(params: Mapping[str, Any]) -> dict[str, str]:
    return {
        "git_sha": lineage.git_sha(),
        "params_hash": params_hash(params),
        "profile": str(getattr(params, "profile", "unknown")),
        "figure": str(getattr(params, "figure", "unknown")),
        "device": lineage.device_name(),
        "date": lineage.now_iso(),
    }


#: Padding ``savefig.bbox = "tight"`` adds around a figure, in inches (matplotlib's default).
TIGHT_PAD_INCHES = 0.1


#: A little less than the width, in CSS pixels, at which a chapter page shows a figure on a
#: 1,280-px window (about 920: it spans the page, :data:`i2o.book.site.FULL_WIDTH`; the browser
#: test measures it).
PAGE_WIDTH_PX = 900
#: The smallest text a figure may show there, in CSS pixels.
MIN_TEXT_PX = 9.0


def _texts(fig: plt.Figure) -> list[Text]:
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.figure is fig]


def text_extent(fig: plt.Figure) -> dict[str, str]:
    """The size of ``fig``'s smallest visible text and the width of the image it is saved as:
    ``{"smallest_text_pt": …, "width_in": …}``. On a page that shows the image ``w`` CSS pixels
    wide that text is ``smallest_text_pt / 72 · w / width_in`` pixels tall, whatever the dpi."""
    fig.canvas.draw()
    sizes = [float(t.get_fontsize()) for t in _texts(fig)]
    width = fig.get_tightbbox().width + 2 * TIGHT_PAD_INCHES
    return {"smallest_text_pt": f"{min(sizes, default=0.0):.3f}", "width_in": f"{width:.3f}"}


def make_legible(fig: plt.Figure, min_px: float = MIN_TEXT_PX,
                 page_px: float = PAGE_WIDTH_PX) -> None:
    """Enlarge every text of ``fig`` that the page would show smaller than ``min_px``: a figure
    is shown ``page_px`` wide, or at its natural width (its inches × ``figure.dpi``) when that
    is narrower, so text of ``s`` points is ``s / 72 · shown / width_in`` pixels. Text grows
    the figure's bounding box, so this repeats until it holds (three rounds at most)."""
    for _ in range(3):
        width = float(text_extent(fig)["width_in"])
        shown = min(page_px, width * fig.dpi)
        needed = math.ceil(min_px * 72 * width / shown * 20) / 20  # up, to 0.05 pt
        small = [t for t in _texts(fig) if float(t.get_fontsize()) < needed - 1e-9]
        if not small:
            return
        for text in small:
            text.set_fontsize(needed)


def smallest_text_px(extent: Mapping[str, str], shown_width_px: float) -> float:
    """The smallest text of a figure whose :func:`text_extent` is ``extent``, in CSS pixels, when
    the page shows it ``shown_width_px`` wide."""
    return float(extent["smallest_text_pt"]) / 72 * shown_width_px / float(extent["width_in"])


def save(fig: plt.Figure, name: str, params: Mapping[str, Any]) -> dict[str, Path]:
    """Write ``fig`` as ``<name>.png`` and ``<name>.pdf`` with provenance metadata; return paths.

    PNG carries it as text chunks (``i2o:<field>``, with :func:`text_extent`'s two), PDF in its
    document information (``Subject`` holds the JSON, ``Keywords`` the profile).
    """
    info = provenance_of(params)
    extent = text_extent(fig)
    out = figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    png, pdf = out / f"{name}.png", out / f"{name}.pdf"
    fig.savefig(png, metadata={f"i2o:{k}": v for k, v in (info | extent).items()}
                | {"Software": "i2o"})
    fig.savefig(pdf, metadata={"Subject": json.dumps(info),
                               "Keywords": f"profile={info['profile']}", "Creator": "i2o"})
    return {"png": png, "pdf": pdf}


def provenance(path: Path) -> dict[str, str]:
    """The provenance stored in a PNG written by :func:`save`."""
    from PIL import Image, PngImagePlugin  # lazy: PIL only to read a PNG's metadata

    with Image.open(path) as image:
        if not isinstance(image, PngImagePlugin.PngImageFile):
            raise ValueError(f"{path} is not a PNG: no provenance to read")
        return {k.removeprefix("i2o:"): v for k, v in image.text.items() if k.startswith("i2o:")}


def profile_caption(params: Any) -> str:
    """A one-line caption naming the profile, to put under every figure."""
    return f"profile {params.profile!r} · commit {lineage.git_sha()} · {lineage.device_name()}"


def show(fig: plt.Figure, name: str, params: Mapping[str, Any]) -> None:
    """:func:`make_legible` and :func:`save` ``fig``, then display it (in a notebook) and close
    it."""
    make_legible(fig)
    save(fig, name, params)
    plt.show()
    plt.close(fig)
