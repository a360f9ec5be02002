import json

import matplotlib.pyplot as plt
from PIL import Image

from i2o.book import plotting
from i2o.compute import profiles
from i2o.verdicts import claims


def test_claims_json_and_table():
    table = claims.Claims("toy", "quick")
    table.add("D ≥ 0 for all ΔN", 1 > 0, "min D = 3e-12")
    table.add("best MSE before convergence", None, "needs 10⁴ steps", decided_by="paper")
    table.add("IFT more stable", False, "drop 4.1 vs 3.9 points")
    path = table.report().path()
    rows = json.loads(path.read_text())
    assert [r["holds"] for r in rows] == [True, None, False]
    assert set(rows[0]) >= {"claim", "holds", "value", "profile"} and rows[0]["profile"] == "quick"
    html = table.to_html()
    assert "undecided (run 'paper')" in html and "fails" in html and "holds" in html
    assert claims.read_all()["toy"] == rows


def test_saved_figure_carries_provenance(monkeypatch):
    params = profiles.Params("toy", "smoke", {"n": 3})
    plotting.use_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    paths = plotting.save(fig, "toy-figure", params)
    info = plotting.provenance(paths["png"])
    assert info["profile"] == "smoke" and info["figure"] == "toy"
    assert info["params_hash"] == plotting.params_hash({"n": 3})
    assert {"git_sha", "device", "date"} <= set(info)
    assert Image.open(paths["png"]).size[0] > 0
    assert b"profile=smoke" in paths["pdf"].read_bytes()


def test_a_saved_figure_records_its_smallest_text_and_width(monkeypatch):
    """The browser test reads these two to compute the figure's smallest text on the page."""
    params = profiles.Params("toy", "smoke", {"n": 3})
    plotting.use_style()
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [1, 0], label="curve")
    ax.legend(fontsize=7)
    ax.text(0.5, 0.5, "", fontsize=3)  # empty: not text a reader sees
    ax.text(0.5, 0.5, "hidden", fontsize=2).set_visible(False)
    info = plotting.provenance(plotting.save(fig, "toy-extent", params)["png"])
    assert float(info["smallest_text_pt"]) == 7.0
    width = float(info["width_in"])
    assert 5.0 < width < 6.5
    # shown at its natural width at 72 dpi, a 7-pt text is 7 px; at half that width, 3.5 px
    assert abs(plotting.smallest_text_px(info, width * 72) - 7.0) < 1e-9
    assert plotting.smallest_text_px(info, width * 36) < 9.0 <= plotting.smallest_text_px(
        info, width * 100)


def test_small_text_is_enlarged_until_the_page_shows_it_legibly():
    plotting.use_style()
    wide, ax = plt.subplots(figsize=(16, 3))
    ax.plot([0, 1], [1, 0])
    note = ax.text(0.5, 0.5, "note", fontsize=6)
    plotting.make_legible(wide)
    extent = plotting.text_extent(wide)
    shown = min(plotting.PAGE_WIDTH_PX, float(extent["width_in"]) * wide.dpi)
    assert plotting.smallest_text_px(extent, shown) >= plotting.MIN_TEXT_PX - 1e-6
    assert note.get_fontsize() > 6
    # a figure narrower than the page is shown at its natural size: 6 pt at 110 dpi is 9.2 px
    narrow, ax = plt.subplots(figsize=(4, 3), dpi=110)
    kept = ax.text(0.5, 0.5, "note", fontsize=6)
    plotting.make_legible(narrow)
    assert kept.get_fontsize() == 6
    plt.close("all")
