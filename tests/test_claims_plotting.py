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
