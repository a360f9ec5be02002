"""Reading the authors' Figure 2 CSV files, on fixtures written here in their layouts (~2 s)."""

from __future__ import annotations

import csv

import matplotlib
import numpy as np
import pytest

from i2o.chapters.deq_gaps.authors_csv import AuthorsCsvError, layout, read_curve, read_figure2
from i2o.chapters.deq_gaps.curves import plot_gap

matplotlib.use("Agg")


def _write(path, header, rows):
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def imagenet_csv(tmp_path):
    """The columns ``cls_valid.py`` appends, one row per F_THRES (written in a shuffled order,
    N = 26 twice as when a run is repeated)."""
    header = ["phase", "seed", "top1", "cvg_rel", "cvg_abs", "percent", "opts", "warm_init",
              "f_thres_train", "f_thres_val", "b_thres", "jac_loss_weight", "da_inv",
              "da_inv_weight", "dataset", "model_size"]
    table = {10: (70.0, 0.30), 26: (79.0, 0.05), 40: (78.5, 0.01), 18: (77.0, 0.10)}
    rows = [["eval", "", f"{acc}", f"{rel}", f"{10 * rel}", "1.0", f"DEQ.F_THRES,{n}", "False",
             "", f"{n}", "27", "0.0", "False", "0.0", "imagenet", "cls_mdeq_XL"]
            for n, (acc, rel) in table.items()]
    rows.append(["eval", "", "79.2", "0.05", "0.5", "1.0", "", "False", "", "26", "27", "0.0",
                 "False", "0.0", "imagenet", "cls_mdeq_XL"])
    return _write(tmp_path / "imagenet_n_iter_results.csv", header, rows)


def test_imagenet_accuracy_becomes_error_gap(imagenet_csv):
    curve = read_curve(imagenet_csv, "imagenet")
    np.testing.assert_array_equal(curve.iterations, [10, 18, 26, 40])
    assert curve.train_iters == 26
    # 100 − top1, duplicates at N = 26 averaged: 100 − 79.1 = 20.9
    np.testing.assert_allclose(curve.value, [30.0, 23.0, 20.9, 21.5])
    np.testing.assert_allclose(curve.gap, [9.1, 2.1, 0.0, 0.6], atol=1e-12)
    np.testing.assert_allclose(curve.residual, [0.30, 0.10, 0.05, 0.01])
    assert np.all(np.isnan(curve.gap_se))
    summary = curve.summary()
    assert summary["best_gap"] == pytest.approx(0.6) and summary["fraction_negative_worse"] == 1.0


def test_imagenet_loss_file_is_not_turned_into_an_error(imagenet_csv):
    curve = read_curve(imagenet_csv, "imagenet", metric="loss")
    np.testing.assert_allclose(curve.value, [70.0, 77.0, 79.1, 78.5])
    assert curve.metric == "cross-entropy loss"
    with pytest.raises(ValueError, match="only meaningful"):
        read_curve(imagenet_csv, "wikitext", metric="loss")


def test_cityscapes_miou_is_negated(tmp_path):
    path = _write(tmp_path / "cityscapes.csv",
                  ["phase", "miou", "cvg_rel", "cvg_abs", "percent", "opts", "f_thres_val",
                   "dataset", "model_size"],
                  [["eval", "0.80", "0.02", "1", "1", "", "27", "cityscapes", "XL"],
                   ["eval", "0.70", "0.20", "1", "1", "", "5", "cityscapes", "XL"]])
    curve = read_curve(path, "cityscapes")
    np.testing.assert_allclose(curve.gap, [0.10, 0.0])


def test_wikitext_split_columns(tmp_path):
    header = ["n_forward", "test_loss", "test_ppl", "test_cvg_rel", "test_cvg_abs", "val_loss",
              "val_ppl", "val_cvg_rel", "val_cvg_abs", "train_loss", "train_ppl",
              "train_cvg_rel", "train_cvg_abs", "f_solver"]
    rows = [[n, 3.0, 20.0 + abs(n - 30) / 10, 0.1, 1, 3.0, 21.0 + abs(n - 30) / 5, 1.0 / n, 1,
             2.9, 18.0, 0.2, 1, "broyden"] for n in (10, 30, 50)]
    path = _write(tmp_path / "transformer_results.csv", header, rows)
    val = read_curve(path, "wikitext")
    np.testing.assert_allclose(val.gap, [4.0, 0.0, 4.0])
    np.testing.assert_allclose(val.residual, [0.1, 1 / 30, 0.02])
    test = read_curve(path, "wikitext", split="test")
    np.testing.assert_allclose(test.gap, [2.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="split"):
        read_curve(path, "wikitext", split="dev")


def test_sintel_rows_are_filtered(tmp_path):
    header = ["perf", "cvg_rel", "cvg_abs", "dataset", "f_thres_val", "solver", "warm_start",
              "fixed_point_reuse"]
    rows = [[1.5, 0.01, 1, "sintel", 36, "broyden", False, False],
            [1.7, 0.10, 1, "sintel", 10, "broyden", False, False],
            [9.9, 0.10, 1, "sintel", 10, "anderson", False, False],
            [9.9, 0.10, 1, "kitti", 36, "broyden", False, False]]
    curve = read_curve(_write(tmp_path / "optical_flow_results.csv", header, rows), "sintel")
    np.testing.assert_allclose(curve.value, [1.7, 1.5])


def test_clear_errors(tmp_path, imagenet_csv):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_curve(tmp_path / "missing.csv", "imagenet")
    with pytest.raises(ValueError, match="kind must be one of"):
        read_curve(imagenet_csv, "mnist")
    with pytest.raises(AuthorsCsvError, match=r"missing column\(s\) \['n_forward'"):
        read_curve(imagenet_csv, "wikitext")
    with pytest.raises(AuthorsCsvError, match="no row with f_thres_val = 30"):
        read_curve(imagenet_csv, "imagenet", train_iters=30)
    empty = _write(tmp_path / "empty.csv", ["top1", "f_thres_val"], [])
    with pytest.raises(AuthorsCsvError, match="no row"):
        read_curve(empty, "imagenet")
    bad = _write(tmp_path / "bad.csv", ["top1", "f_thres_val"], [["70", "twenty"]])
    with pytest.raises(AuthorsCsvError, match="not a number"):
        read_curve(bad, "imagenet")


def test_figure2_curves_plot_like_the_books_own(imagenet_csv):
    import matplotlib.pyplot as plt

    curves = read_figure2({"imagenet": imagenet_csv})
    assert [c.label for c in curves] == [layout("imagenet").title]
    fig, ax = plt.subplots()
    assert plot_gap(ax, curves[0]) is not None
    plt.close(fig)
